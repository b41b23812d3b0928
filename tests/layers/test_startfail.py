"""The reader of refused container starts (layers/startfail.py) and layer 3's CUDA comparison, on the
exact lines public issues show, as containerd, CRI-O/crun and Docker wrap them."""

from __future__ import annotations

import pytest

from layers import driver_too_old as dto
from layers.facts.startfail import classify, parse_version, start_failures, unwrap
from tests.layers import builders as b

CONTAINERD = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error running hook #0: error running hook: "
    "exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n{}: unknown"
)
# NVIDIA/nvidia-docker#1442 (Docker 19.03, runc's nested quoting)
DOCKER_NESTED = (
    'OCI runtime create failed: container_linux.go:349: starting container process caused "process_linux.go:449: '
    'container init caused \\"process_linux.go:432: running prestart hook 1 caused \\\\\\"error running hook: exit '
    "status 1, stdout: , stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda>=10.2, please "
    'update your driver to a newer version, or use an earlier cuda container\\\\\\\\n\\\\\\"\\"": unknown'
)


@pytest.mark.parametrize(
    ("message", "cause", "detail", "names_driver"),
    [
        (
            CONTAINERD.format(
                "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, please update "
                "your driver to a newer version, or use an earlier cuda container"
            ),
            "requirement",
            "cuda>=12.9",
            True,
        ),
        (DOCKER_NESTED, "requirement", "cuda>=10.2", True),
        # NVIDIA/nvidia-docker#688: the 2018 spelling, with spaces
        (
            "stderr: nvidia-container-cli: requirement error: unsatisfied condition: cuda >= 9.0",
            "requirement",
            "cuda>=9.0",
            True,
        ),
        (
            "nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla",
            "requirement",
            "brand=tesla",
            False,
        ),
        (
            CONTAINERD.format("nvidia-container-cli: initialization error: nvml error: driver not loaded"),
            "driver-not-loaded",
            "",
            True,
        ),
        (
            "nvidia-container-cli: initialization error: driver rpc error: timed out",
            "driver-rpc",
            "timed out",
            True,
        ),
        (
            CONTAINERD.format(
                "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: cannot "
                "open shared object file: no such file or directory"
            ),
            "driver-library",
            "libnvidia-ml.so.1",
            True,
        ),
        # NVIDIA/nvidia-container-toolkit#1239 (RKE2, CDI)
        (
            "Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: could not apply "
            "required modification to OCI specification: error modifying OCI spec: failed to inject CDI devices: unresolvable "
            "CDI devices management.nvidia.com/gpu=GPU-e78e68c0-4e6a-737e-f9cc-4223fe50aead",
            "cdi-unresolvable",
            "management.nvidia.com/gpu=GPU-e78e68c0-4e6a-737e-f9cc-4223fe50aead",
            False,
        ),
        # kubernetes-sigs/dra-driver-nvidia-gpu#736 (DRA)
        (
            "Error: failed to create containerd container: CDI device injection failed: unresolvable CDI devices "
            "k8s.gpu.nvidia.com/device=gpu-1",
            "cdi-unresolvable",
            "k8s.gpu.nvidia.com/device=gpu-1",
            False,
        ),
        # NVIDIA/nvidia-container-toolkit#223
        (
            "stderr: Auto-detected mode as 'legacy' nvidia-container-cli: device error: no-gpu-has-128MiB-to-run: unknown "
            "device: unknown",
            "unknown-device",
            "no-gpu-has-128MiB-to-run",
            False,
        ),
        # NVIDIA/gpu-operator#1598 (OpenShift 4.18, crun)
        (
            "Error: container create failed: error executing hook `/usr/local/nvidia/toolkit/nvidia-container-runtime-hook` "
            "(exit code: 1)",
            "hook-failed",
            "/usr/local/nvidia/toolkit/nvidia-container-runtime-hook",
            False,
        ),
    ],
)
def test_real_refusals_are_classified(message: str, cause: str, detail: str, names_driver: bool) -> None:
    got = classify(message)
    assert got is not None and got[:2] == (cause, detail)
    pod = b.pod("ml", "p", node="n1", containers=["c"])
    pod["status"]["containerStatuses"] = [
        {
            "name": "c",
            "ready": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": "CreateContainerError", "message": message}},
        }
    ]
    [f] = start_failures(pod)
    assert f.names_driver is names_driver and f.container == "c" and f.reason == "CreateContainerError"
    assert "\\" not in f.core and not f.core.endswith("unknown")


