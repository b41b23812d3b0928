"""The owners' marks as layers/facts/owners.py reads them: holders and reporters, the three phases,
NVSentinel without its state label (any `cordon-by` prefix), Karpenter before v1 (spec/findings.md,
"Holders and reporters")."""

from __future__ import annotations

from typing import Any

import pytest

from layers.facts import owners as ow
from layers.nodepolicy import decide
from tests.bundle_scenario import node


def _cordon(n: dict[str, Any], manager: str) -> dict[str, Any]:
    n["spec"]["unschedulable"] = True
    n["metadata"]["managedFields"] = [
        {"manager": manager, "operation": "Update", "time": "2026-11-29T09:00:00Z",
         "fieldsV1": {"f:spec": {"f:unschedulable": {}}}},
    ]  # fmt: skip
    return n


@pytest.mark.parametrize("prefix", ["k8saas.nvidia.com/", "sentinel.example.com/"])
def test_nvsentinel_holds_by_its_cordon_by_label_without_its_state_label(prefix: str) -> None:
    n = _cordon(node("gpu-1", 8, 8), "fault-quarantine")
    n["metadata"]["labels"][prefix + "cordon-by"] = "NVSentinel"
    [held] = ow.holders_of(n)
    assert (held.owner, held.state, held.phase) == ("NVSentinel", "quarantined", "running")
    p = decide(n)
    assert not p.uncordon_force.offered and "NVSentinel" in p.uncordon_force.said


def test_a_cordon_by_label_of_another_tool_is_not_nvsentinel() -> None:
    n = node("gpu-1", 8, 8)
    n["metadata"]["labels"]["k8saas.nvidia.com/cordon-by"] = "someone-else"
    assert ow.owners_of(n) == []


def test_nvsentinel_holds_by_its_quarantine_annotation_alone() -> None:
    n = node("gpu-1", 8, 8)
    n["metadata"].setdefault("annotations", {})["quarantineHealthEvent"] = '[{"checkName":"GpuMemWatch"}]'
    assert [h.owner for h in ow.holders_of(n)] == ["NVSentinel"]


@pytest.mark.parametrize(
    ("key", "value", "owner"),
    [
        ("karpenter.sh/disrupted", "", "Karpenter"),
        ("karpenter.sh/disruption", "disrupting", "Karpenter"),
        ("karpenter.sh/disruption", "candidate", None),
        ("ToBeDeletedByClusterAutoscaler", "1795945800", "cluster-autoscaler"),
    ],
)
def test_removal_taints(key: str, value: str, owner: str | None) -> None:
    taint = {"key": key, "value": value, "effect": "NoSchedule"}
    assert ow.owner_taint(taint) == owner
    n = node("gpu-1", 8, 8)
    n["spec"]["taints"] = [taint]
    assert [h.owner for h in ow.holders_of(n)] == ([owner] if owner else [])


def _eks(n: dict[str, Any]) -> dict[str, Any]:
    n["status"]["conditions"].append(
        {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error", "message": ""}
    )
    return n


def test_a_health_agent_reports_until_the_platform_also_cordons() -> None:
    reported = _eks(node("gpu-1", 8, 8))
    assert ow.holders_of(reported) == [] and ow.owners_of(reported)[0].role == "reporter"
    assert decide(reported).row == "reported" and decide(reported).cordon.offered
    by_person = _eks(_cordon(node("gpu-2", 8, 8), "kubectl-cordon"))
    assert ow.holders_of(by_person) == [] and decide(by_person).row == "cordoned-by-person"
    by_repair = _eks(_cordon(node("gpu-3", 8, 8), "eks-node-monitoring-agent"))
    [held] = ow.holders_of(by_repair)
    assert held.owner == "EKS node monitoring agent" and decide(by_repair).row == "running-repair"


@pytest.mark.parametrize(
    ("state", "phase"),
    [("upgrade-required", "queued"), ("cordon-required", "running"), ("upgrade-failed", "gave-up")],
)
def test_the_upgrades_phases(state: str, phase: str) -> None:
    n = node("gpu-1", 8, 8)
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = state
    [held] = ow.holders_of(n)
    assert held.phase == phase
    assert decide(n).cordon.offered == (phase != "running")


def test_contact_support_is_giving_up() -> None:
    n = node("gpu-1", 8, 8)
    n["metadata"]["labels"]["dgxc.nvidia.com/nvsentinel-state"] = "quarantined"
    n["status"]["conditions"].append(
        {"type": "GpuMemWatch", "status": "True", "reason": "GpuMemWatchIsNotHealthy",
         "message": "ErrorCode:DCGM_FR_FAULTY_MEMORY Recommended Action=CONTACT_SUPPORT;"}
    )  # fmt: skip
    p = decide(n)
    assert (
        p.row == "gave-up"
        and "a person must act" in p.advise("Drain the node")
        and "wait" not in p.advice_head
    )
