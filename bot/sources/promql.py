"""PromQL for the Telemetry reads: one query per read, label values matched literally.

Metric name alternatives (`A|B`) and selector alternatives become `or` unions;
label values are regex-escaped. `plan` checks names and picks between sending the
selectors and filtering locally (a fleet-sized selector would not fit in a URL).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from urllib.parse import quote

from layers.sources import BEFORE_WINDOW_S, Selector, TelemetryError

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# RE2 metacharacters; Prometheus anchors label regexes, so escaping these makes a literal match.
_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$])")
# Past this many characters of percent-encoded query the selectors are dropped
# and applied by the adapter instead: proxies in front of Prometheus commonly cap
# request lines at 8 KiB, and the query goes in the URL (a GET, cacheable by a proxy).
MAX_ENCODED_QUERY = 6000


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


def plan(
    func: str | None, metric: str, window_s: int | None, match: Sequence[Selector]
) -> tuple[str | None, bool]:
    """(query, filter_locally) for one read; query None when the selectors can match nothing."""
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
