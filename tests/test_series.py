"""In-memory PromQL (Prometheus 2.42 semantics) and the OpenMetrics backfill writer.

The expected numbers are worked out by hand from promql/functions.go
`extrapolatedRate` (v2.42); the arithmetic is written beside each case.
"""

from __future__ import annotations

import io
import math
import re
import subprocess
from pathlib import Path

import pytest

from bot.sources.exposition import parse_exposition
from bot.sources.openmetrics import write_openmetrics
from bot.sources.series import SeriesData, SeriesTelemetry
from tests import fixtures

NOW = 1_795_000_000.0  # 2026-11-18T08:26:40Z
XID = "DCGM_FI_DEV_XID_ERRORS"
SAMPLES = fixtures.SAMPLES


def series(name: str, points: list[tuple[float, float]], **labels: str) -> SeriesData:
    return SeriesData({"__name__": name, **labels}, [(NOW + t, v) for t, v in points])


def one(tel: SeriesTelemetry, fn: str, metric: str, window: int) -> float:
    (sample,) = getattr(tel, fn)(metric, window)
    return float(sample.value)


# --- increase / rate ---------------------------------------------------------------


def test_increase_extrapolates_to_the_window_end_and_stops_at_the_counter_zero() -> None:
    # Samples at now-290, -230, -170, -110, -50 with values 0, 6, 12, 18, 24; increase(...[5m]):
    #   result = 24 - 0 = 24; sampled interval = 240 s; average step = 60 s; threshold = 1.1*60 = 66 s
    #   to start = 10 s, but the counter was 0 at the first sample: duration to zero = 240*(0/24) = 0 -> 0
    #   to end = 50 s < 66 -> extrapolated; interval = 240 + 0 + 50 = 290
    #   increase = 24 * 290/240 = 29;  rate = 29 / 300 = 0.096667
    tel = SeriesTelemetry([series("c", [(-290, 0), (-230, 6), (-170, 12), (-110, 18), (-50, 24)])], NOW)
    assert one(tel, "increase", "c", 300) == pytest.approx(29.0)
    assert one(tel, "rate", "c", 300) == pytest.approx(29.0 / 300)


def test_increase_extrapolates_to_both_edges_when_the_counter_is_far_from_zero() -> None:
    # Same times, values 100..124: duration to zero = 240*(100/24) = 1000 s > 10 s, so start stays 10 s.
    #   interval = 240 + 10 + 50 = 300 -> increase = 24 * 300/240 = 30; rate = 0.1
    tel = SeriesTelemetry(
        [series("c", [(-290, 100), (-230, 106), (-170, 112), (-110, 118), (-50, 124)])], NOW
    )
    assert one(tel, "increase", "c", 300) == pytest.approx(30.0)
    assert one(tel, "rate", "c", 300) == pytest.approx(0.1)


def test_counter_reset_and_a_gap_at_the_window_start() -> None:
    # Samples at -180, -120, -60, 0 with values 10, 15, 3, 8 (the exporter restarted after 15):
    #   result = 8 - 10 = -2, plus 15 for the reset = 13
    #   sampled interval 180 s, average 60 s, threshold 66 s
    #   to start = 120 s (to zero = 180*10/13 = 138 s, not shorter) >= 66 -> add only 60/2 = 30 s
    #   to end = 0 -> add 0; interval = 180 + 30 = 210 -> increase = 13 * 210/180 = 15.1667
    tel = SeriesTelemetry([series("c", [(-180, 10), (-120, 15), (-60, 3), (0, 8)])], NOW)
    assert one(tel, "increase", "c", 300) == pytest.approx(13 * 210 / 180)


def test_range_selection_includes_a_sample_exactly_on_the_left_edge() -> None:
    # 2.42 selects now-300 <= t <= now: both samples count, no extrapolation needed -> 6 exactly.
    # An open left edge (Prometheus 3) would leave one sample and no result at all.
    tel = SeriesTelemetry([series("c", [(-300, 0), (0, 6)])], NOW)
    assert one(tel, "increase", "c", 300) == 6.0
    assert tel.increase("c", 299) == []


def test_increase_needs_two_samples_in_the_window() -> None:
    tel = SeriesTelemetry([series("c", [(-7200, 0), (-60, 5)])], NOW)
    assert tel.increase("c", 3600) == []
    assert tel.rate("c", 3600) == []
    assert one(tel, "increase", "c", 86400) > 5.0


