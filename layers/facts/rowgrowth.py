"""Remapped-row growth over a window, where a drop is no growth.

DCGM's remapped-row fields are counts the GPU keeps in its InfoROM: they never go down. A drop in
the series is a reading taken while the GPU was reset or re-initialised (a blank read as 0), and
PromQL `increase()` takes any drop for a counter reset, so it counts the climb back to the old value
as new rows. A rise `increase()` reports is therefore checked on the series itself: growth is the
highest value in the window above its first. One range read, and only for the few series
`increase()` found rising (across a fleet, almost none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from layers.facts.hosts import host_label
from layers.sources import Sample, Selector, Telemetry

STEP_S = 300  # a few scrapes: only the first value and the highest matter, not each dip
_GPU_IDS = ("UUID", "uuid")


def verified_growth(
    telemetry: Telemetry, window_s: int, rising: Mapping[str, Sequence[Sample]]
) -> dict[str, list[Sample]]:
    """Each metric's `increase()` read with every positive value replaced by the series' own growth:
    one range read over all the metrics, for the rising GPUs only."""
    up = [s for samples in rising.values() for s in samples if s.value > 0]
    if not up:
        return {m: list(samples) for m, samples in rising.items()}
    growth: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for series in telemetry.range("|".join(rising), window_s, STEP_S, _selectors(up)):
        values = [v for _, v in series.points if v == v]  # NaN: no reading
        if values and series.labels.get("__name__"):
            growth[series.labels["__name__"], _key(series.labels)] = max(0.0, max(values) - values[0])
    # A series the range read did not return (or without its name) keeps what increase() said:
    # never drop a rise unseen.
    return {
        m: [Sample(s.labels, growth.get((m, _key(s.labels)), s.value)) if s.value > 0 else s for s in samples]
        for m, samples in rising.items()
    }


def _selectors(samples: Sequence[Sample]) -> list[Selector]:
    """Those GPUs only: by UUID where the series has one, else by its host."""
    by_label: dict[str, set[str]] = {}
    for s in samples:
        key = next((k for k in _GPU_IDS if s.labels.get(k)), None)
        value, key = (s.labels[key], key) if key else host_label(s.labels)
        if key:
            by_label.setdefault(key, set()).add(value)
    return [{k: sorted(v)} for k, v in sorted(by_label.items())]


def _key(labels: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset((k, v) for k, v in labels.items() if k != "__name__")
