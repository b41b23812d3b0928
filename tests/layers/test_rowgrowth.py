"""Remapped-row growth where a drop is no growth (layers/facts/rowgrowth.py): a reading of 0 while a GPU
is reset, then the old count again, is what PromQL increase() counts as new rows."""

from __future__ import annotations

import pytest

from layers.facts.rowgrowth import verified_growth
from layers.sources import Sample
from tests.layers.fake_telemetry import CountingTelemetry, series, telemetry

NOW = 1_795_953_600.0
DAY = 86400
ROWS, UROWS = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
SHAPES = {
    "GPU-dip": [(-DAY + 300, 4), (-3600, 0), (-3300, 0), (-3000, 4), (0, 4)],  # reset: 0 for two scrapes
    "GPU-drop": [(-DAY + 300, 2), (-3600, 0), (0, 0)],
    "GPU-rise": [(-DAY + 300, 0), (-7200, 2), (0, 3)],
    "GPU-dip-then-rise": [(-DAY + 300, 4), (-3600, 0), (-3000, 5), (0, 5)],
}


def _read(metric: str = ROWS) -> tuple[CountingTelemetry, list[Sample]]:
    data = [series(metric, {"Hostname": "gpu-1", "gpu": str(i), "UUID": u}, pts, NOW)
            for i, (u, pts) in enumerate(SHAPES.items())]  # fmt: skip
    data.append(
        series(metric, {"Hostname": "gpu-2", "gpu": "0", "UUID": "GPU-flat"}, [(-DAY + 300, 7), (0, 7)], NOW)
    )
    tel = CountingTelemetry(telemetry(data, NOW))
    return tel, tel.increase(metric, DAY)


def test_increase_alone_counts_the_climb_back_after_a_dip() -> None:
    _, rising = _read()
    got = {s.labels["UUID"]: s.value for s in rising}
    assert got["GPU-dip"] == pytest.approx(4, abs=0.1)  # the false growth this module removes


def test_growth_is_the_highest_value_above_the_first() -> None:
    tel, rising = _read()
    grown = verified_growth(tel, DAY, {ROWS: rising})
    got = {s.labels["UUID"]: round(s.value, 6) for s in grown[ROWS]}
    assert got == {"GPU-dip": 0, "GPU-drop": 0, "GPU-rise": 3, "GPU-dip-then-rise": 1, "GPU-flat": 0}


def test_one_range_read_for_the_rising_gpus_and_none_when_nothing_rose() -> None:
    tel, rising = _read()
    tel.calls.clear()
    verified_growth(tel, DAY, {ROWS: rising, UROWS: []})
    assert tel.calls == {"range": 1}
    tel.calls.clear()
    flat = [Sample(s.labels, 0.0) for s in rising]
    assert verified_growth(tel, DAY, {ROWS: flat}) == {ROWS: flat}
    assert not tel.calls


def test_a_series_the_range_read_misses_keeps_its_increase() -> None:
    tel, _ = _read()
    ghost = Sample({"Hostname": "gpu-9", "gpu": "0", "UUID": "GPU-gone"}, 2.0)
    assert verified_growth(tel, DAY, {ROWS: [ghost]})[ROWS] == [ghost]
