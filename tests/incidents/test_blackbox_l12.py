"""Black-box incidents for layers 1 and 2 (tests/incidents/blackbox/l12/*.yaml).

Written from the spec and the samples before reading the layer code: customer-shaped dumps with the noise
of `kubectl get -o yaml` (managedFields, ownerReferences, conditions, node images, sidecars, non-GPU nodes and
pods, events of other objects, a pasted `kind: List`, events in the events.k8s.io shape). Each file's
`x-expect` comes from spec/findings.md; the walk must give it. A few tests pin the evidence a person
needs (the exact line, the node, the numbers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_flattened_structure,
    incident_files,
    names,
    walked_findings,
)

HERE = Path(__file__).resolve().parent / "blackbox" / "l12"
FILES = incident_files("blackbox/l12")
IDS = [p.stem for p in FILES]


def by_name(stem: str) -> Path:
    return HERE / f"{stem}.yaml"


def findings(stem: str, code: str) -> list[Any]:
    return walked_findings(by_name(stem), code)


def test_at_least_eight_incidents() -> None:
    assert len(FILES) >= 8, FILES


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path, tmp_path: Path) -> None:
    check_flattened_structure(path, tmp_path)


def test_names_differ_from_every_other_incident() -> None:
    ours = names(FILES)
    others = bundled_names() | names(incident_files("l12"))
    assert not ours & others


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def test_renamed_shared_resource_is_named_as_what_nodes_advertise() -> None:
    [f] = findings("time-slicing-renamed-plain-gpu-request", "L1_RESOURCE_MISMATCH")
    assert "nvidia.com/gpu.shared" in f.summary and f.next == "stop"


def test_stale_labels_point_at_both_silent_nodes() -> None:
    nodes = {f.node for f in findings("operator-uninstalled-stale-gfd-labels", "L1_GPU_NODE_NOT_ADVERTISING")}
    assert nodes == {"gpu-v100-1", "gpu-v100-2"}


def test_waiting_for_nvidiadriver_pod_names_it_on_the_new_node() -> None:
    [f] = findings("new-node-nvidiadriver-compiling-custom-namespace", "L2_WAITING_FOR_DRIVER")
    assert f.node == "xe9680-03" and f.next == 3
    assert any("nvidia-gpu-driver-ubuntu22.04-w7mzq" in e for e in f.evidence)
    [n] = findings("new-node-nvidiadriver-compiling-custom-namespace", "L1_GPU_NODE_NOT_ADVERTISING")
    assert n.node == "xe9680-03"


def test_devicequery_line_without_parentheses_is_the_app_evidence() -> None:
    [f] = findings("cuda-validation-exclusive-process-devicequery", "L2_APP_SEES_NO_GPU")
    assert any("cudaGetDeviceCount returned 46" in e for e in f.evidence)
    [stuck] = findings("cuda-validation-exclusive-process-devicequery", "L2_VALIDATOR_STUCK")
    assert "cuda-validation" in stuck.summary and stuck.next is None


def test_invalid_mig_config_is_an_operand_failure_with_its_line() -> None:
    [f] = findings("device-plugin-invalid-mig-config-dgx-reboot", "L2_OPERAND_FAILING")
    assert f.node == "dgx-a100-03"
    assert any("invalid MIG configuration" in e for e in f.evidence)
    [stuck] = findings("device-plugin-invalid-mig-config-dgx-reboot", "L2_VALIDATOR_STUCK")
    assert "plugin-validation" in stuck.summary and stuck.next is None


def test_single_quoted_runtime_message_is_quoted() -> None:
    [f] = findings("rke2-upgrade-runtime-handler-single-quotes", "L2_NO_RUNTIME_NVIDIA")
    assert f.node == "rke2-gpu-1" and f.next == 3
    assert any("no runtime for 'nvidia' is configured" in e for e in f.evidence)


def test_taint_summary_names_the_gpu_taint_only() -> None:
    [f] = findings("gpu-taint-tolerated-with-wrong-effect", "L1_UNTOLERATED_TAINT")
    assert "nvidia.com/gpu" in f.summary and "control-plane" not in f.summary


def test_new_style_event_message_is_the_evidence() -> None:
    [f] = findings("node-affinity-gpu-memory-gt-new-style-events", "L1_POD_PENDING")
    assert any("didn't match Pod's node affinity/selector" in e for e in f.evidence)


def test_cordoned_nodes_are_named() -> None:
    [f] = findings("driver-upgrade-cordons-unschedulable-taint", "L1_NODES_UNSCHEDULABLE")
    text = f.summary + " ".join(f.evidence)
    assert "gpu-node-b" in text and "gpu-node-c" in text and "gpu-node-a" not in f.summary


def test_finished_jobs_do_not_count_as_requested() -> None:
    [f] = findings("shared-replicas-exhausted-completed-jobs-hold-nothing", "L1_GPU_EXHAUSTED")
    assert any("requested by pods=8" in e for e in f.evidence), f.evidence


def test_tensorflow_cuinit_line_is_the_app_evidence() -> None:
    [f] = findings("tensorflow-no-gpu-limit-cuinit-no-device", "L2_APP_SEES_NO_GPU")
    assert any("CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" in e for e in f.evidence)


def test_wrong_effect_is_said_in_the_taint_summary() -> None:
    [f] = findings("gpu-taint-tolerated-with-wrong-effect", "L1_UNTOLERATED_TAINT")
    assert "only with effect NoExecute" in f.summary
    assert "pod tolerations: nvidia.com/gpu:NoExecute (Exists)" in f.evidence


def test_affinity_evidence_shows_the_failed_expression() -> None:
    [f] = findings("node-affinity-gpu-memory-gt-new-style-events", "L1_SELECTOR_MISMATCH")
    assert (
        "hgx-a100-2: required node affinity: nvidia.com/gpu.memory Gt 90000, node has nvidia.com/gpu.memory=81920"
        in f.evidence
    )
