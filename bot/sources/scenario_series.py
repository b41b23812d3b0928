"""A scenario's metrics: `metrics:` entries (range or instant-query results) and pasted /metrics text.

Samples are [time, value] pairs (times relative to `now`, Unix seconds or RFC 3339),
increasing and not after `now`; labels are checked as Prometheus' are, each series once.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

import msgspec

from bot.sources.exposition import ExpositionError, parse_exposition
from bot.sources.scenario_model import ABSOLUTE_SECONDS, ScenarioError, number, parse_time, rfc3339, show
from bot.sources.series import INDEX_LABELS, SeriesData, prom_labels

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")


def _labels(
    raw: object, source: str, path: str, checked: set[str], strings: dict[str, str], own: bool = False
) -> dict[str, str]:
    """`checked`: label names already found valid; they repeat across a fleet's series.
    `strings`: one copy of each label value (a node's name is in 48 series of a fleet).
    `own`: `raw` was decoded for this series alone and becomes its labels (no second dict)."""
    if not isinstance(raw, dict):
        raise ScenarioError(source, path, f"expected a label mapping with __name__, got {show(raw)}")
    labels: dict[str, str] = raw if own else {}
    empty: list[str] = []
    for name, value in raw.items():
        if name not in checked:
            if not isinstance(name, str) or not _LABEL_NAME.match(name):
                raise ScenarioError(source, path, f"invalid label name {show(name)}")
            checked.add(name)
        if type(value) is not str:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ScenarioError(
                    source, f"{path}.{name}", f"expected a string label value, got {show(value)}"
                )
            value = str(value)  # `gpu: 3` written unquoted
        if value != "":  # Prometheus: an empty label value is no label
            labels[name] = strings.setdefault(value, value)
        elif own:
            empty.append(name)
    for name in empty:
        del labels[name]
    metric = labels.get("__name__")
    if not metric:
        raise ScenarioError(source, path, "expected `__name__` (the metric name)")
    # Metric names found valid before (a fleet has six, in 240,000 series), kept with the label
    # names under a prefix no label name can carry.
    if "=" + metric in checked:
        return labels
    if not _METRIC_NAME.match(metric):
        raise ScenarioError(source, f"{path}.__name__", f"invalid metric name {metric!r}")
    checked.add("=" + metric)
    return labels


def _point(pair: object, now: float, source: str, where: str) -> tuple[float, float]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise ScenarioError(source, where, f"expected [time, value], got {show(pair)}")
    t = parse_time(pair[0], now, source, f"{where}[0]")
    v = number(pair[1])
    if v is None:
        raise ScenarioError(source, f"{where}[1]", f"expected a number, got {show(pair[1])}")
    return t, v


def _points(raw: object, now: float, source: str, path: str) -> list[tuple[float, float]]:
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(source, path, f"expected a list of [time, value], got {show(raw)}")
    points: list[tuple[float, float]] = []
    last = -math.inf
    latest = now + 0.0005  # sub-millisecond slack: Prometheus keeps milliseconds
    for j, pair in enumerate(raw):
        # Fast path for the common [relative seconds, number]: a 40,000-series scenario loads in a blink.
        if (
            type(pair) is list
            and len(pair) == 2
            and type(pair[1]) in (int, float)
            and type(pair[0]) in (int, float)
        ):
            t0 = pair[0]
            t = now + t0 if t0 <= 0 else (t0 if t0 > ABSOLUTE_SECONDS else math.nan)
            v = float(pair[1])
            if not math.isfinite(t):  # between 0 and 1e9, or not finite: the slow path explains it
                t, v = _point(pair, now, source, f"{path}[{j}]")
        else:
            t, v = _point(pair, now, source, f"{path}[{j}]")
        if not t <= latest or t <= last:
            where = f"{path}[{j}]"
            if t > latest:
                raise ScenarioError(source, where, f"time {rfc3339(t)} is after now ({rfc3339(now)})")
            raise ScenarioError(
                source, where, f"times must increase: {rfc3339(t)} is not after {rfc3339(last)}"
            )
        points.append((t, v))
        last = t
    return points


class RawEntry(msgspec.Struct, forbid_unknown_fields=True):
    """A `metrics` entry decoded but for its points, kept as JSON text until a query reads them."""

    metric: Any = None
    values: msgspec.Raw = msgspec.Raw()
    value: msgspec.Raw = msgspec.Raw()


_ENTRY = msgspec.json.Decoder(RawEntry)


def _entry(raw: msgspec.Raw, copy: bool) -> RawEntry | object:
    """One `metrics` entry of the JSON fast path, its points left as text: an own copy, so the
    file's buffer can go, unless the file is mapped (`copy` False: the views stay on its pages).
    An entry off the usual shape is decoded whole, for the exact message."""
    try:
        entry = _ENTRY.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _decode(raw)
    if copy:
        entry.values, entry.value = entry.values.copy(), entry.value.copy()
    return entry


def _decode(raw: msgspec.Raw) -> object:
    try:
        return msgspec.json.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        # Numbers past a double (1e400), which the standard decoder reads as inf.
        return json.loads(bytes(raw))


class _PointsText:
    """An entry's points as JSON text, decoded and checked when called (a slotted object:
    a closure per series would cost ~50 MB on a 240,000-series fleet)."""

    __slots__ = ("index", "now", "raw", "source")

    def __init__(self, raw: msgspec.Raw, now: float, source: str, index: int) -> None:
        self.raw, self.now, self.source, self.index = raw, now, source, index

    def __call__(self) -> list[tuple[float, float]]:
        return _points(_decode(self.raw), self.now, self.source, f"metrics[{self.index}].values")


def _lazy_points(
    raw: msgspec.Raw, instant: bool, now: float, source: str, index: int
) -> _PointsText | list[tuple[float, float]]:
    """The reader of an entry's points; decoded at once when they are not a JSON list (or
    are short), so a malformed entry is still reported when the file is read."""
    where = f"metrics[{index}]"
    if instant or len(raw) < 8 or memoryview(raw)[0] != 0x5B:  # short: at most one point
        value = _decode(raw) if len(raw) else None
        path = f"{where}.value" if instant else f"{where}.values"
        return _points([value] if instant else value, now, source, path)
    return _PointsText(raw, now, source, index)


# A fleet file's entries decoded for their INDEX_LABELS only (msgspec skips the other labels at
# byte speed); the rest of an entry's labels are read and checked when a query selects it.
_IndexLabels: Any = msgspec.defstruct(
    "_IndexLabels",
    [(f"l{i}", str, "") for i, _ in enumerate(sorted(INDEX_LABELS))],
    rename={f"l{i}": name for i, name in enumerate(sorted(INDEX_LABELS))},
    omit_defaults=True,
)


class _IndexEntry(msgspec.Struct, forbid_unknown_fields=True):
    metric: _IndexLabels = msgspec.field(default_factory=_IndexLabels)  # type: ignore[valid-type]
    values: msgspec.Raw = msgspec.Raw()
    value: msgspec.Raw = msgspec.Raw()


_INDEX_ENTRY = msgspec.json.Decoder(_IndexEntry)


class _Checks:
    """What reading labels shares across a file's series (see `_labels`)."""

    __slots__ = ("checked", "source", "strings")

    def __init__(self, source: str) -> None:
        self.source, self.checked, self.strings = source, set[str](), dict[str, str]()


