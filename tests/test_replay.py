"""Replay equivalence: the fast JSON loader (msgspec, points decoded when first read) walks
every scenario exactly as the standard loader (json + eager parsing) does.

Every bundled scenario, every incident scenario of the tests and a synthetic fleet with
24 h of samples are written as JSON and read both ways; the walk JSON, default and
`--all`, must be identical. Points that are broken only show when read, with the
standard loader's message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.fleet import make_fleet
from bot.render import walk_json
from bot.sources import scenario as scenario_module
from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import Scenario, ScenarioError, build_sources, load_scenario, parse_scenario
from layers.walk import walk

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = sorted([*bundled_scenarios(), *(ROOT / "tests" / "incidents").rglob("*.yaml")])


def standard(path: Path) -> Scenario:
    """The loader as it was: the standard library's decoder, every point parsed up front."""
    return parse_scenario(json.loads(path.read_text()), str(path))


def target(sc: Scenario) -> tuple[str, str]:
    ns, _, pod = str((sc.extra.get("x-expect") or {}).get("target") or "ml/trainer-0").partition("/")
    return ns, pod


def walks(sc: Scenario) -> list[str]:
    out = []
    for all_layers in (False, True):
        cluster, telemetry = build_sources(sc)
        out.append(walk_json(walk(cluster, telemetry, *target(sc), all_layers=all_layers)))
    return out


def as_json(data: object, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


def read_yaml(path: Path) -> object:
    """The scenario as data (libyaml where built: the pure-Python parser costs most of this file)."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@pytest.mark.parametrize("yaml_path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_fast_and_mapped_loaders_walk_like_the_standard_one(
    yaml_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One file, read three ways: the standard loader, the fast one (a small file: decoded from a
    # copy) and the fast one decoding in place from a read-only mapping (MAP_BYTES 0 maps every file).
    path = as_json(read_yaml(yaml_path), tmp_path, yaml_path.stem)
    expected = walks(standard(path))
    assert walks(load_scenario(path)) == expected
    mapped = every_file_mapped(monkeypatch)
    assert walks(load_scenario(path)) == expected
    assert mapped and all(mapped)  # the mapped path really ran


def every_file_mapped(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make the fast loader map every file; the list says, per file read, whether it was mapped."""
    mapped: list[int] = []
    read_buffer = scenario_module._read_buffer

    def spy(path: str | Path) -> object:
        buf, pages = read_buffer(path)
        mapped.append(int(pages is not None))
        return buf, pages

    monkeypatch.setattr(scenario_module, "MAP_BYTES", 0)
    monkeypatch.setattr(scenario_module, "_read_buffer", spy)
    return mapped


def test_a_fleet_with_history_walks_alike_and_reads_few_series(tmp_path: Path) -> None:
    path = as_json(make_fleet(60, 8, operands=10, samples=25, sick_every=20), tmp_path, "fleet")
    fast = load_scenario(path)
    cluster, telemetry = build_sources(fast)
    lazy = [s for s in fast.series if s._points is None]
    assert len(lazy) == len(fast.series) == 60 * 8 * 6  # nothing decoded yet
    walk(cluster, telemetry, "ml", "trainer-0")
    # The pending pod's walk reads the sick nodes' series only.
    read = {s.labels["Hostname"] for s in fast.series if s._points is not None}
    assert read and read < {s.labels["Hostname"] for s in fast.series}
    assert walks(fast) == walks(standard(path))
    assert fast.series == standard(path).series


def test_a_broken_point_is_reported_when_read_with_the_same_message(tmp_path: Path) -> None:
    good = [[-120, 1], [-60, 2]]
    data = {
        "kind": "Scenario",
        "now": "2026-11-29T12:00:00Z",
        "metrics": [
            {"metric": {"__name__": "DCGM_FI_DEV_FB_USED", "Hostname": "gpu-1"}, "values": good},
            {
                "metric": {"__name__": "DCGM_FI_DEV_FB_USED", "Hostname": "gpu-2"},
                "values": [[-60, 1], [-120, 2]],
            },
        ],
    }
    path = as_json(data, tmp_path, "broken")
    with pytest.raises(ScenarioError) as eager:
        standard(path)
    fast = load_scenario(path)
    assert fast.series[0].points[-1][1] == 2.0
    with pytest.raises(ScenarioError) as lazy:
        _ = fast.series[1].points
    assert str(lazy.value) == str(eager.value)
    assert "metrics[1].values[1]: times must increase" in str(lazy.value)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"metric": {"__name__": "X"}, "values": []}, "metrics[0].values: expected a list"),
        ({"metric": {"__name__": "X"}, "values": "abc"}, "metrics[0].values: expected a list"),
        ({"metric": {"__name__": "X"}, "vals": [[0, 1]]}, "metrics[0].vals: unknown key"),
        ({"metric": {"gpu": "0"}, "values": [[0, 1]]}, "metrics[0].metric: expected `__name__`"),
        ({"metric": {"__name__": "X"}, "value": [0, "x"]}, "metrics[0].value[0][1]: expected a number"),
    ],
)
def test_misshapen_entries_fail_when_the_file_is_read(
    entry: dict[str, object], message: str, tmp_path: Path
) -> None:
    path = as_json({"kind": "Scenario", "metrics": [entry]}, tmp_path, "bad")
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    assert message in str(err.value)


def test_not_json_falls_back_to_the_standard_messages(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text('{"kind": "Scenario", "metrics": [,]}')
    with pytest.raises(ScenarioError, match=r"f\.json: JSON syntax error at line 1"):
        load_scenario(path)
