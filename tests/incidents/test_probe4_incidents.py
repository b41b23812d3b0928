"""What the probe4 incidents (tests/incidents/probe4/, layers 2-4 and DRA) must say beyond their
`x-expect` (which tests/incidents/test_probe_incidents.py checks): the words a person acts on, the
nodes a walk examines, and the real-world lines each defect was found with, read by the unit that
reads them. Each defect's test failed before its fix; negative controls sit beside them (README.md
beside the incidents names the sources)."""

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


@pytest.mark.parametrize(
    "line",
    [
        # vLLM V1 (vllm/v1/worker/utils.py: `Free memory on device {init_snapshot.device_} (…)`) and the rank form.
        "ValueError: Free memory on device cuda:0 (10.55/79.19 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        "ValueError: Free memory on device 0(10.55/79.19 GiB) on startup is less than desired GPU memory utilization "
        "(0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ],
)
def test_vllm_startup_check_keeps_its_numbers_when_it_names_the_device(line: str) -> None:
    m = sig.VLLM_FREE_MEMORY.search(line)
    assert m is not None
    assert (m["free"], m["total"], m["util"], m["want"]) == ("10.55", "79.19", "0.9", "71.27")


def _bound_learner(tmp_path: Path, sharing: str | None) -> list[Finding]:
    """The shared-claim incident with the learner placed beside the actor on h100-03 (both reserved on
    the claim) and killed by CUDA out of memory: the walk of the learner, all of its findings."""
    stem = "probe4-dra-shared-claim-allocated-on-h100-learner-selects-a100-15-nodes"
    data = yaml.safe_load(_text(stem))
    for obj in data["objects"]:
        meta = obj["metadata"]
        if obj["kind"] == "Pod" and meta["name"] == "learner-0":
            obj["spec"]["nodeName"] = "h100-03"
            obj["spec"].pop("nodeSelector")
            obj["status"] = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}],
                             "containerStatuses": [{"name": "learner", "image": "nvcr.io/nvidia/pytorch:25.09-py3",
                                                    "ready": True, "restartCount": 3, "started": True,
                                                    "state": {"running": {"startedAt": "2026-11-30T08:50:00Z"}}}]}  # fmt: skip
        if obj["kind"] == "ResourceClaim" and meta["name"] == "shared-rollout":
            obj["status"]["reservedFor"].append({"name": "learner-0", "resource": "pods", "uid": "l-uid"})
            if sharing:
                obj["spec"]["devices"]["config"] = [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                    "sharing": {"strategy": sharing}}}}]  # fmt: skip
    data["objects"] = [
        o for o in data["objects"] if o["kind"] != "Event" or "learner-0" not in o["metadata"]["name"]
    ]
    data.setdefault("logs", {})["rl/learner-0/learner"] = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which 1.06 GiB is free.\n"
    )
    data["x-expect"] = {"target": "rl/learner-0", "walk": [1], "verdict": None, "codes": []}
    path = tmp_path / "shared.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    result, _ = bundled.diagnose(path, all_layers=True)
    return [f for layer in result.layers for f in layer.findings]


def test_a_dra_claim_shared_by_two_pods_is_time_sliced_memory(tmp_path: Path) -> None:
    found = _bound_learner(tmp_path, None)
    assert "L4_GPU_OOM_IN_LOGS" in [f.code for f in found]
    [f] = [f for f in found if f.code == "L4_TIME_SLICING"]
    assert "shared with 1 other pod(s)" in f.summary and "no memory isolation" in f.summary, f.summary
    assert "reserved for learner-0, actor-0" in f.evidence[0], f.evidence


def test_a_dra_claim_shared_through_mps_says_mps(tmp_path: Path) -> None:
    [f] = [f for f in _bound_learner(tmp_path, "MPS") if f.code == "L4_TIME_SLICING"]
    assert "through MPS" in f.summary and "sharing.strategy MPS" in f.evidence[0]


def test_a_dra_claim_of_one_pod_is_not_shared(tmp_path: Path) -> None:
    found = walked_findings(HERE / f"{XID48}.yaml", "L4_TIME_SLICING")
    assert not found