class _LabelsText:
    """An entry's labels as JSON text, decoded and checked when a query first selects the series."""

    __slots__ = ("checks", "index", "raw")

    def __init__(self, raw: msgspec.Raw, checks: _Checks, index: int) -> None:
        self.raw, self.checks, self.index = raw, checks, index

    def __call__(self) -> dict[str, str]:
        c = self.checks
        entry = _entry(self.raw, copy=False)
        metric = entry.metric if type(entry) is RawEntry else None
        return _labels(metric, c.source, f"metrics[{self.index}].metric", c.checked, c.strings, own=True)


def _indexed(raw: msgspec.Raw, now: float, checks: _Checks, index: int) -> SeriesData | None:
    """A fleet file's entry with its INDEX_LABELS read and its other labels and points left as
    text; None when the entry is off the usual shape (the caller reads it whole, for the message)."""
    try:
        entry = _INDEX_ENTRY.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    keys: dict[str, str] = msgspec.to_builtins(entry.metric)
    metric = keys.get("__name__")
    if not metric or ("=" + metric not in checks.checked and not _METRIC_NAME.match(metric)):
        return None
    checks.checked.add("=" + metric)
    instant = len(entry.value) > 0
    points = _lazy_points(entry.value if instant else entry.values, instant, now, checks.source, index)
    read = points if isinstance(points, _PointsText) else None
    return SeriesData(
        None,
        None if read is not None else points,  # type: ignore[arg-type]
        read=read,
        read_labels=_LabelsText(raw, checks, index),
        keys=keys,
    )


# A mapped file's pages are released every this many entries (~5 MB of text).
RELEASE_EVERY = 16_384


