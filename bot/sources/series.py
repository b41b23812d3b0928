"""In-memory telemetry over a scenario's series, with Prometheus 2.42's PromQL semantics.

Times are held as integer milliseconds, as Prometheus stores them, so window
edges compare exactly as they do in the real engine (range selection in 2.42
is closed on both ends: now - window <= t <= now). Series are indexed by
metric name, and lazily by label value, so a query on a 40,000-GPU fleet only
touches the series it selects.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence

from bot.sources.seriesdata import INDEX_LABELS, SeriesData, prom_labels
from layers.sources import BEFORE_WINDOW_S, RangeSeries, Sample, Selector

__all__ = ["INDEX_LABELS", "SeriesData", "SeriesTelemetry", "prom_labels"]

LOOKBACK_MS = 5 * 60 * 1000  # Prometheus' default --query.lookback-delta


def to_ms(t: float) -> int:
    return round(t * 1000)


class _Series:
    """A series with its points in milliseconds, converted when a query first reaches it, and
    its labels read when a query selects it (a fleet file's, see SeriesData)."""

    __slots__ = ("_data", "_labels", "_times", "_values")

    def __init__(self, labels: dict[str, str] | None, data: SeriesData) -> None:
        self._labels = labels
        self._data: SeriesData | None = data
        # Filled on conversion: two empty lists per series were ~27 MB of a 240,000-series fleet.
        self._times: list[int] | None = None
        self._values: list[float] | None = None

    @property
    def labels(self) -> dict[str, str]:
        if self._labels is None:
            assert self._data is not None
            labels = self._data.labels
            self._labels = labels if "" not in labels.values() else prom_labels(labels)
            if self._times is not None:
                self._data = None
        return self._labels

    def key(self, label: str) -> str:
        if self._labels is None:
            assert self._data is not None
            return self._data.key(label)
        return self._labels.get(label, "")

    def _convert(self) -> tuple[list[int], list[float]]:
        if self._times is None or self._values is None:
            assert self._data is not None
            points = self._data.points  # a bad point in a lazily read file raises here, every time
            self._times = [to_ms(t) for t, _ in points]
            self._values = [float(v) for _, v in points]
            if self._labels is not None:
                self._data = None
        return self._times, self._values

    @property
    def times(self) -> list[int]:
        return self._times if self._times is not None else self._convert()[0]

    @property
    def values(self) -> list[float]:
        return self._values if self._values is not None else self._convert()[1]

    def window(self, start_ms: int, end_ms: int) -> tuple[int, int]:
        """Index range of samples with start <= t <= end."""
        return bisect_left(self.times, start_ms), bisect_right(self.times, end_ms)

    def at(self, ts_ms: int) -> float | None:
        """The instant value at ts: the last sample at or before it, within the lookback."""
        i = bisect_right(self.times, ts_ms) - 1
        if i < 0 or self.times[i] < ts_ms - LOOKBACK_MS:
            return None
        return self.values[i]


class _Family:
    """All series of one metric name, with a label index built on first use."""

    def __init__(self) -> None:
        self.series: list[_Series] = []
        self.label_names: set[str] = set()  # every label any series of the family carries
        # Some series' labels are known by their INDEX_LABELS only: label_names holds those
        # of theirs, and a select by another label reads their labels (the digest's whole-fleet
        # reads do; a walk's select by node or pod does not).
        self.deferred = False
        self._index: dict[str, dict[str, Sequence[int]]] = {}

    def add(self, series: _Series, keys: dict[str, str] | None = None) -> None:
        self.series.append(series)
        if keys is None:
            self.label_names.update(series.labels)
        else:
            self.deferred = True
            self.label_names.update(keys)

    def _by_value(self, label: str) -> dict[str, Sequence[int]]:
        idx = self._index.get(label)
        if idx is None:
            if label not in self.label_names and (label in INDEX_LABELS or not self.deferred):
                # Layers ask for label spellings a fleet does not use (hostname, exported_pod…):
                # every series has the empty value, no need to scan 40,000 of them to learn it
                # (nor to hold their numbers: a range, ~48 MB less in a 5,000-node walk).
                idx = {"": range(len(self.series))} if self.series else {}
            else:
                lists: dict[str, list[int]] = {}
                for i, s in enumerate(self.series):
                    lists.setdefault(s.key(label), []).append(i)
                idx = dict(lists)
            self._index[label] = idx
        return idx

    def select(self, match: Sequence[Selector]) -> list[_Series]:
        if not match:
            return self.series
        chosen: set[int] = set()
        for alternative in match:
            candidates: set[int] | None = None
            # Narrow by the most selective label first; later labels only filter that set.
            for label, allowed in sorted(alternative.items(), key=lambda kv: len(kv[1])):
                by_value = self._by_value(label)
                ids = {i for v in allowed for i in by_value.get(v, ())}
                candidates = ids if candidates is None else candidates & ids
                if not candidates:
                    break
            chosen |= set(range(len(self.series))) if candidates is None else candidates
        return [self.series[i] for i in sorted(chosen)]


def extrapolated_rate(
    times: Sequence[int], values: Sequence[float], start_ms: int, end_ms: int, *, is_rate: bool
) -> float | None:
    """Prometheus' extrapolatedRate (promql/functions.go, v2.42) for a counter.

    `times`/`values` are the samples inside [start, end]; None when fewer than two.
    """
    if len(times) < 2:
        return None
    result = values[-1] - values[0]
    prev = values[0]
    for v in values[1:]:
        if v < prev:  # counter reset: the counter restarted from zero
            result += prev
        prev = v
    duration_to_start = (times[0] - start_ms) / 1000
    duration_to_end = (end_ms - times[-1]) / 1000
    sampled_interval = (times[-1] - times[0]) / 1000
    average_between = sampled_interval / (len(times) - 1)
    if result > 0 and values[0] >= 0:
        # A counter cannot go below zero: do not extrapolate past where it would hit it.
        duration_to_zero = sampled_interval * (values[0] / result)
        duration_to_start = min(duration_to_start, duration_to_zero)
    threshold = average_between * 1.1
    interval = sampled_interval
    interval += duration_to_start if duration_to_start < threshold else average_between / 2
    interval += duration_to_end if duration_to_end < threshold else average_between / 2
    factor = interval / sampled_interval
    if is_rate:
        factor /= (end_ms - start_ms) / 1000
    return result * factor


def max_of(values: Sequence[float]) -> float:
    """max_over_time as 2.42 computes it: NaN only wins when every sample is NaN."""
    best = values[0]
    for v in values:
        if v > best or math.isnan(best):
            best = v
    return best


def changes_of(values: Sequence[float]) -> int:
    """PromQL `changes()` over a window's samples (2.42: NaN to NaN is no change)."""
    n = 0
    for prev, current in itertools.pairwise(values):
        if current != prev and not (math.isnan(current) and math.isnan(prev)):
            n += 1
    return n


def _without_name(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k != "__name__"}


class SeriesTelemetry:
    """layers.sources.Telemetry over fixed series, evaluated at a fixed instant."""

    def __init__(self, series: Iterable[SeriesData], now: float, source: str = "scenario") -> None:
        self._now = now
        self._now_ms = to_ms(now)
        self._source = source
        self._families: dict[str, _Family] = {}
        for s in series:
            keys = s.keys
            if keys is not None:  # a fleet file's series: its labels are read when selected
                self._families.setdefault(keys.get("__name__", ""), _Family()).add(_Series(None, s), keys)
                continue
            # Shared with the SeriesData when already clean: a fleet's labels are not copied twice.
            labels = s.labels if "" not in s.labels.values() else prom_labels(s.labels)
            name = labels.get("__name__", "")
            self._families.setdefault(name, _Family()).add(_Series(labels, s))

    @property
    def source(self) -> str:
        return self._source

    def now(self) -> float:
        return self._now

    def _union(
        self,
        metric: str,
        match: Sequence[Selector],
        value_of: Callable[[_Series], float | None],
        *,
        keep_name: bool,
        above: float | None,
    ) -> list[Sample]:
        """`(f(A) or f(B)) > above` over the `|`-separated names: left wins on an identical
        label set, and the filter applies after the union, as in PromQL.

        Within one family every label set is unique, so only a union of several names
        needs the (costly) de-duplication; a filtered-out series costs no label copy.
        """
        out: list[Sample] = []
        names = [n.strip() for n in metric.split("|")]
        seen: set[frozenset[tuple[str, str]]] | None = set() if len(names) > 1 else None
        for name in names:
            family = self._families.get(name)
            if family is None:
                continue
            for s in family.select(match):
                v = value_of(s)
                if v is None:
                    continue
                labels: dict[str, str] | None = None
                if seen is not None:
                    labels = dict(s.labels) if keep_name else _without_name(s.labels)
                    key = frozenset(labels.items())
                    if key in seen:
                        continue
                    seen.add(key)
                if above is not None and not v > above:
                    continue
                if labels is None:
                    labels = dict(s.labels) if keep_name else _without_name(s.labels)
                out.append(Sample(labels, v))
        return out

    def instant(
        self, metric: str, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._union(metric, match, lambda s: s.at(self._now_ms), keep_name=True, above=above)

    def _over_window(
        self,
        metric: str,
        window_s: int,
        match: Sequence[Selector],
        fn: Callable[[_Series, int, int], float | None],
        above: float | None,
    ) -> list[Sample]:
        start_ms = self._now_ms - window_s * 1000

        def value_of(s: _Series) -> float | None:
            lo, hi = s.window(start_ms, self._now_ms)
            return fn(s, lo, hi) if hi > lo else None

        return self._union(metric, match, value_of, keep_name=False, above=above)

    def _extrapolated(
        self, metric: str, window_s: int, match: Sequence[Selector], is_rate: bool, above: float | None
    ) -> list[Sample]:
        start_ms = self._now_ms - window_s * 1000

        def fn(s: _Series, lo: int, hi: int) -> float | None:
            return extrapolated_rate(s.times[lo:hi], s.values[lo:hi], start_ms, self._now_ms, is_rate=is_rate)

        return self._over_window(metric, window_s, match, fn, above)

    def increase(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._extrapolated(metric, window_s, match, False, above)

    def rate(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._extrapolated(metric, window_s, match, True, above)

    def max_over_time(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._over_window(metric, window_s, match, lambda s, lo, hi: max_of(s.values[lo:hi]), above)

    def changed(self, metric: str, window_s: int, match: Sequence[Selector] = ()) -> list[Sample]:
        """`changes(m[w]) > 0 or (changes(m[w]) unless last_over_time(m[1h] offset w))`, as
        PromQL evaluates it: the name alternatives' union keeps the left series on an identical
        label set, and `unless` removes a series when any name has it (labels but the name)
        in the hour before the window."""
        start_ms = self._now_ms - window_s * 1000
        names = [n.strip() for n in metric.split("|")]
        selected = [(name, s) for name in names if (f := self._families.get(name)) for s in f.select(match)]

        def existed(s: _Series) -> bool:
            lo, hi = s.window(start_ms - BEFORE_WINDOW_S * 1000, start_ms)
            return hi > lo

        before = {frozenset(_without_name(s.labels).items()) for _, s in selected if existed(s)}
        out: list[Sample] = []
        seen: set[frozenset[tuple[str, str]]] = set()
        for _name, s in selected:
            lo, hi = s.window(start_ms, self._now_ms)
            if hi <= lo:
                continue  # no sample in the window: changes() has no value for it
            labels = _without_name(s.labels)
            key = frozenset(labels.items())
            if key in seen:
                continue
            seen.add(key)
            n = changes_of(s.values[lo:hi])
            if n > 0 or key not in before:
                out.append(Sample(labels, float(n)))
        return out

    def count(self, metric: str, match: Sequence[Selector] = ()) -> int:
        return len(self.instant(metric, match))

    def range(
        self, metric: str, window_s: int, step_s: int, match: Sequence[Selector] = ()
    ) -> list[RangeSeries]:
        """A range query from now - window to now: the instant value at each step, with lookback."""
        if step_s <= 0:
            raise ValueError(f"step must be positive, got {step_s}")
        start_ms = self._now_ms - window_s * 1000
        steps = range(start_ms, self._now_ms + 1, step_s * 1000)
        out: list[RangeSeries] = []
        seen: set[frozenset[tuple[str, str]]] = set()
        for name in metric.split("|"):
            family = self._families.get(name.strip())
            if family is None:
                continue
            for s in family.select(match):
                key = frozenset(s.labels.items())
                if key in seen:
                    continue
                # Only steps where the series has a sample within the lookback can have a point.
                lo = bisect_left(s.times, start_ms - LOOKBACK_MS)
                if lo == len(s.times) or s.times[lo] > self._now_ms:
                    continue
                points = []
                for ts in steps:
                    v = s.at(ts)
                    if v is not None:
                        points.append((ts / 1000, v))
                if points:
                    seen.add(key)
                    out.append(RangeSeries(dict(s.labels), tuple(points)))
        return out
