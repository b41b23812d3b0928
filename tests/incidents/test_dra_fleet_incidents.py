"""DRA pods whose claim was allocated but whose container never starts (tests/incidents/dra_fleets/*.yaml).

Production-shaped DRA fleets (tests/incidents/drafleet.py): 12–16 nodes of several pools where other
nodes carry a lost GPU, an Xid 79 taint, a crash-looping kubelet plugin with its own stuck pod, a
crash-looping driver. Scenario in, `x-expect` out (tests/incidents/test_dra_incidents.py walks every
file of the folder); here, what a person acts on: the claim and the node's kubelet plugin named,
the noise never in the walk (tests/test_contract_dra_incidents.py walks them through the real
kubernetes client).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from layers.findings import Finding, Severity, WalkResult
from tests import test_bundled_scenarios as bundled
from tests.incidents import dra_fleets_build
from tests.incidents.scenario_checks import bundled_names, check_structure, incident_files, names

HERE = Path(__file__).resolve().parent / "dra_fleets"
FILES = incident_files("dra_fleets")
IDS = [p.stem for p in FILES]
CDI = "dra-start-cdi-claim-spec-lost-after-reboot-13-nodes"
MIG = "dra-start-mig-claim-prepare-failed-h200-12-nodes"
PLUGIN = "dra-start-kubelet-plugin-not-registered-a100-12-nodes"
CEL = "dra-cel-lowerascii-selector-cordoned-h100-14-nodes"


@functools.cache
def _parsed(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)


@pytest.fixture
def fast_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The bundled structure checks read a file once per check; these fleets are large, so each is
    parsed once with libyaml (the loader the product uses) and handed out as a fresh copy."""

    monkeypatch.setattr(bundled, "read", data)
    yield


def data(path: Path) -> dict[str, Any]:
    got = copy.deepcopy(_parsed(path))
    assert isinstance(got, dict), f"{path.name}: not a mapping"
    return got


@functools.cache
def diagnosed(stem: str) -> tuple[WalkResult, dict[str, Any]]:
    result, exp = bundled.diagnose(HERE / f"{stem}.yaml")
    return result, exp


def start_failed(stem: str) -> Finding:
    result, _ = diagnosed(stem)
    [f] = [f for layer in result.layers for f in layer.findings if f.code == "L2_CONTAINER_START_FAILED"]
    return f


@pytest.mark.usefixtures("fast_read")
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


@pytest.mark.usefixtures("fast_read")
def test_names_differ_from_every_other_scenario() -> None:
    assert not names(FILES) & (bundled_names() | names(incident_files("dra")))


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    result, exp = diagnosed(path.stem)
    codes = bundled.found(result)
    detail = bundled.explain(result)
    assert [r.layer for r in result.layers] == exp["walk"], detail
    assert (result.verdict.code if result.verdict else None) == exp["verdict"], detail
    assert not [c for c in exp["codes"] if c not in codes], detail
    assert not [c for c in exp.get("absent") or [] if c in codes], detail


def test_three_incidents_on_fleets_of_a_dozen_nodes_and_more() -> None:
    assert [p.stem for p in FILES] == sorted([CDI, MIG, PLUGIN, CEL])
    for p in FILES:
        scenario = data(p)
        nodes = bundled.kinds(scenario, "Node")
        assert len(nodes) >= 12 and len(scenario["x-noise"]) >= 5, p.stem


def test_the_committed_files_are_what_the_builder_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dra_fleets_build, "HERE", tmp_path)
    dra_fleets_build.main()
    for p in FILES:
        assert _parsed(tmp_path / p.name) == _parsed(p), p.stem


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_no_noise_node_is_a_fault_or_warning_of_the_walk(path: Path) -> None:
    result, exp = diagnosed(path.stem)
    noise = set(data(path)["x-noise"])
    loud = [
        f"{f.code} on {f.node}"
        for layer in result.layers
        for f in layer.findings
        if f.severity in (Severity.FAULT, Severity.WARN)
        and (f.node in noise or any(n in f.summary for n in noise))
    ]
    assert not loud, loud
    target_node = bundled.pods_by_key(data(path))[tuple(exp["target"].split("/"))]["spec"].get("nodeName")
    # A bound pod's answer is on its node; a pending pod's on a candidate (never a noise node, above).
    assert result.verdict is not None and (target_node is None or result.verdict.node == target_node)


