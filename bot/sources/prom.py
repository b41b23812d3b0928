"""The Telemetry interface over a real Prometheus (prometheus-api-client).

One PromQL query per call, evaluated at an explicit `time` so a fixed
evaluation instant (`at=`) reads history exactly as a scenario does. Metric
name alternatives (`A|B`) and selector alternatives become `or` unions; label
values are regex-escaped. Every failure becomes a TelemetryError naming the
URL, what went wrong and what to check; the bearer token never appears in a
message or a repr.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from layers.sources import BEFORE_WINDOW_S, RangeSeries, Sample, Selector, TelemetryError

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# RE2 metacharacters; Prometheus anchors label regexes, so escaping these makes a literal match.
_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")
# Past this many characters of percent-encoded query the selectors are dropped
# and applied here instead: proxies in front of Prometheus commonly cap request
# lines at 8 KiB, and the client library sends the query in the URL even for POST.
MAX_ENCODED_QUERY = 6000

# Functions over a range, keyed by the Telemetry method name.
_RANGE_FUNCS = ("increase", "rate", "max_over_time")


def _escape_regex(value: str) -> str:
    return _REGEX_META.sub(r"\\\1", value)


def _promql_string(value: str) -> str:
    """A PromQL double-quoted string literal (Go escaping)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def matches(labels: Mapping[str, str], match: Sequence[Selector]) -> bool:
    """Whether a series' labels satisfy any one alternative (a missing label counts as "")."""
    if not match:
        return True
    return any(all(labels.get(k, "") in vals for k, vals in alt.items()) for alt in match)


def _matchers(alt: Selector) -> list[str]:
    out = []
    for label, values in sorted(alt.items()):
        regex = "|".join(_escape_regex(v) for v in values)
        out.append(f"{label}=~{_promql_string(regex)}")
    return out


def build_query(func: str | None, metric: str, window_s: int | None, match: Sequence[Selector]) -> str:
    """The PromQL for one read; `func` None means the raw series (instant or range).

    Raw series with name alternatives use one `{__name__=~"A|B"}` selector (names
    are kept, so the series stay distinct); functions drop the name, so each name
    gets its own term and `or` keeps the left one on an identical label set.
    """
    names = metric.split("|")
    alts: list[list[str]] = [_matchers(a) for a in match] if match else [[]]
    if func is None:
        name_sel = [f'__name__=~"{metric}"'] if len(names) > 1 else []
        prefix = "" if name_sel else metric
        return " or ".join(f"{prefix}{{{','.join(name_sel + m)}}}" if name_sel or m else metric for m in alts)
    terms = []
    for name in names:
        for m in alts:
            sel = f"{name}{{{','.join(m)}}}" if m else name
            terms.append(f"{func}({sel}[{window_s}s])")
    return " or ".join(terms)


def build_changed_query(metric: str, window_s: int, match: Sequence[Selector]) -> str:
    """Series that changed within the window or began in it (Telemetry.changed).

    Set operators match on every label but the name; `last_over_time` drops it too.
    """
    changes = build_query("changes", metric, window_s, match)
    alts: list[list[str]] = [_matchers(a) for a in match] if match else [[]]
    before = " or ".join(
        f"last_over_time({name}{{{','.join(m)}}}[{BEFORE_WINDOW_S}s] offset {window_s}s)"
        if m
        else f"last_over_time({name}[{BEFORE_WINDOW_S}s] offset {window_s}s)"
        for name in metric.split("|")
        for m in alts
    )
    return f"({changes}) > 0 or (({changes}) unless ({before}))"


