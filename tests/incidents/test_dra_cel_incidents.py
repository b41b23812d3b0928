"""DRA selectors that use Kubernetes' CEL functions, and a missing ResourceClaimTemplate
(tests/incidents/dra_cel/, built by tests/incidents/dra_cel_build.py; issue 18 item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sources.scenario import load_scenario
from layers.facts.devicecel import UNSUPPORTED_HERE, CelError, DeviceFacts, compile_selector
from layers.facts.draslices import build_inventory
from tests import test_bundled_scenarios as bundled
from tests.incidents import dra_cel_build as build
from tests.incidents.scenario_checks import incident_files

HERE = Path(__file__).resolve().parent / "dra_cel"
FILES = incident_files("dra_cel")
IDS = [p.stem for p in FILES]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    result, exp = bundled.diagnose(path)
    codes = bundled.found(result)
    detail = bundled.explain(result)
    assert [r.layer for r in result.layers] == exp["walk"], detail
    assert (result.verdict.code if result.verdict else None) == exp["verdict"], detail
    assert not [c for c in exp["codes"] if c not in codes], detail
    assert not [c for c in exp.get("absent") or [] if c in codes], detail


def test_every_function_of_the_issue_has_an_incident() -> None:
    stems = set(IDS)
    for function in build.SELECTORS:
        assert f"dra-cel-{function}-selector-h100s-all-held-19-nodes" in stems
    assert len(FILES) == len(build.SELECTORS) + 2


def _devices(path: Path) -> dict[str, DeviceFacts]:
    """One device of each product the fleet publishes."""
    scenario = load_scenario(path)
    slices = [o for o in scenario.objects if o.get("kind") == "ResourceSlice"]
    inv = build_inventory(slices)
    out: dict[str, DeviceFacts] = {}
    for node in sorted(inv.nodes_with_slices):
        for d in inv.on(node):
            out.setdefault(node.split("-")[0], d.facts)
    return out


@pytest.mark.parametrize("function", sorted(build.SELECTORS))
def test_each_selector_tells_the_h100s_from_the_rest(function: str) -> None:
    # The pools' nodeSelector keeps the pod on H100 nodes; the selector itself must also say no to the
    # A100s and L40Ss of the fleet (a runtime that said yes everywhere would pass the walk test).
    path = HERE / f"dra-cel-{function}-selector-h100s-all-held-19-nodes.yaml"
    sel = compile_selector(build.SELECTORS[function])
    answers = {pool: sel.matches(d) for pool, d in _devices(path).items()}
    assert answers.pop("h100") is True
    assert answers and not any(answers.values()), answers


def test_missing_template_quotes_the_controller_and_never_says_allocated() -> None:
    result, _ = bundled.diagnose(HERE / "dra-claim-template-missing-h100-x8-19-nodes.yaml")
    layer1 = result.layers[0].findings
    [f] = [x for x in layer1 if x.code == "L1_DRA_CLAIM_TEMPLATE_MISSING"]
    assert "names ResourceClaimTemplate h100-x8-nccl, which does not exist in ml-train" in f.summary
    assert any(
        'PodResourceClaim gpus: resource claim template "h100-x8-nccl": '
        'resourceclaimtemplate.resource.k8s.io "h100-x8-nccl" not found' in e
        for e in f.evidence
    )
    assert all("allocated" not in x.summary for x in layer1), [x.summary for x in layer1]


def test_a_substring_the_cpp_runtime_refuses_is_a_gap_not_the_users_error() -> None:
    # cel-cpp rejects substring(start, end) with end == size(); cel-go (Kubernetes) accepts it.
    d = DeviceFacts("gpu.nvidia.com", {"productName": "NVIDIA L40S"}, {})
    with pytest.raises(CelError) as caught:
        compile_selector(
            "device.attributes['gpu.nvidia.com'].productName.substring(7, 11) == 'L40S'"
        ).matches(d)
    assert UNSUPPORTED_HERE in str(caught.value)


def test_the_committed_files_are_what_the_builder_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(build, "HERE", tmp_path)
    build.main()
    assert sorted(p.name for p in tmp_path.iterdir()) == [p.name for p in FILES]
    for p in FILES:
        assert (tmp_path / p.name).read_text(encoding="utf-8") == p.read_text(encoding="utf-8"), p.stem


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_no_noise_node_is_a_fault_or_warning_of_the_walk(path: Path) -> None:
    # The fleet's unrelated sickness (a lost GPU, an Xid 79 taint, a crash-looping plugin...) is on
    # nodes the pod does not select: none of it may decide or even appear as a fault or warning.
    result, _ = bundled.diagnose(path)
    noise = set(load_scenario(path).extra["x-noise"])
    loud = [
        f"{f.code} on {f.node}"
        for layer in result.layers
        for f in layer.findings
        if f.node in noise and f.severity.label in ("fault", "warn")
    ]
    assert not loud, loud
