"""The Telemetry interface over a real Prometheus (prometheus-api-client).

One PromQL query per call (bot/sources/promql.py), evaluated at an explicit `time`
so a fixed evaluation instant (`at=`) reads history exactly as a scenario does.
Independent reads handed over together (`read_many`, layers.sources.read_all) go
out at once, each worker thread with its own PrometheusConnect (a requests Session
is not safe to share between threads), under one deadline: a Prometheus that
accepts and never answers costs one timeout, not one per query, and ends in a
TelemetryError (the layers' `unknown`), never a hang. Every failure becomes a
TelemetryError naming the URL, what went wrong and what to check; the bearer
token never appears in a message or a repr.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from urllib3.util.retry import Retry

from bot.ops.secrets import mask_text
from bot.sources.promql import build_changed_query, build_query, matches, plan
from bot.sources.stalls import StallMemory
from layers.sources import RangeSeries, Read, Sample, Selector, TelemetryError, read_one

__all__ = ["PrometheusTelemetry", "build_changed_query", "build_query", "matches"]

# At most this many queries of one batch in flight (a walk hands over ten, the digest five).
MAX_IN_FLIGHT = 8


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
        self._sent_token: str | None = token
        self._timeout_s = timeout_s
        self._at = at
        self._clock = clock
        self.queries = 0  # HTTP queries made, for benchmarks and tests
        self.bytes_returned = 0  # bodies of the answers, for benchmarks (benchmarks/digest_bench.py)
        self._last = threading.local()  # the last HTTP response of this thread, for error bodies

        self._ca_bundle, self._insecure, self._retries = ca_bundle, insecure, retries
        # Clients not in use: a query borrows one, so no requests Session is shared between
        # threads, and there are never more than the queries once in flight.
        self._idle: list[PrometheusConnect] = []
        self._lock = threading.Lock()
        # Until when no query is sent: Prometheus just let one time out. A walk reads in two
        # batches (layers 4 and 5); a stalled Prometheus costs it one timeout, not two.
        self._stall = StallMemory(timeout_s)
        # One batch's deadline: every query's own timeout, its retries and their backoff.
        self._deadline_s = timeout_s * (retries + 1) + 0.2 * retries + 1.0

    @contextmanager
    def _borrowed(self) -> Iterator[PrometheusConnect]:
        """A client of its own for one query: a requests Session is not safe to share between threads."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        try:
            if client is None:
                client = self._new_client()
            yield client
        finally:
            if client is not None:
                with self._lock:
                    self._idle.append(client)

    def _new_client(self) -> PrometheusConnect:
        session = requests.Session()
        session.verify = False if self._insecure else (self._ca_bundle or True)
        session.hooks["response"].append(self._remember)
        # Retry a refused connection and a 502/503/504 once, quickly; never a read
        # timeout (that would double the wait); hand the last 5xx back for its body.
        retries = self._retries
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
        return PrometheusConnect(url=self.url, session=session, retry=retry, timeout=self._timeout_s)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"PrometheusTelemetry({self.shown_url!r})"

    @property
    def source(self) -> str:
        return f"Prometheus at {self.shown_url}"

    def now(self) -> float:
        return self._at if self._at is not None else self._clock()

    def close(self) -> None:
        with self._lock:
            clients, self._idle = self._idle, []
        for client in clients:
            client.close()

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
        query, local = plan(None, metric, None, match)
        if query is None:
            return 0
        if local:  # the selector was too long for a URL: count what comes back
            return len(self._vector(None, metric, None, match))
        raw = self._call(query, lambda c: c.custom_query(f"count({query})", params={"time": self.now()}))
        items = self._items(raw, f"count({query})", "value")
        return int(float(items[0]["value"][1])) if items else 0

    def range(
        self, metric: str, window_s: int, step_s: int, match: Sequence[Selector] = ()
    ) -> list[RangeSeries]:
        if step_s <= 0 or window_s <= 0:
            raise TelemetryError(
                f"range of {metric}: window and step must be positive (got {window_s}s/{step_s}s)"
            )
        query, local = plan(None, metric, None, match)
        if query is None:
            return []
        end = self.now()
        start_dt = datetime.fromtimestamp(end - window_s, tz=UTC)
        end_dt = datetime.fromtimestamp(end, tz=UTC)
        raw = self._call(query, lambda c: c.custom_query_range(query, start_dt, end_dt, f"{step_s}s"))
        out = []
        for item in self._items(raw, query, "values"):
            labels = dict(item["metric"])
            if local and not matches(labels, match):
                continue
            points = tuple((float(t), float(v)) for t, v in item["values"])
            out.append(RangeSeries(labels=labels, points=points))
        return out

    def read_many(self, reads: Sequence[Read]) -> list[list[Sample]]:
        """Independent reads at once (at most MAX_IN_FLIGHT), results in order, under one deadline.

        The first failure in order is raised, as one-after-another reads would; a read still
        unanswered at the deadline is a timeout (its thread is left to its socket timeout).
        """
        if not reads:
            return []
        pool = ThreadPoolExecutor(min(len(reads), MAX_IN_FLIGHT), thread_name_prefix="prometheus-read")
        futures = [pool.submit(read_one, self, r) for r in reads]
        answered, _ = wait(futures, timeout=self._deadline_s)
        pool.shutdown(wait=False, cancel_futures=True)  # the deadline passed: nothing more is started
        out: list[list[Sample]] = []
        for r, future in zip(reads, futures, strict=True):
            if future not in answered:
                query = plan(None if r.func == "instant" else r.func, r.metric, r.window_s or None, r.match)[
                    0
                ]
                self._stall.remember(self.url)
                raise TelemetryError(self._timeout_error(f"Prometheus at {self.shown_url}", str(query)))
            out.append(future.result())  # a read's own failure is raised here, in order
        return out

    # --- plumbing ---------------------------------------------------------------

    def _vector(
        self,
        func: str | None,
        metric: str,
        window_s: int | None,
        match: Sequence[Selector],
        above: float | None = None,
    ) -> list[Sample]:
        query, local = plan(func, metric, window_s, match)
        if query is None:
            return []
        if above is not None:
            # Filtered on the server: only the series that matter cross the wire.
            query = f"({query}) > {float(above)!r}"
        raw = self._call(query, lambda c: c.custom_query(query, params={"time": self.now()}))
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
        self._sent_token = token or None  # masked out of any answer quoted in an error
        return {"Authorization": f"Bearer {token}"} if token else None

    def _remember(self, response: requests.Response, *args: Any, **kwargs: Any) -> None:
        self._last.response = response
        with self._lock:
            self.bytes_returned += len(response.content or b"")

    def _call(self, query: str, do: Callable[[PrometheusConnect], Any]) -> Any:
        where = f"Prometheus at {self.shown_url}"
        if self._stall.stalled(self.url):
            raise TelemetryError(
                self._timeout_error(where, query) + " (an earlier query timed out; not retried yet)"
            )
        headers = self._headers()
        self._last.response = None
        with self._lock:
            self.queries += 1
        try:
            with self._borrowed() as client:
                client.headers = headers
                return do(client)
        except requests.exceptions.SSLError as e:
            raise TelemetryError(
                f"{where}: TLS verification failed ({_short(e)}); set PROMETHEUS_CA_BUNDLE to the CA that signed it"
            ) from None
        except requests.exceptions.Timeout:
            self._stall.remember(self.url)
            raise TelemetryError(self._timeout_error(where, query)) from None
        except requests.exceptions.ConnectionError as e:
            if "timed out" in str(e):  # a timeout that came wrapped in retry errors
                self._stall.remember(self.url)
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
        detail = _error_detail(resp, self._sent_token)
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
                f"({_answer_text(resp, self._sent_token)[:120]!r}); check PROMETHEUS_URL points at the Prometheus API, not a UI or proxy page"
            )
        if isinstance(body, dict) and body.get("status") == "error":
            return f"{where}: query failed ({_error_detail(resp, self._sent_token)}): {query!r}"
        answer = mask_text(json.dumps(body))
        answer = answer.replace(self._sent_token, "<masked>") if self._sent_token else answer
        return f"{where}: unexpected answer to {query!r}: {answer[:160]}"

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


def _answer_text(resp: requests.Response, token: str | None) -> str:
    """The body of an answer, masked before it is cut: a proxy's error page may echo the request's
    `Authorization: Bearer …` header, and a cut token would no longer look like one."""
    text = mask_text(resp.text)
    return text.replace(token, "<masked>") if token else text


def _error_detail(resp: requests.Response, token: str | None) -> str:
    """Prometheus' own `errorType: error` when the body has one, else the start of the body."""
    try:
        body = resp.json()
    except ValueError:
        text = _answer_text(resp, token).strip().replace("\n", " ")
        return text[:160] or resp.reason or "empty body"
    if isinstance(body, dict) and body.get("error"):
        kind = body.get("errorType")
        detail = f"{kind}: {body['error']}" if kind else str(body["error"])
    else:
        detail = json.dumps(body)
    detail = mask_text(detail)
    return (detail.replace(token, "<masked>") if token else detail)[:160]


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
