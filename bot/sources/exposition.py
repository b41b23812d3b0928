"""A parser for the Prometheus text exposition format (what dcgm-exporter and vLLM serve).

Pasted `/metrics` text is messy: doc snippets are indented, issues carry
`# Source:` notes or `(a)` markers, docs elide labels with `...`. Lines that
are not metrics are skipped; a line that starts like a metric (a name followed
by `{` or by a value) but is broken is an error naming its line number, so a
typo is never silently dropped.
"""

from __future__ import annotations

import math
import re

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_METRIC_START = re.compile(rf"({_NAME})(?=\{{|[ \t])")
_VALUE_LIKE = re.compile(r"[ \t]+[-+]?(?:\d|\.\d|nan\b|inf)", re.IGNORECASE)
_LABEL_NAME = re.compile(r"[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*")
_QUOTED = {'"': re.compile(r'"((?:[^"\\\n]|\\.)*)"'), "'": re.compile(r"'((?:[^'\\\n]|\\.)*)'")}
_ESCAPE = re.compile(r"\\(.)")
_ESCAPES = {"n": "\n", "\\": "\\", '"': '"', "'": "'"}
# Documentation elides the rest of a label set with "..." (vLLM's metrics design doc does).
_ELISION = re.compile(r"[ \t]*\.\.\.[ \t]*")

Labels = dict[str, str]


class ExpositionError(ValueError):
    """A metric line that cannot be parsed; `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.reason = message


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    # Unknown escapes are kept as written, as Prometheus' own parser does.
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), raw)


def _parse_float(token: str) -> float:
    # Go's ParseFloat (Prometheus) and Python's float agree on NaN/+Inf/-Inf/1e3;
    # underscores and "infinity" spellings are the only differences that matter.
    if "_" in token:
        raise ValueError(token)
    return float(token)


def _label_set(line: str, pos: int, lineno: int, labels: Labels) -> int:
    """Reads `{a="x",b="y"}` starting just after the `{`; returns the index after `}`."""
    while True:
        elided = _ELISION.match(line, pos)
        if elided:
            pos = elided.end()
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos >= len(line):
            raise ExpositionError(lineno, "label set is not closed with '}'")
        if line[pos] == "}":
            return pos + 1
        name_m = _LABEL_NAME.match(line, pos)
        if not name_m:
            raise ExpositionError(
                lineno, f"expected a label name at column {pos + 1}, got {line[pos : pos + 12]!r}"
            )
        name = name_m.group(1)
        pos = name_m.end()
        quote = line[pos : pos + 1]
        value_re = _QUOTED.get(quote)
        value_m = value_re.match(line, pos) if value_re else None
        if not value_m:
            raise ExpositionError(lineno, f"label {name!r}: expected a quoted value at column {pos + 1}")
        if name in labels:
            raise ExpositionError(lineno, f"label {name!r} appears twice")
        labels[name] = _unescape(value_m.group(1))
        pos = value_m.end()
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos >= len(line):
            raise ExpositionError(lineno, "label set is not closed with '}'")
        if line[pos] == ",":
            pos += 1
        elif line[pos : pos + 1] != "}" and not _ELISION.match(line, pos):
            raise ExpositionError(lineno, f"expected ',' or '}}' after label {name!r} at column {pos + 1}")


def _quoted_name_start(line: str) -> str | None:
    """The metric name of the UTF-8 form `{"my.metric", a="x"} 1`, or None."""
    rest = line[1:].lstrip(" \t")
    quote = rest[:1]
    value_re = _QUOTED.get(quote)
    m = value_re.match(rest) if value_re else None
    if m and not rest[m.end() :].lstrip(" \t").startswith("="):
        return _unescape(m.group(1))
    return None


def _metric_line(line: str, lineno: int) -> tuple[Labels, float] | None:
    labels: Labels = {}
    if line.startswith("{"):
        name = _quoted_name_start(line)
        if name is None:
            return None
        labels["__name__"] = name
        # Re-read the braces with the quoted name removed, so one label reader serves both forms.
        inner = line[1:].lstrip(" \t")
        m = _QUOTED[inner[0]].match(inner)
        assert m is not None
        after = inner[m.end() :].lstrip(" \t")
        line = "{" + (after[1:] if after.startswith(",") else after)
        pos = _label_set(line, 1, lineno, labels)
    else:
        start = _METRIC_START.match(line)
        if not start:
            return None
        pos = start.end()
        brace = len(line) - len(line[pos:].lstrip(" \t"))
        if line[brace : brace + 1] == "{":
            pos = brace  # `name {a="b"}`: blanks before the label set are allowed
        elif not _VALUE_LIKE.match(line, pos):
            return None  # prose that happens to begin with a word
        labels["__name__"] = start.group(1)
        if line[pos] == "{":
            pos = _label_set(line, pos + 1, lineno, labels)
    rest = line[pos:]
    # OpenMetrics exemplars follow " # "; they carry no sample of their own.
    if " # " in rest:
        rest = rest.split(" # ", 1)[0]
    tokens = rest.split()
    name = labels["__name__"]
    if not tokens:
        raise ExpositionError(lineno, f"{name}: missing value")
    if len(tokens) > 2:
        raise ExpositionError(lineno, f"{name}: unexpected text after value and timestamp: {tokens[2]!r}")
    try:
        value = _parse_float(tokens[0])
    except ValueError:
        raise ExpositionError(lineno, f"{name}: value {tokens[0]!r} is not a number") from None
    if len(tokens) == 2:
        try:
            ts = _parse_float(tokens[1])
        except ValueError:
            raise ExpositionError(lineno, f"{name}: timestamp {tokens[1]!r} is not a number") from None
        if math.isnan(ts) or math.isinf(ts):
            raise ExpositionError(lineno, f"{name}: timestamp {tokens[1]!r} is not finite")
    return labels, value


def parse_exposition(text: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of a /metrics text as (labels incl. `__name__`, value), in order.

    Timestamps are checked but not returned: a scenario places every
    exposition sample at its `now`.
    """
    out: list[tuple[dict[str, str], float]] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        sample = _metric_line(line, lineno)
        if sample is not None:
            out.append(sample)
    return out