class PrometheusTelemetry:
    """Fleet-wide metric reads from Prometheus (or any API-compatible endpoint: Thanos, Mimir)."""

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        token_file: str | None = None,
        ca_bundle: str | None = None,
        insecure: bool = False,
        timeout_s: float = 10.0,
        retries: int = 1,
        at: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"Prometheus URL must be http(s)://host[:port][/path], got {url!r}")
        self.url = url.rstrip("/")
        # Shown in messages: without any user:password@ the URL may carry.
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        self.shown_url = urlunsplit(
            parts._replace(netloc=f"{host}:{parts.port}" if parts.port else host)
        ).rstrip("/")
        self._token = token
        self._token_file = token_file
        self._timeout_s = timeout_s
        self._at = at
        self._clock = clock
        self.queries = 0  # HTTP queries made, for benchmarks and tests
        self._last = threading.local()  # the last HTTP response of this thread, for error bodies

        session = requests.Session()
        session.verify = False if insecure else (ca_bundle or True)
        session.hooks["response"].append(self._remember)
        # Retry a refused connection and a 502/503/504 once, quickly; never a read
        # timeout (that would double the wait); hand the last 5xx back for its body.
        retry = Retry(
            total=retries,
            connect=retries,
            read=False,  # re-raise the read timeout itself
            status=retries,
            backoff_factor=0.2,
            status_forcelist=(502, 503, 504),
            allowed_methods=None,
            raise_on_status=False,
        )
        self._client = PrometheusConnect(url=self.url, session=session, retry=retry, timeout=timeout_s)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"PrometheusTelemetry({self.shown_url!r})"

    @property
    def source(self) -> str:
        return f"Prometheus at {self.shown_url}"

    def now(self) -> float:
        return self._at if self._at is not None else self._clock()

    def close(self) -> None:
        self._client.close()

    # --- Telemetry --------------------------------------------------------------

    def instant(
        self, metric: str, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._vector(None, metric, None, match, above)

    def increase(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._vector("increase", metric, window_s, match, above)

    def rate(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._vector("rate", metric, window_s, match, above)

    def max_over_time(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._vector("max_over_time", metric, window_s, match, above)

    def changed(self, metric: str, window_s: int, match: Sequence[Selector] = ()) -> list[Sample]:
        return self._vector("changed", metric, window_s, match)

    def count(self, metric: str, match: Sequence[Selector] = ()) -> int:
        query, local = self._plan(None, metric, None, match)
        if query is None:
            return 0
        if local:  # the selector was too long for a URL: count what comes back
            return len(self._vector(None, metric, None, match))
        raw = self._call(
            query, lambda: self._client.custom_query(f"count({query})", params={"time": self.now()})
        )
        items = self._items(raw, f"count({query})", "value")
        return int(float(items[0]["value"][1])) if items else 0

    def range(
        self, metric: str, window_s: int, step_s: int, match: Sequence[Selector] = ()
    ) -> list[RangeSeries]:
        if step_s <= 0 or window_s <= 0:
            raise TelemetryError(
                f"range of {metric}: window and step must be positive (got {window_s}s/{step_s}s)"
            )
        query, local = self._plan(None, metric, None, match)
        if query is None:
            return []
        end = self.now()
        start_dt = datetime.fromtimestamp(end - window_s, tz=UTC)
        end_dt = datetime.fromtimestamp(end, tz=UTC)
        raw = self._call(
            query, lambda: self._client.custom_query_range(query, start_dt, end_dt, f"{step_s}s")
        )
        out = []
        for item in self._items(raw, query, "values"):
            labels = dict(item["metric"])
            if local and not matches(labels, match):
                continue
            points = tuple((float(t), float(v)) for t, v in item["values"])
            out.append(RangeSeries(labels=labels, points=points))
        return out

    # --- plumbing ---------------------------------------------------------------

    def _plan(
        self, func: str | None, metric: str, window_s: int | None, match: Sequence[Selector]
    ) -> tuple[str | None, bool]:
        """(query, filter_locally); query None when the selectors can match nothing."""
        names = metric.split("|")
        bad = [n for n in names if not METRIC_NAME.match(n)]
        if bad:
            raise TelemetryError(f"not a Prometheus metric name: {bad[0]!r} (in {metric!r})")
        if window_s is not None and window_s <= 0:
            raise TelemetryError(f"{func} of {metric}: window must be positive (got {window_s}s)")
        for alt in match:
            for label in alt:
                if not LABEL_NAME.match(label):
                    raise TelemetryError(f"not a Prometheus label name: {label!r} (selecting {metric})")
        live = [alt for alt in match if all(alt.values())]  # an empty value list matches no series
        if match and not live:
            return None, False

        def build(alts: Sequence[Selector]) -> str:
            if func == "changed":
                return build_changed_query(metric, window_s or 0, alts)
            return build_query(func, metric, window_s, alts)

        query = build(live)
        if live and len(quote(query)) > MAX_ENCODED_QUERY:
            return build(()), True
        return query, False

    def _vector(
        self,
        func: str | None,
        metric: str,
        window_s: int | None,
        match: Sequence[Selector],
        above: float | None = None,
    ) -> list[Sample]:
        query, local = self._plan(func, metric, window_s, match)
        if query is None:
            return []
        if above is not None:
            # Filtered on the server: only the series that matter cross the wire.
            query = f"({query}) > {float(above)!r}"
        raw = self._call(query, lambda: self._client.custom_query(query, params={"time": self.now()}))
        out = []
        for item in self._items(raw, query, "value"):
            labels = dict(item["metric"])
            if local and not matches(labels, match):
                continue
            out.append(Sample(labels=labels, value=float(item["value"][1])))
        return out

    def _headers(self) -> dict[str, str] | None:
        token = self._token
        if token is None and self._token_file:
            # Re-read each time: projected ServiceAccount tokens rotate under a running pod.
            try:
                with open(self._token_file, encoding="utf-8") as f:
                    token = f.read().strip()
            except OSError as e:
                raise TelemetryError(
                    f"cannot read the Prometheus token file {self._token_file}: {e.strerror}"
                ) from None
        return {"Authorization": f"Bearer {token}"} if token else None

    def _remember(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._last.response = response

    def _call(self, query: str, do: Callable[[], Any]) -> Any:
        self._client.headers = self._headers()
        self._last.response = None
        self.queries += 1
        where = f"Prometheus at {self.shown_url}"
        try:
            return do()
        except requests.exceptions.SSLError as e:
            raise TelemetryError(
                f"{where}: TLS verification failed ({_short(e)}); set PROMETHEUS_CA_BUNDLE to the CA that signed it"
            ) from None
        except requests.exceptions.Timeout:
            raise TelemetryError(self._timeout_error(where, query)) from None
        except requests.exceptions.ConnectionError as e:
            if "timed out" in str(e):  # a timeout that came wrapped in retry errors
                raise TelemetryError(self._timeout_error(where, query)) from None
            raise TelemetryError(
                f"{where}: cannot connect ({_short(e)}); check PROMETHEUS_URL and that Prometheus "
                "is running and reachable from the bot (service, port, NetworkPolicy)"
            ) from None
        except PrometheusApiClientException:
            raise TelemetryError(self._http_error(where, query)) from None
        # Before RequestException: requests' JSONDecodeError is one too.
        except (ValueError, KeyError, TypeError):
            raise TelemetryError(self._body_error(where, query)) from None
        except requests.exceptions.RequestException as e:
            raise TelemetryError(f"{where}: request failed ({_short(e)})") from None
        except OSError as e:  # e.g. the CA bundle file vanished: requests raises it bare
            raise TelemetryError(f"{where}: {e} (check PROMETHEUS_CA_BUNDLE)") from None

    def _timeout_error(self, where: str, query: str) -> str:
        return (
            f"{where}: no answer within {self._timeout_s:g}s to {query!r}; check Prometheus load "
            "and the network path from the bot"
        )

    def _http_error(self, where: str, query: str) -> str:
        resp: requests.Response | None = self._last.response
        if resp is None:
            return f"{where}: request failed for {query!r}"
        code = resp.status_code
        detail = _error_detail(resp)
        if code in (401, 403):
            return (
                f"{where}: HTTP {code} ({detail}); check the bearer token (PROMETHEUS_TOKEN) "
                "and that it may query this Prometheus"
            )
        if code in (400, 422):
            return f"{where}: HTTP {code}, the query was rejected ({detail}): {query!r}"
        if code >= 500:
            return f"{where}: HTTP {code} ({detail}); check Prometheus' health and logs"
        return f"{where}: HTTP {code} ({detail}); check PROMETHEUS_URL points at the Prometheus API"

    def _body_error(self, where: str, query: str) -> str:
        resp: requests.Response | None = self._last.response
        if resp is None:
            return f"{where}: unreadable answer to {query!r}"
        try:
            body = resp.json()
        except ValueError:
            return (
                f"{where}: answered HTTP {resp.status_code} with a body that is not JSON "
                f"({resp.text[:120]!r}); check PROMETHEUS_URL points at the Prometheus API, not a UI or proxy page"
            )
        if isinstance(body, dict) and body.get("status") == "error":
            return f"{where}: query failed ({_error_detail(resp)}): {query!r}"
        return f"{where}: unexpected answer to {query!r}: {json.dumps(body)[:160]}"

    def _items(self, raw: Any, query: str, key: str) -> list[dict[str, Any]]:
        """The result items, checked for the shape this read expects."""
        if not isinstance(raw, list) or not all(
            isinstance(i, dict) and isinstance(i.get("metric"), dict) and key in i for i in raw
        ):
            raise TelemetryError(
                f"Prometheus at {self.shown_url}: unexpected result shape for {query!r} "
                f"(wanted a {'vector' if key == 'value' else 'matrix'})"
            )
        return raw


def _error_detail(resp: requests.Response) -> str:
    """Prometheus' own `errorType: error` when the body has one, else the start of the body."""
    try:
        body = resp.json()
    except ValueError:
        text = resp.text.strip().replace("\n", " ")
        return text[:160] or resp.reason or "empty body"
    if isinstance(body, dict) and body.get("error"):
        kind = body.get("errorType")
        return f"{kind}: {body['error']}" if kind else str(body["error"])
    return json.dumps(body)[:160]


_REASONS = (
    "Connection refused",
    "Connection reset",
    "No route to host",
    "Name or service not known",
    "Temporary failure in name resolution",
    "nodename nor servname provided",
    "Network is unreachable",
    "certificate verify failed",
)


def _short(e: BaseException) -> str:
    """The reason inside a requests/urllib3 error, without the retry wrapping around it."""
    text = str(e)
    for reason in _REASONS:
        if reason.lower() in text.lower():
            return reason
    return text[:200]