def read_metrics(
    raw: object,
    now: float,
    source: str,
    consume: bool = False,
    release: Callable[[], None] | None = None,
) -> list[SeriesData]:
    """`consume`: the list is the caller's to spend; each entry is dropped once read (peak memory).
    `release`: the entries are views into a mapped file; their points stay views, and the file's
    pages are released every RELEASE_EVERY entries and at the end.

    Entries are dicts, or msgspec.Raw from the JSON fast path (bot/sources/scenario.py):
    decoded one at a time, their points kept as text and checked when first read (same
    messages, at that moment)."""
    if not isinstance(raw, list):
        raise ScenarioError(
            source, "metrics", f"expected a list of {{metric: ..., values: ...}}, got {show(raw)}"
        )
    series: list[SeriesData] = []
    # A mapped (fleet-sized) file: each series is indexed by its INDEX_LABELS and read when a
    # query selects it. Its other labels are checked then, and two entries with one label set
    # are not looked for (that needs every label of every series: the cost this path saves).
    checks = _Checks(source) if release is not None else None
    seen: dict[int, int] = {}  # hash of a label set -> the first entry with it
    collided: dict[frozenset[tuple[str, str]], int] = {}
    checked: set[str] = set()
    strings: dict[str, str] = {}
    for i, entry in enumerate(raw):
        where = f"metrics[{i}]"
        points: _PointsText | list[tuple[float, float]]
        if type(entry) is msgspec.Raw:
            if release is not None and i % RELEASE_EVERY == RELEASE_EVERY - 1:
                release()
            if checks is not None and (lazy := _indexed(entry, now, checks, i)) is not None:
                series.append(lazy)
                if consume:
                    raw[i] = None
                continue
            entry = _entry(entry, copy=release is None)
        if type(entry) is RawEntry:
            labels = _labels(entry.metric, source, f"{where}.metric", checked, strings, own=True)
            instant = len(entry.value) > 0
            points = _lazy_points(entry.value if instant else entry.values, instant, now, source, i)
        else:
            if not isinstance(entry, dict):
                raise ScenarioError(
                    source, where, f"expected {{metric: ..., values: ...}}, got {show(entry)}"
                )
            unknown = sorted(set(map(str, entry)) - {"metric", "values", "value"})
            if unknown:
                raise ScenarioError(
                    source, f"{where}.{unknown[0]}", "unknown key (expected metric and values)"
                )
            labels = _labels(entry.get("metric"), source, f"{where}.metric", checked, strings)
            if "value" in entry:  # a pasted Prometheus instant-query result
                points = _points([entry["value"]], now, source, f"{where}.value")
            else:
                points = _points(entry.get("values"), now, source, f"{where}.values")
        # Keyed by the label set's hash (an int) rather than the set itself: a fleet has
        # 240,000 series, and their frozensets alone would take ~250 MB at the peak.
        key = frozenset(labels.items())
        first = seen.setdefault(hash(key), i)
        if first != i:
            if series[first].labels == labels:
                first_seen: int | None = first
            else:  # two label sets with one hash: rare enough to keep the sets themselves
                first_seen = collided.setdefault(key, i)
                first_seen = None if first_seen == i else first_seen
            if first_seen is not None:
                raise ScenarioError(
                    source, where, f"same labels as metrics[{first_seen}]: expected one entry per series"
                )
        # series[i] is metrics[i]
        if isinstance(points, _PointsText):
            series.append(SeriesData(labels, read=points))
        else:
            series.append(SeriesData(labels, points))
        if consume:
            raw[i] = None
    if release is not None:
        release()
    return series


def add_exposition(raw: object, now: float, source: str, series: list[SeriesData]) -> None:
    if not isinstance(raw, str):
        raise ScenarioError(source, "exposition", f"expected /metrics text, got {show(raw)}")
    try:
        samples = parse_exposition(raw)
    except ExpositionError as e:
        raise ScenarioError(source, "exposition", str(e)) from None
    by_labels = {frozenset(s.labels.items()): s for s in series}
    for labels, value in samples:
        labels = prom_labels(labels)
        key = frozenset(labels.items())
        existing = by_labels.get(key)
        if existing is None:
            by_labels[key] = new = SeriesData(labels, [(now, value)])
            series.append(new)
        elif existing.points[-1][0] < now:
            existing.points.append((now, value))
        else:
            raise ScenarioError(
                source, "exposition", f"{labels['__name__']}{show(labels)}: a second sample at now"
            )
