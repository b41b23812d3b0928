"""The Prometheus text exposition format (what dcgm-exporter and vLLM serve), as people paste it.

The format is read by prometheus_client's own parser
(`text_string_to_metric_families`, a port of the reference one), line by
line. In front of it stays only what pasted text needs:

- lines that are not metrics are skipped: doc snippets are indented, issues
  carry `# Source:` notes, prose or `(a)` markers;
- docs elide the rest of a label set with `...` (vLLM's metrics design doc):
  the labels written still count;
- label values pasted in single quotes are read as the double-quoted ones;
- OpenMetrics exemplars (` # {…} v` after the value) carry no sample of their
  own: they are dropped (the text parser would read them as a timestamp);
- a line that starts like a metric (a name followed by `{` or by a value, or
  the UTF-8 form `{"name", …}`) but does not parse is an error naming its line
  number and what is wrong with it, so a typo is never silently dropped.
"""

from __future__ import annotations

import math
import re

from prometheus_client.parser import text_string_to_metric_families

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_METRIC_START = re.compile(rf"({_NAME})(?=\{{|[ \t])")
_VALUE_LIKE = re.compile(r"[ \t]+[-+]?(?:\d|\.\d|nan\b|inf)", re.IGNORECASE)
_QUOTED_NAME = re.compile(r'\{[ \t]*"((?:[^"\\\n]|\\.)*)"[ \t]*(?=[,}])')
_LABEL_NAME = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*|"(?:[^"\\\n]|\\.)*")[ \t]*=[ \t]*')
_ELISION = re.compile(r"[ \t]*\.\.\.[ \t]*")

Labels = dict[str, str]


class ExpositionError(ValueError):
    """A metric line that cannot be parsed; `line` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.reason = message


def _quoted(raw: str, quote: str, pos: int) -> tuple[str, int] | None:
    """The quoted text starting at `line[pos] == quote` as a double-quoted literal, and the index
    after its closing quote; None when it is not closed on the line."""
    out, i = ['"'], pos + 1
    while i < len(raw):
        ch = raw[i]
        if ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            out.append("'" if nxt == "'" and quote == "'" else ch + nxt)
            i += 2
            continue
        if ch == quote:
            return "".join(out) + '"', i + 1
        out.append('\\"' if ch == '"' else ch)  # a double quote inside single quotes is text
        i += 1
    return None


def _label_set(line: str, pos: int, lineno: int) -> tuple[str, int]:
    """The label set starting just after `{`, as the parser reads it (elisions gone, single quotes
    made double), and the index after its `}`. What is wrong with it is said here, by line."""
    parts: list[str] = []
    names: set[str] = set()
    while True:
        while True:  # separators, and the elisions docs write among them
            if elided := _ELISION.match(line, pos):
                pos = elided.end()
            elif pos < len(line) and line[pos] in " \t,":
                pos += 1
            else:
                break
        if pos >= len(line):
            raise ExpositionError(lineno, "label set is not closed with '}'")
        if line[pos] == "}":
            return ",".join(parts), pos + 1
        name_m = _LABEL_NAME.match(line, pos)
        if not name_m:
            raise ExpositionError(
                lineno, f"expected a label name at column {pos + 1}, got {line[pos : pos + 12]!r}"
            )
        name = name_m.group(1)
        pos = name_m.end()
        value = _quoted(line, line[pos], pos) if line[pos : pos + 1] in ('"', "'") else None
        if value is None:
            raise ExpositionError(lineno, f"label {name!r}: expected a quoted value at column {pos + 1}")
        if name in names:
            raise ExpositionError(lineno, f"label {name!r} appears twice")
        names.add(name)
        parts.append(f"{name}={value[0]}")
        pos = value[1]
        while pos < len(line) and line[pos] in " \t":
            pos += 1
        if pos >= len(line):
            raise ExpositionError(lineno, "label set is not closed with '}'")
        if line[pos] not in ",}" and not _ELISION.match(line, pos):
            raise ExpositionError(lineno, f"expected ',' or '}}' after label {name!r} at column {pos + 1}")


def _head(line: str, lineno: int) -> tuple[str, str, int] | None:
    """(the metric's name as written, its name and labels as the parser reads them, the index where
    the value starts); None when the line is no metric at all (prose)."""
    if line.startswith("{"):
        m = _QUOTED_NAME.match(line)
        if m is None:
            return None
        labels, pos = _label_set(line, m.end(), lineno)
        name = f'"{m.group(1)}"'
        return m.group(1), "{" + ",".join(p for p in (name, labels) if p) + "}", pos
    start = _METRIC_START.match(line)
    if start is None:
        return None
    pos = start.end()
    brace = len(line) - len(line[pos:].lstrip(" \t"))
    if line[brace : brace + 1] == "{":  # `name {a="b"}`: blanks before the label set are allowed
        labels, pos = _label_set(line, brace + 1, lineno)
        return start.group(1), f"{start.group(1)}{{{labels}}}", pos
    if not _VALUE_LIKE.match(line, pos):
        return None  # prose that happens to begin with a word
    return start.group(1), start.group(1), pos


def _number(token: str, what: str, name: str, lineno: int) -> float:
    # Go's ParseFloat (Prometheus) and Python's float agree on NaN/+Inf/-Inf/1e3; underscores differ.
    try:
        if "_" in token:
            raise ValueError(token)
        return float(token)
    except ValueError:
        raise ExpositionError(lineno, f"{name}: {what} {token!r} is not a number") from None


def _sample(line: str, lineno: int) -> tuple[Labels, float] | None:
    head = _head(line, lineno)
    if head is None:
        return None
    name, series, pos = head
    rest = line[pos:]
    if " # " in rest:  # an OpenMetrics exemplar
        rest = rest.split(" # ", 1)[0]
    tokens = rest.split()
    if not tokens:
        raise ExpositionError(lineno, f"{name}: missing value")
    if len(tokens) > 2:
        raise ExpositionError(lineno, f"{name}: unexpected text after value and timestamp: {tokens[2]!r}")
    _number(tokens[0], "value", name, lineno)
    if len(tokens) == 2 and not math.isfinite(_number(tokens[1], "timestamp", name, lineno)):
        raise ExpositionError(lineno, f"{name}: timestamp {tokens[1]!r} is not finite")
    try:
        samples = [
            s for f in text_string_to_metric_families(f"{series} {' '.join(tokens)}\n") for s in f.samples
        ]
    except ValueError as err:
        raise ExpositionError(lineno, f"{name}: {err}") from None
    if len(samples) != 1:  # one line is one sample; anything else is a line the parser misread
        raise ExpositionError(lineno, f"{name}: not one sample ({len(samples)})")
    (sample,) = samples
    return {"__name__": sample.name, **sample.labels}, float(sample.value)


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
        sample = _sample(line, lineno)
        if sample is not None:
            out.append(sample)
    return out