def test_range_functions_drop_the_metric_name_and_instant_keeps_it() -> None:
    tel = SeriesTelemetry([series(XID, [(-120, 0), (-60, 79)], Hostname="gpu-7", gpu="3")], NOW)
    assert dict(tel.instant(XID)[0].labels) == {"__name__": XID, "Hostname": "gpu-7", "gpu": "3"}
    for fn in ("increase", "rate", "max_over_time"):
        assert dict(getattr(tel, fn)(XID, 300)[0].labels) == {"Hostname": "gpu-7", "gpu": "3"}


# --- instant / max_over_time / range --------------------------------------------------


def test_instant_lookback_is_five_minutes_inclusive() -> None:
    tel = SeriesTelemetry(
        [
            series("g", [(-900, 1), (-300, 2)], gpu="0"),  # last sample exactly 5 min old: still seen
            series("g", [(-900, 1), (-301, 2)], gpu="1"),  # 5 min 1 s old: stale
            series("g", [(-10, 3), (30, 9)], gpu="2"),  # a sample after now is not seen yet
        ],
        NOW,
    )
    assert {s.labels["gpu"]: s.value for s in tel.instant("g")} == {"0": 2.0, "2": 3.0}


def test_max_over_time_ignores_nan_and_the_samples_before_the_window() -> None:
    tel = SeriesTelemetry([series("t", [(-4000, 99), (-3600, 70), (-1800, math.nan), (-60, 81)])], NOW)
    assert one(tel, "max_over_time", "t", 3600) == 81.0  # -3600 is inside (inclusive), -4000 is not
    assert one(tel, "max_over_time", "t", 4000) == 99.0
    only_nan = SeriesTelemetry([series("t", [(-60, math.nan)])], NOW)
    assert math.isnan(one(only_nan, "max_over_time", "t", 300))


def test_range_evaluates_the_instant_value_at_each_step_with_lookback() -> None:
    # One sample at now-400. Steps at -600, -540, ..., 0; a step sees it when -400 is within
    # [step-300, step]: steps -360, -300, -240, -180, -120.
    tel = SeriesTelemetry([series("g", [(-400, 5)], gpu="0")], NOW)
    (rs,) = tel.range("g", 600, 60)
    assert [t - NOW for t, _ in rs.points] == [-360, -300, -240, -180, -120]
    assert {v for _, v in rs.points} == {5.0}
    assert rs.labels["__name__"] == "g"
    assert tel.range("g", 60, 60) == []  # steps -60 and 0 are past the lookback


# --- selection -------------------------------------------------------------------------


def fleet() -> SeriesTelemetry:
    return SeriesTelemetry(
        [
            series(XID, [(0, 79)], Hostname="gpu-7", gpu="3", pod="", namespace=""),
            series(XID, [(0, 0)], Hostname="gpu-7", gpu="4"),
            series(XID, [(0, 48)], hostname="gpu-7", gpu="0"),  # newer exporter spelling
            series(XID, [(0, 13)], Hostname="gpu-8", gpu="3"),
        ],
        NOW,
    )


def test_match_alternatives_are_an_or_of_ands() -> None:
    tel = fleet()
    same_node = tel.instant(XID, [{"Hostname": ["gpu-7"]}, {"hostname": ["gpu-7"]}])
    assert sorted(s.value for s in same_node) == [0.0, 48.0, 79.0]
    gpu3 = tel.instant(XID, [{"Hostname": ["gpu-7", "gpu-8"], "gpu": ["3"]}])
    assert sorted(s.value for s in gpu3) == [13.0, 79.0]
    assert tel.instant(XID, [{"Hostname": ["gpu-9"]}]) == []
    assert len(tel.instant(XID)) == 4


def test_empty_label_values_are_absent_labels_as_in_prometheus() -> None:
    tel = fleet()
    (xid79,) = tel.instant(XID, [{"gpu": ["3"], "Hostname": ["gpu-7"]}])
    assert "pod" not in xid79.labels
    # `pod=~""` selects series without a pod label, as PromQL does.
    no_pod = tel.instant(XID, [{"pod": [""], "Hostname": ["gpu-7"]}])
    assert sorted(s.value for s in no_pod) == [0.0, 79.0]


def test_metric_alternatives_union_and_the_left_wins_on_identical_labels() -> None:
    tel = SeriesTelemetry(
        [
            series("DCGM_EXP_XID_ERRORS_COUNT", [(-60, 0), (0, 2)], gpu="0", xid="79"),
            series("DCGM_EXP_XID_ERRORS_TOTAL", [(-60, 0), (0, 5)], gpu="0", xid="79"),
            series("DCGM_EXP_XID_ERRORS_TOTAL", [(-60, 0), (0, 1)], gpu="1", xid="48"),
        ],
        NOW,
    )
    both = "DCGM_EXP_XID_ERRORS_COUNT|DCGM_EXP_XID_ERRORS_TOTAL"
    # Without __name__ the first two are the same series: `increase(A) or increase(B)` keeps A's.
    assert sorted((s.labels["xid"], s.value) for s in tel.increase(both, 60)) == [("48", 1.0), ("79", 2.0)]
    assert len(tel.instant(both)) == 3  # names differ, so all three stay
    assert tel.instant("NOT_EXPORTED") == []


