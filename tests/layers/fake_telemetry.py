"""Telemetry helpers for the layer-4/5 tests, over the product's in-memory SeriesTelemetry.

Real exposition text from the samples becomes series with one point at `now`,
as a scenario's `exposition:` does; history is written as points relative to now.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from bot.sources.exposition import parse_exposition
from bot.sources.series import SeriesData, SeriesTelemetry
from layers.sources import RangeSeries, Sample, Selector, Telemetry
from tests import fixtures

SAMPLES = fixtures.SAMPLES


def sample_text(name: str) -> str:
    """The raw text of a sample file (the exposition parser skips its notes)."""
    path = next(SAMPLES.glob(f"{name}*"))
    return path.read_text()


def exposition(text: str, now: float, rename: Mapping[str, str] | None = None) -> list[SeriesData]:
    """Every sample of a /metrics text as a series with one point at now; `rename` maps metric names."""
    out = []
    for labels, value in parse_exposition(text):
        name = labels["__name__"]
        labels = {**labels, "__name__": (rename or {}).get(name, name)}
        out.append(SeriesData(labels, [(now, value)]))
    return out


def series(
    metric: str, labels: Mapping[str, str], points: Iterable[tuple[float, float]], now: float
) -> SeriesData:
    """A series with points at times relative to now (seconds, <= 0)."""
    return SeriesData({"__name__": metric, **labels}, [(now + t, v) for t, v in points])


def telemetry(data: Iterable[SeriesData], now: float) -> SeriesTelemetry:
    return SeriesTelemetry(list(data), now, "scenario test")


class CountingTelemetry:
    """Wraps a Telemetry and counts its calls, to prove a read's cost does not grow with the fleet."""

    def __init__(self, inner: Telemetry) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.metrics: list[str] = []

    @property
    def source(self) -> str:
        return self.inner.source

    def now(self) -> float:
        return self.inner.now()

    def _count(self, kind: str, metric: str) -> None:
        self.calls[kind] += 1
        self.metrics.append(metric)

    def instant(
        self, metric: str, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        self._count("instant", metric)
        return self.inner.instant(metric, match, above=above)

    def increase(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        self._count("increase", metric)
        return self.inner.increase(metric, window_s, match, above=above)

    def rate(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        self._count("rate", metric)
        return self.inner.rate(metric, window_s, match, above=above)

    def max_over_time(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        self._count("max_over_time", metric)
        return self.inner.max_over_time(metric, window_s, match, above=above)

    def range(
        self, metric: str, window_s: int, step_s: int, match: Sequence[Selector] = ()
    ) -> list[RangeSeries]:
        self._count("range", metric)
        return self.inner.range(metric, window_s, step_s, match)

    def changed(self, metric: str, window_s: int, match: Sequence[Selector] = ()) -> list[Sample]:
        self._count("changed", metric)
        return self.inner.changed(metric, window_s, match)

    def count(self, metric: str, match: Sequence[Selector] = ()) -> int:
        self._count("count", metric)
        return self.inner.count(metric, match)

    @property
    def total(self) -> int:
        return sum(self.calls.values())