def test_other_start_errors_are_not_the_nvidia_runtimes() -> None:
    exec_missing = CONTAINERD.replace(
        "error running hook #0: error running hook: exit status 1, stdout: , stderr: "
        "Auto-detected mode as 'legacy'\n{}",
        'exec: "python": executable file not found in $PATH',
    )
    assert classify(exec_missing) is None
    assert (
        classify('failed to get sandbox runtime: no runtime for "nvidia" is configured') is None
    )  # L2_NO_RUNTIME_NVIDIA


def test_unwrap_keeps_the_hooks_words_only() -> None:
    assert unwrap(DOCKER_NESTED) == (
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=10.2, please update your driver to a "
        "newer version, or use an earlier cuda container"
    )


def test_versions_compare_as_numbers() -> None:
    assert parse_version("12.10") > parse_version("12.9")  # type: ignore[operator]
    assert parse_version("570.158.01") == (570, 158, 1)
    assert dto.cuda_of_int(12040) == (12, 4) and dto.cuda_of_int(11080) == (11, 8)


@pytest.mark.parametrize(
    ("image", "cuda"),
    [
        ("nvcr.io/nvidia/cuda:12.9.1-runtime-ubuntu24.04", (12, 9)),
        ("pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", (12, 8)),
        ("registry.internal/ml/vlm-serve:2025.11-cu128", (12, 8)),
        ("ghcr.io/org/train:cu118-py310", (11, 8)),
        ("nvcr.io/nvidia/pytorch:25.03-py3", None),  # NGC tags name a month, not a CUDA version
        ("registry.example.com/cuda-tools/app:1.2", None),  # "cuda" in the repository, not the tag
    ],
)
def test_cuda_version_of_an_image_tag(image: str, cuda: tuple[int, int] | None) -> None:
    assert dto.image_cuda([image]) == cuda


def _node(name: str, cuda: str, driver: str) -> dict:
    labels = {"nvidia.com/cuda.runtime-version.full": cuda, "nvidia.com/cuda.driver-version.full": driver}
    return b.gpu_node(name, labels=labels)


def _walk_layer3(app_log: str, image: str, target_cuda: str) -> list:
    from layers import versions

    pod = b.pod("ml", "train-0", node="gpu-1", containers=["main"], image=image)
    objects = [
        _node("gpu-1", target_cuda, "550.90.07"),
        _node("gpu-2", "12.8", "570.158.01"),
        _node("gpu-3", "12.4", "550.90.07"),
        pod,
    ]
    ctx = b.ctx(objects, logs=b.logs_for(pod, "main", app_log), pod=("ml", "train-0"))
    return list(versions.check(ctx).findings)


def test_insufficient_driver_in_the_log_without_a_version_names_newer_nodes() -> None:
    log = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n"
    found = _walk_layer3(log, "nvcr.io/nvidia/pytorch:25.03-py3", "12.4")
    [f] = [f for f in found if f.code == "L3_DRIVER_TOO_OLD"]
    assert "needs a newer CUDA than 12.4" in f.summary
    assert (
        "GPU nodes the pod could run on whose driver would do (1 of 3): gpu-2 (driver 570.158.01, CUDA 12.8)"
        in f.evidence
    )


def test_a_label_that_already_satisfies_the_need_is_an_unknown_not_a_fault() -> None:
    log = "RuntimeError: The NVIDIA driver on your system is too old (found version 12040).\n"
    found = _walk_layer3(log, "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime", "12.8")
    assert not [f for f in found if f.code == "L3_DRIVER_TOO_OLD"]
    [u] = [f for f in found if f.code == "L3_UNKNOWN"]
    assert "GFD labels may be stale" in u.summary