def test_a_lost_claim_spec_names_the_claim_its_devices_and_the_plugin() -> None:
    f = start_failed(CDI)
    assert f.node == "h100-05" and f.next is None and f.severity == Severity.FAULT
    assert "cannot start container trainer" in f.summary
    assert "no CDI spec for claim llm/qwen3-sft-0-gpus-" in f.summary and "delete the pod" in f.summary
    assert "h100-05/gpu-0, h100-05/gpu-1, h100-05/gpu-2, h100-05/gpu-3" in f.summary
    [plugin] = [e for e in f.evidence if e.startswith("DRA kubelet plugin ")]
    assert plugin.startswith("DRA kubelet plugin nvidia-dra-driver-gpu/dra-driver-nvidia-gpu-kubelet-plugin-")
    assert plugin.endswith("(gpus): Ready, restarted 1 time(s)")
    # Its previous log (before the reboot) shows it prepared exactly this claim.
    [line] = [e for e in f.evidence if e.startswith("plugin log:")]
    assert "Returning newly prepared devices for claim" in line and "(previous)" in line
    claim_uid = next(e for e in f.evidence if e.startswith("claim ")).split("(uid ")[1].split(")")[0]
    assert f"k8s.gpu.nvidia.com/claim={claim_uid}-gpu-0" in f.evidence[0]
    assert any(c.endswith(f"-c gpus | grep {claim_uid}") for c in f.commands)
    # Not the toolkit's CDI refresh: the claim's spec is the DRA plugin's.
    assert not any("nvidia-container-toolkit" in c for c in f.commands)


def test_a_failed_prepare_quotes_the_plugins_error_once_and_its_log_line() -> None:
    f = start_failed(MIG)
    assert f.node == "h200-03" and "cannot start container memsat" in f.summary
    assert "failed to prepare claim bench/memsat-mig-0-gpus-" in f.summary
    assert "failed to construct MIG device DeviceNode edits" in f.summary
    assert "error preparing devices" not in f.summary  # the claim is said once, not thrice
    assert any(
        e.startswith("claim bench/memsat-mig-0-gpus-") and "gpu-1-mig-1g18gb-19-1" in e for e in f.evidence
    )
    assert any(
        "Reconcile: error preparing devices for claim 'bench/memsat-mig-0-gpus-" in e for e in f.evidence
    )


def test_a_plugin_that_is_not_registered_is_named_with_its_last_words() -> None:
    f = start_failed(PLUGIN)
    assert f.node == "a100-02" and "cannot start container trainer" in f.summary
    assert "no DRA plugin gpu.nvidia.com registered" in f.summary
    assert "container gpus: CrashLoopBackOff, 12 restarts" in f.summary
    assert any("error initializing NVML: ERROR_LIBRARY_NOT_FOUND" in e for e in f.evidence)
    # The other node's plugin crash and its own stuck pod (same event text) stay out of this walk.
    assert all("nightly-eval" not in e for e in f.evidence)


def test_a_strings_extension_selector_is_evaluated_as_kubernetes_does() -> None:
    # The API server type-checks selectors with Kubernetes' CEL libraries (strings v2 among them): the
    # walk evaluates `lowerAscii` too, so no "cannot evaluate" and no claim that no device matches.
    result, _ = diagnosed(CEL)
    layer1 = result.layers[0].findings
    assert not [f for f in layer1 if f.code == "L1_UNKNOWN"]
    [pending] = [f for f in layer1 if f.code == "L1_DRA_CLAIM_PENDING"]
    assert any("2 cannot allocate all claims" in e for e in pending.evidence)
    assert not {"L1_DRA_SELECTOR_UNSATISFIED", "L1_DRA_DEVICES_EXHAUSTED"} & {f.code for f in layer1}
