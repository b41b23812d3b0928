"""One incident per owner of a node (tests/incidents/owners/, made by its build.py): the verdict, the
owner named, and no owner maintenance told as a fault (spec/findings.md, "Who else acts on a node")."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from layers.findings import Finding, Severity, WalkResult
from layers.ownership import MAINTENANCE
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import Incidents, bundled_names, check_structure, names

OWNERS = Incidents("owners")
# The owner each incident must name, and the node it owns.
NAMED = {
    "owners-nvsentinel-quarantined-syslog-xid79-h100-bound-22-nodes": (
        "NVSentinel (quarantined)",
        "h100-infer-03",
    ),
    "owners-nvsentinel-drain-failed-gpumemwatch-contact-support-h100-22-nodes": (
        "NVSentinel (drain-failed)",
        "h100-infer-03",
    ),
    "owners-driver-upgrade-drain-required-a100-pending-22-nodes": (
        "GPU Operator driver upgrade (drain-required)",
        "a100-train-04",
    ),
    "owners-driver-manager-paused-for-driver-upgrade-a100-pending-22-nodes": (
        "GPU Operator driver manager (paused-for-driver-upgrade)",
        "a100-train-04",
    ),
    "owners-mig-manager-paused-for-mig-change-a100-pending-22-nodes": (
        "MIG manager (paused-for-mig-change)",
        "a100-train-04",
    ),
    "owners-cluster-autoscaler-to-be-deleted-a100-pending-22-nodes": (
        "cluster-autoscaler (deleting the node)",
        "a100-train-04",
    ),
    "owners-karpenter-disrupted-a100-pending-22-nodes": ("Karpenter (disrupting the node)", "a100-train-04"),
    "owners-eks-accelerated-hardware-ready-false-xid79-h100-bound-22-nodes": (
        "EKS node monitoring agent: condition AcceleratedHardwareReady=False, reason NvidiaXID79Error",
        "h100-infer-03",
    ),
    "owners-gke-autopilot-xidcriticalerror-xid48-h100-bound-22-nodes": (
        'GKE device plugin: condition XidCriticalError=True, reason {"48":true}',
        "gk3-prod-eu-nap-h100-80gb-3b1f2c9a-x7kq",
    ),
    "owners-aks-npd-xiderrors-remediator-taint-a100-pending-22-nodes": ("AKS (remediating)", "a100-train-04"),
    "owners-sagemaker-hyperpod-unschedulable-pending-reboot-a100-pending-22-nodes": (
        "SageMaker HyperPod (UnschedulablePendingReboot)",
        "a100-train-04",
    ),
    "owners-person-kubectl-cordon-managed-fields-a100-pending-22-nodes": (
        "field manager kubectl-cordon at 2026-11-28T17:21:40Z",
        "a100-train-04",
    ),
}


@functools.cache
def _walk_all(stem: str) -> WalkResult:
    return bundled.diagnose(OWNERS.path(stem), all_layers=True)[0]


def _findings(result: WalkResult) -> list[Finding]:
    return [f for layer in result.layers for f in layer.findings]


def test_one_incident_per_owner() -> None:
    assert sorted(OWNERS.ids) == sorted(NAMED)


@pytest.mark.parametrize("path", OWNERS.files, ids=OWNERS.ids)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_every_other_scenario() -> None:
    assert not names(OWNERS.files) & bundled_names()


@pytest.mark.parametrize("path", OWNERS.files, ids=OWNERS.ids)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


@pytest.mark.parametrize("path", OWNERS.files, ids=OWNERS.ids)
def test_the_owner_is_named_on_its_node(path: Path) -> None:
    owner, node = NAMED[path.stem]
    result, _ = bundled.diagnose(path)
    said = [
        f for f in _findings(result) if f.node == node and any(owner in t for t in (f.summary, *f.evidence))
    ]
    assert said, bundled.explain(result)


@pytest.mark.parametrize("path", OWNERS.files, ids=OWNERS.ids)
def test_no_owner_maintenance_is_a_fault(path: Path) -> None:
    """Walking every layer: what an owner's flow does on its node is info with no next, and an
    owner's taint is never a toleration to add."""
    _, node = NAMED[path.stem]
    result = _walk_all(path.stem)
    for f in _findings(result):
        assert f.code != "L1_UNTOLERATED_TAINT", bundled.explain(result)
        if f.node == node and f.code in MAINTENANCE and "flow" in f.summary:
            assert f.severity == Severity.INFO and f.next is None, f


