"""The same series read through a real Prometheus (backfilled) and through the in-memory
SeriesTelemetry, at the same instant, give the same answers within 1 %.

This is what lets scenarios stand in for a real Prometheus: if the two ever
disagree, a scenario's diagnosis would not be the one a live cluster gets.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from bot.sources.prom import PrometheusTelemetry
from bot.sources.scenario import load_scenario
from bot.sources.series import SeriesData, SeriesTelemetry
from layers.sources import Selector
from tests.services import PrometheusFactory
from tests.test_prom import AT, NODE_A, NODE_B, H, dcgm_vllm_history

# Only the bundled scenarios that carry series: the others have nothing to compare.
SCENARIOS = [
    p
    for p in sorted((Path(__file__).resolve().parent.parent / "bot" / "scenarios").glob("*.yaml"))
    if "\nmetrics:" in p.read_text() or "\nexposition:" in p.read_text()
]


def irregular_history() -> list[SeriesData]:
    """Scrapes with jitter and millisecond timestamps, gaps past the lookback, series that
    stop just inside and just outside the 5-minute lookback, and several counter resets."""
    rng = random.Random(20261129)  # fixed: the data must be the same on every run
    counter, t, v = [], AT - 26 * H, 40.0
    while t <= AT:
        if not (AT - 9 * H < t < AT - 8 * H):  # an hour with no scrapes (exporter down)
            counter.append((round(t, 3), v))
        t += 30 + rng.uniform(-4, 4)
        v = 0.0 if rng.random() < 0.002 else v + rng.choice((0, 0, 1, 3))  # resets now and then
    counter.append((AT - 0.25, v + 1))
    gauge = [(AT - 2 * H + 60 * i + rng.uniform(0, 5), 50 + 30 * math.sin(i / 7)) for i in range(120)]
    stopped_inside = [(AT - 30 * 60 + 20 * i, float(i)) for i in range(79)]  # last at AT-4m40s
    stopped_outside = [(AT - 30 * 60 + 20 * i, float(i)) for i in range(73)]  # last at AT-6m
    return [
        SeriesData({"__name__": "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", **NODE_A}, counter),
        SeriesData({"__name__": "DCGM_FI_DEV_GPU_TEMP", **NODE_B}, gauge),
        SeriesData(
            {"__name__": "vllm:num_requests_running", "model_name": "a", "engine": "0"}, stopped_inside
        ),
        SeriesData(
            {"__name__": "vllm:num_requests_running", "model_name": "b", "engine": "0"}, stopped_outside
        ),
    ]


def last_xid_history() -> list[SeriesData]:
    """DCGM's last-Xid gauge as fleets show it: weeks-old values that never change, a value that
    changed today, a series that began today, one with a gap over the window's start, one that
    stopped (a GPU gone), and the same labels under a second name for the union's rules."""
    minutes = [AT - 26 * H + 60 * i for i in range(26 * 60 + 1)]

    def gpu(n: int) -> dict[str, str]:
        return {**NODE_A, "gpu": str(n), "UUID": f"GPU-5d1c7e0a-0000-4000-8000-00000000000{n}"}

    name = "DCGM_FI_DEV_XID_ERRORS"
    return [
        SeriesData({"__name__": name, **gpu(0)}, [(t, 48.0) for t in minutes]),  # weeks old
        SeriesData({"__name__": name, **gpu(1)}, [(t, 0.0 if t < AT - 3 * H else 79.0) for t in minutes]),
        SeriesData({"__name__": name, **gpu(2)}, [(t, 31.0) for t in minutes if t >= AT - 2 * H]),  # began
        SeriesData(  # no sample in the hour before AT - 24 h: it began (again) inside the window
            {"__name__": name, **gpu(3)}, [(t, 13.0) for t in minutes if not AT - 25.5 * H < t < AT - 23 * H]
        ),
        SeriesData(  # a 20-minute exporter outage across AT - 24 h: the same old value, not news
            {"__name__": name, **gpu(6)},
            [(t, 43.0) for t in minutes if not AT - 24.2 * H < t < AT - 23.9 * H],
        ),
        SeriesData(
            {"__name__": name, **gpu(4)}, [(t, 0.0 if t < AT - 9 * H else 94.0) for t in minutes][:-240]
        ),
        SeriesData({"__name__": "DCGM_FI_DEV_XID_ERRORS_ACTIVE", **gpu(0)}, [(t, 7.0) for t in minutes]),
        SeriesData(
            {"__name__": "DCGM_FI_DEV_XID_ERRORS_ACTIVE", **gpu(5)},
            [(t, 0.0 if t < AT - 30 * 60 else 45.0) for t in minutes],
        ),
    ]


