"""Replay equivalence for mapped files: a fleet-sized JSON scenario (past MAP_BYTES) is decoded
in place from a read-only mapping, its points kept as views on the file's pages and the pages
released as it goes. Here every file is mapped (MAP_BYTES 0), so a fleet with history and a
broken point are read that way and must walk, and fail, exactly as the standard loader's; every
bundled and incident scenario is read mapped in tests/test_replay.py, beside the other loaders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.fleet import make_fleet
from bot.sources.scenario import ScenarioError, build_sources, load_scenario
from layers.walk import walk
from tests import test_replay as unmapped
from tests.test_replay import as_json, standard, walks


@pytest.fixture(autouse=True)
def every_file_mapped(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    mapped = unmapped.every_file_mapped(monkeypatch)
    yield mapped
    assert mapped and all(mapped)  # the mapped path really ran


# Every bundled and incident scenario is read mapped in tests/test_replay.py, beside the other two
# loaders (one YAML parse and one standard walk per file for all three).


def test_a_mapped_fleet_reads_its_points_from_the_file_when_asked(tmp_path: Path) -> None:
    path = as_json(make_fleet(60, 8, operands=10, samples=25, sick_every=20), tmp_path, "fleet")
    fast = load_scenario(path)
    assert all(s._points is None for s in fast.series)
    cluster, telemetry = build_sources(fast, consume=False)
    walk(cluster, telemetry, "ml", "trainer-0")
    assert any(s._points is not None for s in fast.series)
    assert walks(fast) == walks(standard(path))
    assert fast.series == standard(path).series  # every point, read back from the released pages


def test_a_broken_point_in_a_mapped_file_is_reported_when_read(tmp_path: Path) -> None:
    unmapped.test_a_broken_point_is_reported_when_read_with_the_same_message(tmp_path)


def test_consumed_sources_walk_like_copied_ones(tmp_path: Path) -> None:
    path = as_json(make_fleet(20, 8, operands=10, samples=5, sick_every=10), tmp_path, "small")
    copied = walks(load_scenario(path))
    cluster, telemetry = build_sources(load_scenario(path), consume=True)
    from bot.render import walk_json

    assert walk_json(walk(cluster, telemetry, "ml", "trainer-0")) == copied[0]


def test_a_truncated_mapped_file_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "cut.json"
    path.write_text('{"kind": "Scenario", "metrics": [{"metric": {"__name__": "X"}, "values": [[0, 1]')
    with pytest.raises(ScenarioError, match=r"cut\.json: JSON syntax error"):
        load_scenario(path)


def test_a_mapped_fleet_reads_the_labels_of_the_series_a_walk_selects_only(tmp_path: Path) -> None:
    path = as_json(make_fleet(60, 8, operands=10, samples=5, sick_every=20), tmp_path, "labels")
    fast = load_scenario(path)
    assert all(s.keys is not None for s in fast.series)  # indexed by node and pod labels only
    cluster, telemetry = build_sources(fast, consume=False)
    walk(cluster, telemetry, "ml", "trainer-0")
    read = sum(s.keys is None for s in fast.series)
    assert 0 < read < len(fast.series) // 2
    assert fast.series == standard(path).series  # every label, read back on demand


def test_a_bad_label_in_a_mapped_file_is_reported_when_its_series_is_selected(tmp_path: Path) -> None:
    data = {
        "kind": "Scenario",
        "now": "2026-11-29T12:00:00Z",
        "metrics": [
            {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "Hostname": "gpu-1"}, "values": [[0, 1]]},
            {
                "metric": {"__name__": "DCGM_FI_DEV_FB_USED", "Hostname": "gpu-2", "bad-name": "x"},
                "values": [[0, 1]],
            },
        ],
    }
    path = as_json(data, tmp_path, "badlabel")
    with pytest.raises(ScenarioError) as eager:
        standard(path)
    _, telemetry = build_sources(load_scenario(path))
    assert [s.value for s in telemetry.instant("DCGM_FI_DEV_FB_USED", [{"Hostname": ["gpu-1"]}])] == [1.0]
    with pytest.raises(ScenarioError) as lazy:
        telemetry.instant("DCGM_FI_DEV_FB_USED", [{"Hostname": ["gpu-2"]}])
    assert str(lazy.value) == str(eager.value)


SELECTORS: list[list[dict[str, list[str]]]] = [
    [],
    [{"Hostname": ["gpu-00001", "gpu-00003"]}],
    [{"Hostname": ["gpu-00001"]}, {"hostname": ["gpu-00001"]}],
    [{"gpu": ["3"]}],
    [{"Hostname": ["gpu-00001"], "gpu": ["3", "4"]}],
    [{"UUID": ["GPU-00001003-4cc8-97e4-e817-5a36dfd2885e"]}],
    [{"namespace": ["ml"], "pod": ["trainer-0"]}],
    [{"modelName": ["NVIDIA H100 80GB HBM3"], "Hostname": ["gpu-00002"]}],
]


@pytest.mark.parametrize("match", SELECTORS, ids=[str(i) for i in range(len(SELECTORS))])
def test_deferred_labels_answer_every_query_as_read_ones(
    tmp_path: Path, match: list[dict[str, list[str]]]
) -> None:
    path = as_json(make_fleet(6, 8, operands=6, samples=5, sick_every=2), tmp_path, "queries")
    _, lazy = build_sources(load_scenario(path))
    _, eager = build_sources(standard(path))
    for metric in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS|DCGM_FI_DEV_FB_FREE"):
        assert lazy.instant(metric, match) == eager.instant(metric, match)
        assert lazy.increase(metric, 86400, match) == eager.increase(metric, 86400, match)
        assert lazy.changed(metric, 86400, match) == eager.changed(metric, 86400, match)
        assert lazy.range(metric, 3600, 600, match) == eager.range(metric, 3600, 600, match)