@pytest.mark.parametrize("path", OWNERS.files, ids=OWNERS.ids)
def test_noise_never_decides(path: Path) -> None:
    result, _ = bundled.diagnose(path)
    noise = set(bundled.read(path)["x-noise"])
    assert result.verdict is not None and result.verdict.node not in noise


def test_driver_upgrade_flow_is_info_in_every_layer() -> None:
    stem = "owners-driver-upgrade-drain-required-a100-pending-22-nodes"
    result = _walk_all(stem)
    on_node = [f for f in _findings(result) if f.node == "a100-train-04"]
    stuck = [f for f in on_node if f.code in ("L2_VALIDATOR_STUCK", "L5_ALLOCATABLE_BELOW_CAPACITY")]
    assert {f.code for f in stuck} == {"L2_VALIDATOR_STUCK", "L5_ALLOCATABLE_BELOW_CAPACITY"}
    assert all(f.severity == Severity.INFO and "drain-required" in f.summary for f in stuck), stuck
    assert not [f for f in on_node if f.severity == Severity.FAULT], on_node
    [cordon] = OWNERS.findings(stem, "L1_NODES_UNSCHEDULABLE")
    assert "do not uncordon" in cordon.summary and "GPU Operator driver upgrade" in cordon.summary


def test_a_persons_cordon_names_the_field_manager_and_may_be_undone() -> None:
    [f] = OWNERS.findings(
        "owners-person-kubectl-cordon-managed-fields-a100-pending-22-nodes", "L1_NODES_UNSCHEDULABLE"
    )
    assert "a100-train-04: cordoned by field manager kubectl-cordon at 2026-11-28T17:21:40Z" in f.evidence
    assert f.summary.endswith("uncordon them once they are healthy")


def test_health_agents_xids_name_their_condition() -> None:
    for stem, condition in (
        ("owners-nvsentinel-quarantined-syslog-xid79-h100-bound-22-nodes", "SysLogsXIDError (NVSentinel)"),
        ("owners-eks-accelerated-hardware-ready-false-xid79-h100-bound-22-nodes", "AcceleratedHardwareReady"),
    ):
        [xid] = OWNERS.findings(stem, "L5_XID")
        assert xid.summary.startswith("Xid 79 on h100-infer-03") and xid.severity == Severity.FAULT
        assert any(e.startswith("source: node condition " + condition) for e in xid.evidence), xid.evidence


def test_contact_support_is_said_with_the_agents_words() -> None:
    stem = "owners-nvsentinel-drain-failed-gpumemwatch-contact-support-h100-22-nodes"
    [f] = OWNERS.findings(stem, "L5_HEALTH_AGENT_CONDITION")
    assert "recommended action CONTACT_SUPPORT" in f.summary
    assert any("DCGM_FR_FAULTY_MEMORY" in e for e in f.evidence)
    assert any(e.startswith("owner: NVSentinel (drain-failed)") for e in f.evidence)


def test_autopilot_and_driver_manager_say_what_follows_a_cordon() -> None:
    [gke] = OWNERS.findings(
        "owners-gke-autopilot-xidcriticalerror-xid48-h100-bound-22-nodes", "L1_NODE_OWNER"
    )
    assert any("GKE Autopilot re-creates" in e for e in gke.evidence), gke.evidence