def test_a_validator_stage_the_runtime_refused_shows_the_refusal(tmp_path: Path) -> None:
    """OpenShift's validator in Init:CreateContainerError (gpu-operator issue 1598): the stage never logged,
    its status message is the evidence."""
    stem = "probe4-v24-3-plugin-image-pull-denied-new-a100-plugin-validation-22-nodes"
    hook = "container create failed: error executing hook `/usr/local/nvidia/toolkit/nvidia-container-runtime-hook` (exit code: 1)"
    data = yaml.safe_load(_text(stem))
    for obj in data["objects"]:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "nvidia-operator-validator-p9w4t":
            for st in obj["status"]["initContainerStatuses"]:
                if st["name"] == "plugin-validation":
                    st["state"] = {"waiting": {"reason": "CreateContainerError", "message": hook}}
                    st.pop("lastState", None)
    data["logs"] = {k: v for k, v in data["logs"].items() if "plugin-validation" not in k}
    path = tmp_path / "validator.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    [f] = walked_findings(path, "L2_VALIDATOR_STUCK")
    assert f"plugin-validation message: {hook}" in f.evidence, f.evidence
    assert not any("back-off" in e for e in f.evidence)


def test_a_kubelet_that_cannot_fetch_its_claim_is_an_api_version_skew(tmp_path: Path) -> None:
    """dra-driver-nvidia-gpu issue 766: a node's kubelet (1.33) asks for a resource.k8s.io version the
    1.34 API server does not serve; the kubelet, not the plugin, fails, before any container exists."""
    data = yaml.safe_load(_text(XID48))
    claim = ""
    for obj in data["objects"]:
        meta = obj["metadata"]
        if obj["kind"] == "Node" and meta["name"] == "h200-02":
            obj["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.1"
        if obj["kind"] == "ResourceClaim" and meta["name"].startswith("gemma-sft-0-"):
            claim = meta["name"]
        if obj["kind"] == "Pod" and meta["name"] == "gemma-sft-0":
            obj["status"]["phase"] = "Pending"
            st = obj["status"]["containerStatuses"][0]
            st.update(ready=False, started=False, state={"waiting": {"reason": "ContainerCreating"}})
    message = (
        f"Failed to prepare dynamic resources: failed to fetch ResourceClaim {claim} referenced by pod gemma-sft-0: "
        "the server could not find the requested resource"
    )
    data["objects"].append({
        "apiVersion": "v1", "kind": "Event", "type": "Warning", "reason": "FailedPrepareDynamicResources",
        "message": message, "count": 14, "metadata": {"name": "gemma-sft-0.fetch", "namespace": "llm"},
        "involvedObject": {"kind": "Pod", "name": "gemma-sft-0", "namespace": "llm"}, "source": {"component": "kubelet"},
        "firstTimestamp": "2026-11-30T11:40:00Z", "lastTimestamp": "2026-11-30T11:58:00Z",
    })  # fmt: skip
    path = tmp_path / "skew.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    [f] = walked_findings(path, "L2_CONTAINER_START_FAILED")
    assert f"cannot read claim llm/{claim}" in f.summary, f.summary
    assert (
        "kubelet v1.33.1, control plane v1.34.2" in f.summary and "plugin" not in f.summary.split(":")[1]
    ), f.summary


def test_driver_manager_blocked_by_gpu_workloads_is_no_host_driver(tmp_path: Path) -> None:
    """gpu-operator issues 304, 416 and 2166: during a driver upgrade k8s-driver-manager cannot unload the
    operator's own module while GPU pods hold it (`Could not unload NVIDIA driver kernel modules, driver is in
    use`, auto drain disabled) and crash-loops in Init. No driver is pre-installed on the host: setting
    driver.enabled=false would be wrong. The spec's answer: the upgrade failed (label), the manager is stuck."""
    from tests.incidents.probe2.build import _crashloop
    from tests.incidents.probe4.build import _bound_pod, _fleet, _operand

    f = _fleet(
        "probe4-x-driver-manager-in-use", "Built on the samples of gpu-operator issue 304 (control case)."
    )
    node = "a100-train-03"
    f.node(node)["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "upgrade-failed"
    drv = "nvidia-driver-daemonset-v8k2d"
    _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
             [("nvidia-driver-ctr", "nvcr.io/nvidia/driver:570.158.01-ubuntu22.04")],
             [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.6.10")],
             failing={"k8s-driver-manager": _crashloop("k8s-driver-manager", drv)}, restarts=9)  # fmt: skip
    f.logs[f"gpu-operator/{drv}/k8s-driver-manager#previous"] = (
        "Getting current value of the 'nvidia.com/gpu.deploy.operator-validator' node label\n"
        "Current value of 'nvidia.com/gpu.deploy.operator-validator=true'\n"
        "nvidia driver module is already loaded with refcount 350\n"
        "Shutting down all GPU clients on the current node by disabling their component-specific nodeSelector labels\n"
        f"node/{node} labeled\n"
        "Waiting for the operator-validator to shutdown\n"
        "Unloading NVIDIA driver kernel modules...\n"
        "nvidia              34086912  350 nvidia_uvm,nvidia_modeset\n"
        "Could not unload NVIDIA driver kernel modules, driver is in use\n"
        f"Auto drain of the node {node} is disabled\n"
        "Failed to uninstall nvidia driver components\n"
    )
    _bound_pod(f, "notebook-kim-0", "research", node, "nvcr.io/nvidia/pytorch:25.01-py3",
               {"state": {"running": {"startedAt": "2026-11-28T09:00:00Z"}}})  # fmt: skip
    path = f.write(tmp_path, {"target": "research/notebook-kim-0", "walk": [1, 2, 3, 4, 5],
                              "verdict": "L3_DRIVER_UPGRADE_FAILED", "codes": [], "absent": []})  # fmt: skip
    result, _ = bundled.diagnose(path)
    codes = bundled.found(result)
    assert "L3_PREINSTALLED_DRIVER_CONFLICT" not in codes, bundled.explain(result)
    assert {"L2_OPERAND_FAILING", "L3_DRIVER_UPGRADE_FAILED", "L3_UNKNOWN"} <= set(codes), bundled.explain(
        result
    )
    [stuck] = [f for layer in result.layers for f in layer.findings if f.code == "L3_UNKNOWN"]
    assert "k8s-driver-manager" in stuck.summary and "free the GPUs" in stuck.summary
    assert any("driver is in use" in e for e in stuck.evidence), stuck.evidence


def test_a_dra_node_without_validator_is_not_called_a_standalone_device_plugin() -> None:
    [ok] = walked_findings(HERE / f"{XID48}.yaml", "L2_OK")
    assert "DRA driver's kubelet plugin" in ok.summary and "standalone device plugin" not in ok.summary, (
        ok.summary
    )


def test_no_devices_names_the_nodes_kubelet_plugin_and_its_state() -> None:
    waiting = one(
        "probe4-dra-new-h200-driver-kernel-unresolved-kubelet-plugin-init-17-nodes", "L1_DRA_NO_DEVICES"
    )
    assert any("kubelet plugin nvidia-dra-driver-gpu/" in e and "Init:0/1" in e for e in waiting.evidence), (
        waiting
    )
    empty = one(EMPTY, "L1_DRA_NO_DEVICES")
    assert any(e.endswith(": Ready") and "kubelet plugin" in e for e in empty.evidence), empty.evidence


def test_driver_too_old_on_dra_reads_the_published_driver_and_cuda(tmp_path: Path) -> None:
    """A GPUCluster runs no GFD: the node's CUDA is the DRA driver's `cudaDriverVersion` attribute."""
    data = yaml.safe_load(_text(XID48))
    refusal = _REFUSAL.replace("cuda>=12.2", "cuda>=13.1")
    for obj in data["objects"]:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == "gemma-sft-0":
            obj["status"]["containerStatuses"][0].update(
                ready=False, started=False, state={"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}},
                lastState={"terminated": {"exitCode": 128, "reason": "StartError", "message": refusal}},
            )  # fmt: skip
    path = tmp_path / "dra-cuda.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    [f] = walked_findings(path, "L3_DRIVER_TOO_OLD")
    assert "(580.95.5) supports CUDA 13.0.0" in f.summary and "unknown" not in f.summary, f.summary
    assert "driverVersion 580.95.5, cudaDriverVersion 13.0.0 (DRA ResourceSlice)" in f.evidence[1], f.evidence
    assert "no GPU node of the fleet" in f.evidence[2], f.evidence


_REFUSAL = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error running prestart hook #0: exit status 1, "
    "stdout: , stderr: Auto-detected mode as 'legacy'\nnvidia-container-cli: requirement error: unsatisfied condition: "
    "cuda>=12.2, please update your driver to a newer version, or use an earlier cuda container: unknown"
)
