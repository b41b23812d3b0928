"""What the probe4 incidents (tests/incidents/probe4/, layers 2-4 and DRA) must say beyond their
`x-expect` (which tests/incidents/test_probe_incidents.py checks): the words a person acts on, the
nodes a walk examines, and the real-world lines each defect was found with, read by the unit that
reads them. Each test failed before its fix (README.md beside the incidents lists them)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import yaml

from bot.sources.scenario import build_sources, load_scenario
from layers.facts import logsigs as sig
from layers.facts.draslices import build_inventory
from layers.facts.startfail import classify
from layers.findings import Finding, Severity
from layers.walk import open_pod
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import walked_findings

HERE = Path(__file__).resolve().parent / "probe4"
MISMATCH = "probe4-driver-library-mismatch-host-driver-upgraded-h100-23-nodes"
OLD_GFD = "probe4-v23-6-old-gfd-labels-cuda-12-2-required-a100-on-525-24-nodes"
TRTLLM = "probe4-trtllm-cudamallocasync-oom-triton-h100-23-nodes"
NCCL = "probe4-nccl-cuda-failure-out-of-memory-ddp-a100-23-nodes"
EXHAUSTED = "probe4-dra-h100-claims-exhausted-tainted-a100-noise-19-nodes"
NO_CLASS = "probe4-dra-mig-deviceclass-missing-gpu-only-install-18-nodes"
EMPTY = "probe4-dra-gke-empty-resourceslice-a100-pool-16-nodes"
XID48 = "probe4-dra-xid48-health-event-republish-failed-h200-17-nodes"


def one(stem: str, code: str) -> Finding:
    [f] = walked_findings(HERE / f"{stem}.yaml", code)
    return f


@functools.cache
def _text(stem: str) -> str:
    return (HERE / f"{stem}.yaml").read_text(encoding="utf-8")


# --- layer 2: the toolkit's driver/library version mismatch -----------------------------------------


def test_version_mismatch_is_a_driver_cause() -> None:
    got = classify(
        "stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: initialization error: nvml error: "
        "driver/library version mismatch: unknown"
    )
    assert got is not None and got[0] == "driver-mismatch", got


def test_version_mismatch_sends_the_walk_to_layer_3_with_the_reboot() -> None:
    f = one(MISMATCH, "L2_CONTAINER_START_FAILED")
    assert f.next == 3 and f.node == "h100-infer-03"
    assert "module" in f.summary and "reboot" in f.summary, f.summary
    assert "toolkit's log" not in f.summary


# --- layer 3: GFD's pre-v0.15 labels ----------------------------------------------------------------


def test_driver_too_old_quotes_the_labels_the_node_carries() -> None:
    f = one(OLD_GFD, "L3_DRIVER_TOO_OLD")
    assert "nvidia.com/cuda.runtime.minor=0" in f.evidence[1], f.evidence
    assert "runtime-version.full" not in f.evidence[1]
    assert "-L nvidia.com/cuda.driver.major" in f.commands[0], f.commands


# --- layer 4: GPU out-of-memory in TensorRT-LLM's and NCCL's words -----------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory "
        "(/app/tensorrt_llm/cpp/tensorrt_llm/runtime/tllmBuffers.h:112)",
        "RuntimeError: [TensorRT-LLM][ERROR] CUDA runtime error in error: out of memory (/x/ipcUtils.cpp:48)",
        "ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'",
        "h:1:2 [0] enqueue.cc:1085 NCCL WARN Cuda failure 2 'out of memory'",
        "CUDA failed with error out of memory",
    ],
)
def test_gpu_oom_words_of_trtllm_nccl_ctranslate2(line: str) -> None:
    assert sig.gpu_oom_lines(line) == [line]


@pytest.mark.parametrize(
    "line",
    [
        "h:1:2 [0] include/alloc.h:102 NCCL WARN Cuda failure 1 'invalid argument'",
        "[TensorRT-LLM][ERROR] CUDA runtime error in cudaSetDevice(device): invalid device ordinal",
        "java.lang.OutOfMemoryError: Java heap space",
    ],
)
def test_other_cuda_failures_are_not_gpu_oom(line: str) -> None:
    assert sig.gpu_oom_lines(line) == []


@pytest.mark.parametrize(
    ("stem", "words"), [(TRTLLM, "cudaMallocAsync"), (NCCL, "Cuda failure 'out of memory'")]
)
def test_the_oom_line_is_the_evidence(stem: str, words: str) -> None:
    f = one(stem, "L4_GPU_OOM_IN_LOGS")
    assert any(words in e for e in f.evidence), f.evidence


# --- DRA ------------------------------------------------------------------------------------------------


def test_pools_the_claims_selector_excludes_are_not_examined() -> None:
    scenario = load_scenario(HERE / f"{EXHAUSTED}.yaml")
    cluster, telemetry = build_sources(scenario)
    ctx = open_pod(cluster, telemetry, "research", "llama-pretrain-0")
    assert ctx.examined_nodes() == ["h100-01", "h100-02", "h100-03", "h100-04"]
    f = one(EXHAUSTED, "L1_DRA_DEVICES_EXHAUSTED")
    assert all(e.startswith("h100-") for e in f.evidence[:4]), f.evidence


def test_a_missing_class_is_not_a_selector_to_change() -> None:
    f = one(NO_CLASS, "L1_DRA_DEVICECLASS_MISSING")
    assert "mig.nvidia.com" in f.summary
    [l2] = walked_findings(HERE / f"{NO_CLASS}.yaml", "L2_UNKNOWN")
    assert "no GPU node to examine" in l2.summary


def test_an_empty_slice_says_the_plugin_runs_but_found_no_gpu() -> None:
    f = one(EMPTY, "L1_DRA_NO_DEVICES")
    assert f.node == "gke-a100-pool-03"
    assert "lists no device" in f.summary and "not running" not in f.summary, f.summary
    assert "spec.devices empty" in f.evidence[0]


def test_inventory_knows_nodes_whose_slice_is_empty() -> None:
    spec = {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 2,
                                                                    "resourceSliceCount": 1}, "devices": []}  # fmt: skip
    inv = build_inventory([{"metadata": {"name": "n1-gpu"}, "spec": spec}])
    assert inv.empty == frozenset({"n1"}) and not inv.devices


def test_an_xid_the_plugin_could_not_publish_is_that_xid() -> None:
    f = one(XID48, "L5_XID")
    assert f.node == "h200-02" and f.severity == Severity.FAULT
    assert "Xid 48" in f.summary
    assert any("Failed to publish resources after taint update" in e for e in f.evidence), f.evidence
    assert not walked_findings(HERE / f"{XID48}.yaml", "L5_DEVICE_UNHEALTHY")


def test_an_ignored_xid_the_plugin_could_not_publish_is_a_warning(tmp_path: Path) -> None:
    """The same log for Xid 13, which the driver taints with effect None: evidence, not a fault."""
    text = (
        _text(XID48)
        .replace("XID=48", "XID=13")
        .replace('gpu.nvidia.com/xid="48" (effect=NoSchedule)', 'gpu.nvidia.com/xid="13" (effect=None)')
    )
    data = yaml.safe_load(text)
    path = tmp_path / "xid13.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    result, _ = bundled.diagnose(path)
    found = [f for layer in result.layers for f in layer.findings]
    [x] = [f for f in found if f.code == "L5_XID"]
    assert "Xid 13" in x.summary and x.severity == Severity.WARN, x
    assert not [f for f in found if f.code == "L5_DEVICE_UNHEALTHY"]


def test_a_shared_claim_allocated_elsewhere_pins_the_pod_there() -> None:
    stem = "probe4-dra-shared-claim-allocated-on-h100-learner-selects-a100-15-nodes"
    f = one(stem, "L1_DRA_CLAIM_PENDING")
    assert "pin it to h100-03" in f.summary and "(none unallocated)" not in f.summary, f.summary
    assert "claim rl/shared-rollout is allocated on h100-03, reserved for actor-0" in f.evidence, f.evidence
    assert "  h100-03: nodeSelector pool=a100, node has pool=h100" in f.evidence


# --- layer 2: applications that find no usable GPU, in more frameworks' words -------------------------


@pytest.mark.parametrize(
    "line",
    [
        # PyTorch (NVIDIA/k8s-device-plugin issue 319, GoogleCloudPlatform/container-engine-accelerators 248).
        "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:82: UserWarning: CUDA initialization: CUDA "
        "unknown error - this may be due to an incorrectly set up environment, e.g. changing env variable "
        "CUDA_VISIBLE_DEVICES after program start. Setting the available devices to be zero.",
        # NGC images' banner (NVIDIA/nvidia-docker issues 1548, 1583).
        "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.",
        "ERROR: No supported GPU(s) detected to run this container",
        # JAX / XLA (jax-ml/jax issues 24866, 9859) and TensorFlow 2.14+.
        "jaxlib.xla_extension.XlaRuntimeError: FAILED_PRECONDITION: No visible GPU devices.",
        "I0923 21:58:25.539228 139973430083584 xla_bridge.py:513] Unable to initialize backend 'cuda': INTERNAL: no "
        "supported devices found for platform CUDA",
        "I tensorflow/tsl/cuda/cudart_stub.cc:28] Could not find cuda drivers on your machine, GPU will not be used.",
    ],
)
def test_more_frameworks_finding_no_gpu(line: str) -> None:
    assert sig.APP_SEES_NO_GPU.find(line) == [line]


@pytest.mark.parametrize(
    "line",
    [
        "AssertionError: Torch not compiled with CUDA enabled",  # the image, not the GPU
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",  # seen, misused
        "No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for more info.)",
    ],
)
def test_lines_that_are_not_a_missing_gpu(line: str) -> None:
    assert sig.APP_SEES_NO_GPU.find(line) == []


def test_sglang_kv_pool_is_gpu_memory() -> None:
    line = (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."  # sglang issue 4330
    )
    assert sig.gpu_oom_lines(line) == [line]
