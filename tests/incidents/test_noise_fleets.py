"""Noise fleets (tests/incidents/noise/*.yaml): production-shaped fleets whose sick nodes are not the answer.

Each fleet has 8-50 nodes over several GPU models and pools, with lost GPUs, Xids, rising remapped rows,
passthrough and operand-less nodes, nodes that never advertised and device plugins of different versions
on nodes the target pod could never use (`x-noise`), while its real cause is elsewhere: a missing or wrong
toleration, a selector or affinity nothing matches, an exhausted or cordoned pool, a Kueue gate, a failed
or stuck MIG reconfiguration. Black-box: scenario in, verdict out, and no noise node in any `warn` or
`fault` finding, in the default walk or with every layer. The `control-*` fleets are the positive controls:
the only candidate is the sick node (`x-decides`), and its fault must still decide.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.fleets import Fleet
from tests.incidents.noise.build import HERE, NOISE_RECIPES
from tests.incidents.scenario_checks import INCIDENT_FOLDERS, check_structure, names, names_elsewhere

FILES = sorted(HERE.glob("*.yaml"))
IDS = [p.stem for p in FILES]


def data(path: Path) -> dict[str, Any]:
    return bundled.read(path)


def walk(path: Path, all_layers: bool = False) -> Any:
    result, _ = bundled.diagnose(path, all_layers=all_layers)
    return result


def test_at_least_ten_noise_fleets_and_three_controls() -> None:
    stems = [p.stem for p in FILES]
    assert sum(s.startswith("noise-") for s in stems) >= 10
    assert sum(s.startswith("control-") for s in stems) >= 3


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_fleets_are_production_shaped(path: Path) -> None:
    d = data(path)
    nodes = [o for o in d["objects"] if o["kind"] == "Node"]
    assert 8 <= len(nodes) <= 50, len(nodes)
    products = {n["metadata"]["labels"].get("nvidia.com/gpu.product") for n in nodes} - {None}
    assert len(products) >= 2, "one GPU model is not a production fleet"
    assert len(d["x-noise"]) >= 2 and set(d["x-noise"]) <= {n["metadata"]["name"] for n in nodes}
    assert path.stat().st_size < 200_000


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_every_other_incident() -> None:
    assert not names(FILES) & names_elsewhere(*INCIDENT_FOLDERS)


def test_committed_files_are_what_their_recipes_build(tmp_path: Path) -> None:
    built = {}
    for recipe in NOISE_RECIPES:
        fleet, expect = recipe()
        built[fleet.name] = fleet.write(tmp_path, expect).read_text(encoding="utf-8")
    assert sorted(built) == IDS
    for path in FILES:
        assert path.read_text(encoding="utf-8") == built[path.stem], (
            f"{path.name}: rerun python -m tests.incidents.fleets"
        )


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
@pytest.mark.parametrize("all_layers", [False, True], ids=["walk", "all"])
def test_no_noise_node_is_a_warn_or_fault(path: Path, all_layers: bool) -> None:
    noise = set(data(path)["x-noise"])
    result = walk(path, all_layers)
    loud = [
        (f.code, f.node, f.summary)
        for layer in result.layers
        for f in layer.findings
        if f.severity >= Severity.WARN and (f.node in noise or any(n in f.summary for n in noise))
    ]
    assert not loud, bundled.explain(result)
    verdict = result.verdict
    assert verdict is None or verdict.node not in noise


@pytest.mark.parametrize("path", [p for p in FILES if p.stem.startswith("control-")], ids=lambda p: p.stem)
def test_the_only_candidate_decides(path: Path) -> None:
    decides = data(path)["x-decides"]
    result = walk(path)
    assert result.verdict is not None and result.verdict.node == decides, bundled.explain(result)
    [layer1] = [r for r in result.layers if r.layer == 1]
    pointed = {f.node for f in layer1.findings if f.severity == Severity.FAULT}
    assert pointed == {decides}


def test_a_lost_time_sliced_gpu_is_one_gpu_not_four_replicas() -> None:
    result = walk(HERE / "control-only-candidate-time-sliced-16-nodes.yaml")
    [f] = [f for r in result.layers for f in r.findings if f.code == "L1_ALLOCATABLE_BELOW_CAPACITY"]
    assert "1 GPU(s) marked unhealthy" in f.summary
    assert any("4 replicas per GPU" in e for e in f.evidence)


def test_noise_is_one_info_line_naming_the_sick_nodes() -> None:
    path = HERE / "noise-toleration-wrong-value-50-nodes.yaml"
    [f] = [f for r in walk(path).layers for f in r.findings if f.code == "L1_ELSEWHERE_IN_FLEET"]
    assert f.severity == Severity.INFO and f.next is None
    shown = " ".join(f.evidence)
    assert "h100-infer-02" in shown and "kubevirt" not in shown  # passthrough advertises nothing by design


def test_fleet_builder_marks_noise_it_adds() -> None:
    f = Fleet("x", "control case")
    f.gpu_node("a", "h100")
    f.sick_lost_gpu("a")
    assert f.noise == ["a"]
    assert yaml.safe_load(yaml.safe_dump(f.scenario({})))["x-noise"] == ["a"]