# --- OpenMetrics backfill -------------------------------------------------------------


def test_openmetrics_file_is_accepted_by_promtool_with_the_same_samples(tmp_path: Path) -> None:
    exposition = parse_exposition(
        (SAMPLES / "34_vllm_metrics_cache_config_info_and_counters.prom").read_text()
    )
    data = [series(XID, [(-30, 0)], Hostname="gpu-8")]
    data += [SeriesData(labels, [(NOW - 60, value), (NOW, value + 1)]) for labels, value in exposition[2:]]
    # The same family again after others: the writer must group it under its one `# TYPE`.
    data += [
        series(XID, [(-3600, 0), (-1800.5, math.nan), (0, 79)], Hostname="gpu-7", pod="", msg='a "b"\\c\nd')
    ]
    text = io.StringIO()
    write_openmetrics(data, text)
    om = tmp_path / "series.om"
    om.write_text(text.getvalue())
    assert text.getvalue().endswith("# EOF\n")
    assert text.getvalue().count(f"# TYPE {XID} gauge") == 1

    db = tmp_path / "db"
    done = subprocess.run(
        ["/usr/bin/promtool", "tsdb", "create-blocks-from", "openmetrics", str(om), str(db)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (db / "wal").mkdir(exist_ok=True)  # `tsdb dump` opens a WAL even for backfilled blocks
    dump = subprocess.run(
        ["/usr/bin/promtool", "tsdb", "dump", str(db)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    # Lines look like: {Hostname="gpu-7", __name__="m"} 79 1795000000000 (milliseconds, as stored).
    stored = sorted(
        (m[1], int(m[3]), m[2])
        for m in re.finditer(r'^\{.*\b__name__="([^"]+)".*\} (\S+) (\d+)$', dump, re.M)
    )
    expected = sorted(
        (s.labels["__name__"], round(t * 1000), "NaN" if math.isnan(v) else f"{v:g}")
        for s in data
        for t, v in s.points
    )
    assert stored == expected
    # Escaped label values survive, and an empty label value is no label.
    assert 'msg="a \\"b\\"\\\\c\\nd"' in dump
    assert 'pod=""' not in dump


def test_above_filters_like_promql_comparison() -> None:
    from bot.sources.series import SeriesData, SeriesTelemetry

    now = 1_800_000_000.0
    data = [
        SeriesData(
            {"__name__": "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpu": "0", "Hostname": "a"}, [(now - 60, 0.0)]
        ),
        SeriesData(
            {"__name__": "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpu": "1", "Hostname": "a"}, [(now - 60, 1.0)]
        ),
        SeriesData(
            {"__name__": "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpu": "2", "Hostname": "a"},
            [(now - 60, float("nan"))],
        ),
    ]
    tel = SeriesTelemetry(data, now)
    assert len(tel.instant("DCGM_FI_DEV_ROW_REMAP_FAILURE")) == 3
    kept = tel.instant("DCGM_FI_DEV_ROW_REMAP_FAILURE", above=0)
    assert [x.labels["gpu"] for x in kept] == ["1"]
    assert [x.labels["gpu"] for x in tel.max_over_time("DCGM_FI_DEV_ROW_REMAP_FAILURE", 3600, above=0)] == [
        "1"
    ]


def test_above_filters_after_the_union_as_promql_does() -> None:
    # (max_over_time(A[1h]) or max_over_time(B[1h])) > 0: A's 0 wins the union for the shared
    # label set, then the filter drops it; B's 5 must not slip through in its place.
    from bot.sources.series import SeriesData, SeriesTelemetry

    now = 1_800_000_000.0
    labels = {"gpu": "0", "Hostname": "a", "xid": "79"}
    data = [
        SeriesData({"__name__": "DCGM_EXP_XID_ERRORS_COUNT", **labels}, [(now - 60, 0.0)]),
        SeriesData({"__name__": "DCGM_EXP_XID_ERRORS_TOTAL", **labels}, [(now - 60, 5.0)]),
    ]
    tel = SeriesTelemetry(data, now)
    both = "DCGM_EXP_XID_ERRORS_COUNT|DCGM_EXP_XID_ERRORS_TOTAL"
    assert [s.value for s in tel.max_over_time(both, 3600)] == [0.0]
    assert tel.max_over_time(both, 3600, above=0) == []
