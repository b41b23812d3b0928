"""Unseen incidents for layers 1 and 2, built from real-world variants (tests/incidents/l12/*.yaml).

Each file follows spec/scenario.md and differs from the bundled scenarios in its format details:
CRI-O's wording of the missing runtime handler on OpenShift, the standalone device plugin v0.17 on
k3s with `kubectl logs --timestamps`, events written the events.k8s.io way, MIG quantities as YAML
integers on AKS, kube-scheduler 1.30's unnamed taints, the GPU Operator 1.x namespace, a logrus
validator log caught in Init:Error. The same structural checks as the bundled scenarios guard the
files; the walk must give what `x-expect` says, and the evidence must carry the exact lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_structure,
    incident_files,
    names,
    walked_findings,
)

HERE = Path(__file__).resolve().parent / "l12"
FILES = incident_files("l12")
IDS = [p.stem for p in FILES]


def test_at_least_four_incidents() -> None:
    assert len(FILES) >= 4, FILES


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_the_bundled_scenarios() -> None:
    ours = names(FILES)
    theirs = bundled_names()
    assert not ours & theirs


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def findings(path: Path, code: str) -> list[Any]:
    return walked_findings(path, code)


def by_name(stem: str) -> Path:
    return HERE / f"{stem}.yaml"


def test_crio_handler_message_is_the_evidence_not_a_validator_stage() -> None:
    [f] = findings(by_name("crio-openshift-runtime-handler-missing"), "L2_NO_RUNTIME_NVIDIA")
    assert f.node == "worker-gpu-1.ocp4.example.com" and f.next == 3
    assert any("failed to find runtime handler nvidia from runtime list map[crun:" in e for e in f.evidence)
    assert any(e.startswith("nvidia-gpu-operator/nvidia-operator-validator-r4m8c:") for e in f.evidence)
    assert "kubectl logs -n nvidia-gpu-operator -l app=nvidia-container-toolkit-daemonset" not in f.commands
    assert any("nvidia-container-toolkit-daemonset-8q4qz" in c for c in f.commands)
    [pend] = findings(by_name("crio-openshift-runtime-handler-missing"), "L1_POD_PENDING")
    assert any(
        e.startswith("condition PodScheduled=Unschedulable: 0/4 nodes are available") for e in pend.evidence
    )


def test_incompatible_strategy_line_is_quoted_with_its_timestamp() -> None:
    [f] = findings(
        by_name("standalone-plugin-v017-incompatible-strategy-k3s"), "L2_DEVICE_PLUGIN_NVML_FAILED"
    )
    assert f.evidence[0] == (
        "nvidia-device-plugin-ctr: 2026-11-29T07:58:01.421956337Z E1129 07:58:01.421956       1 "
        "factory.go:112] Incompatible strategy detected auto"
    )
    assert any("did you configure the NVIDIA Container Toolkit?" in e for e in f.evidence)
    assert f.node == "k3s-gpu-01"
    [pend] = findings(by_name("standalone-plugin-v017-incompatible-strategy-k3s"), "L1_POD_PENDING")
    assert any("Warning FailedScheduling (x57) default-scheduler: 0/2 nodes" in e for e in pend.evidence)


def test_mig_exhaustion_counts_limits_only_requests() -> None:
    [f] = findings(by_name("mig-mixed-slices-exhausted-aks"), "L1_GPU_EXHAUSTED")
    assert f.evidence == (
        "aks-a100-30462451-vmss000002: allocatable nvidia.com/mig-1g.10gb=7, requested by pods=7, free=0 < 1",
    )


def test_unnamed_taint_is_named_from_the_gpu_nodes() -> None:
    [f] = findings(by_name("aks-gpu-pool-sku-taint-unnamed"), "L1_UNTOLERATED_TAINT")
    assert "sku=gpu:NoSchedule" in f.summary and "CriticalAddonsOnly" not in f.summary
    assert "aks-gpunc24-18273645-vmss000001: taint sku=gpu:NoSchedule" in f.evidence


def test_vllm_error_not_its_traceback_source_line() -> None:
    path = by_name("vllm-no-gpu-toolkit-validation-init-error")
    [app] = findings(path, "L2_APP_SEES_NO_GPU")
    assert app.summary.endswith("finds no usable GPU: RuntimeError: Failed to infer device type")
    assert not any("raise RuntimeError" in e for e in app.evidence)
    [stuck] = findings(path, "L2_VALIDATOR_STUCK")
    assert "stopped at toolkit-validation" in stuck.summary and stuck.next is None
    assert "toolkit-validation: terminated: Error (exit code 1), restarts 6" in stuck.evidence
    [failing] = findings(path, "L2_OPERAND_FAILING")
    assert "init container toolkit-validation is Error (6 restarts)" in failing.summary
