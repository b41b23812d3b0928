"""Layer 2's L2_APP_SEES_NO_GPU hints: the RuntimeClass the pod does not name (spec), and NVML's
`Unknown Error` of a container that lost its GPUs (NVIDIA/nvidia-container-toolkit#48)."""

from __future__ import annotations

from typing import Any

import pytest

from layers.sources import K8sObject
from tests.layers.builders import crash_looping, forbidden, gpu_node, healthy_operator, logs_for, one
from tests.layers.test_runtime import NODE, app, run

# The runtime class the GPU Operator's toolkit creates (handler `nvidia`).
NVIDIA_RC: K8sObject = {
    "apiVersion": "node.k8s.io/v1",
    "kind": "RuntimeClass",
    "metadata": {"name": "nvidia"},
    "handler": "nvidia",
}
NO_GPU = "RuntimeError: No CUDA GPUs are available"
# Verbatim from the container, as in NVIDIA/nvidia-container-toolkit#1227 (`nvidia-smi -L` inside it).
UNKNOWN = "Failed to initialize NVML: Unknown Error"


def target(**spec: Any) -> K8sObject:
    p = app(statuses=[crash_looping("trainer", 3)])
    p["spec"].update(spec)
    return p


def finding_for(objects: list[K8sObject], pod: K8sObject, line: str, **kw: Any) -> Any:
    logs = logs_for(pod, "trainer", f"step 1200 loss 1.93\n{line}\n", previous=True)
    return one(
        run([gpu_node(NODE), pod, *healthy_operator(NODE), *objects], logs, **kw), "L2_APP_SEES_NO_GPU"
    )


def test_a_pod_naming_no_runtime_class_is_told_to_set_the_nvidia_one() -> None:
    f = finding_for([NVIDIA_RC], target(), NO_GPU)
    assert "set `runtimeClassName: nvidia`" in f.summary
    assert "kubectl get runtimeclasses" in f.commands


@pytest.mark.parametrize(
    "objects, spec",
    [
        ([NVIDIA_RC], {"runtimeClassName": "nvidia"}),  # it names it already
        ([], {}),  # no such class: the toolkit is the default runtime, or not installed
        ([{**NVIDIA_RC, "metadata": {"name": "kata"}, "handler": "kata-qemu"}], {}),  # another runtime
    ],
)
def test_no_runtime_class_hint_where_it_would_not_help(
    objects: list[K8sObject], spec: dict[str, Any]
) -> None:
    f = finding_for(objects, target(**spec), NO_GPU)
    assert "runtimeClassName" not in f.summary and "kubectl get runtimeclasses" not in f.commands


def test_a_runtime_class_by_handler_is_named_by_its_own_name() -> None:
    rc = {**NVIDIA_RC, "metadata": {"name": "nvidia-legacy"}}
    assert "set `runtimeClassName: nvidia-legacy`" in finding_for([rc], target(), NO_GPU).summary


def test_runtime_classes_that_cannot_be_read_leave_the_finding_without_the_hint() -> None:
    f = finding_for(
        [NVIDIA_RC],
        target(),
        NO_GPU,
        fail={"list_runtimeclasses": forbidden("list", "runtimeclasses.node.k8s.io")},
    )
    assert f.summary.endswith(NO_GPU) and "runtimeClassName" not in f.summary


@pytest.mark.parametrize(
    "line",
    [
        UNKNOWN,
        "2026-11-29T09:14:02.118Z pynvml.NVMLError_Unknown: Failed to initialize NVML: Unknown Error",
        "failed to initialise NVML: unknown error",
    ],
)
def test_nvml_unknown_error_says_the_container_lost_its_gpus_and_how_to_prevent_it(line: str) -> None:
    f = finding_for([], target(runtimeClassName="nvidia"), line)
    assert "lost access" in f.summary and "nvidia-container-toolkit#48" in f.summary
    assert "Delete the pod" in f.summary and "DISABLE_DEV_CHAR_SYMLINK_CREATION" in f.summary
    assert any("/host/dev/char" in c and NODE in c for c in f.commands)


@pytest.mark.parametrize(
    "line",
    [
        "Failed to initialize NVML: Driver/library version mismatch",
        "Failed to initialize NVML: GPU access blocked by the operating system",
        NO_GPU,
    ],
)
def test_other_nvml_failures_are_not_told_as_a_lost_device_cgroup(line: str) -> None:
    f = finding_for([], target(runtimeClassName="nvidia"), line)
    assert "nvidia-container-toolkit#48" not in f.summary