WINDOWS = (
    ("instant", 0),
    ("increase", 24 * H),
    ("increase", H),
    ("rate", 300),
    ("max_over_time", 24 * H),
    ("max_over_time", 300),
    ("changed", 24 * H),
    ("changed", H),
)


def reads(series: list[SeriesData]) -> list[tuple[str, str, int, Sequence[Selector]]]:
    """Every function over every metric in the data (plus one name alternative), unfiltered and
    filtered by host under both label spellings: (method, metric, window_s, match)."""
    names = sorted({s.labels["__name__"] for s in series})
    hosts = sorted({s.labels[k] for s in series for k in ("Hostname", "hostname") if s.labels.get(k)})
    matches: list[Sequence[Selector]] = [()]
    if hosts:
        matches.append([{"Hostname": hosts[:2]}, {"hostname": hosts[:2]}])
    metrics = [*names, "|".join(names[:2])] if len(names) > 1 else names
    return [(fn, m, w, match) for m in metrics for match in matches for fn, w in WINDOWS]


def _read(
    tel: Any, fn: str, metric: str, window: int, match: Sequence[Selector]
) -> dict[frozenset[Any], float]:
    samples = tel.instant(metric, match) if fn == "instant" else getattr(tel, fn)(metric, window, match)
    out = {frozenset(s.labels.items()): s.value for s in samples}
    assert len(out) == len(samples), "duplicate label sets in one answer"
    return out


def _assert_same(prom: PrometheusTelemetry, mem: SeriesTelemetry, series: list[SeriesData]) -> int:
    """Every read agrees; returns how many reads had a non-empty answer (so a dataset cannot be vacuous)."""
    answered = 0
    for fn, metric, window, match in reads(series):
        want = _read(prom, fn, metric, window, match)
        got = _read(mem, fn, metric, window, match)
        where = f"{fn}({metric}, {window}s, {list(match)})"
        assert got.keys() == want.keys(), where
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=0.01, abs=1e-9), where
        answered += bool(want)
    for metric in sorted({s.labels["__name__"] for s in series}):
        want_r = {frozenset(r.labels.items()): r.points for r in prom.range(metric, H, 60)}
        got_r = {frozenset(r.labels.items()): r.points for r in mem.range(metric, H, 60)}
        assert got_r.keys() == want_r.keys(), f"range({metric})"
        for key, points in want_r.items():
            assert [t for t, _ in got_r[key]] == [t for t, _ in points], f"range({metric}) steps"
            assert [v for _, v in got_r[key]] == pytest.approx([v for _, v in points], rel=0.01)
    return answered


@pytest.fixture()
def telemetries(prometheus_factory: PrometheusFactory) -> Iterator[Any]:
    opened: list[PrometheusTelemetry] = []

    def make(
        series: list[SeriesData], now: float
    ) -> tuple[PrometheusTelemetry, SeriesTelemetry, list[SeriesData]]:
        prom = PrometheusTelemetry(prometheus_factory(series).url, at=now, timeout_s=10)
        opened.append(prom)
        return prom, SeriesTelemetry(series, now), series

    yield make
    for p in opened:
        p.close()


def test_regular_history_reads_the_same(telemetries: Any) -> None:
    assert _assert_same(*telemetries(dcgm_vllm_history(), AT)) >= 20


def test_irregular_history_reads_the_same(telemetries: Any) -> None:
    prom, mem, series = telemetries(irregular_history(), AT)
    assert _assert_same(prom, mem, series) >= 15
    # the lookback edge is really exercised: one stopped series is current, the other is not
    assert [s.labels["model_name"] for s in prom.instant("vllm:num_requests_running")] == ["a"]


def test_last_xid_gauge_changes_read_the_same(telemetries: Any) -> None:
    prom, mem, series = telemetries(last_xid_history(), AT)
    assert _assert_same(prom, mem, series) >= 10
    # what the layers rely on: the weeks-old value is not news, the others are
    fresh = {s.labels["gpu"] for s in prom.changed("DCGM_FI_DEV_XID_ERRORS", 24 * H)}
    assert fresh == {"1", "2", "3", "4"}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_bundled_scenario_reads_the_same(telemetries: Any, path: Path) -> None:
    scenario = load_scenario(path)
    assert scenario.series, f"{path.name} was selected for its metrics"
    _assert_same(*telemetries(scenario.series, scenario.now))
