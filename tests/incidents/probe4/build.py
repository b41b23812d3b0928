"""The layer 2-4 and DRA probe incidents, written out as YAML: `python -m tests.incidents.probe4.build`.

Each recipe is a production-shaped fleet (17-27 nodes, several pools, sick nodes the target could
never use, GPU Operator releases from v23.6 to v25.10) around one real-world variant nobody had
fed gpubot yet: the toolkit's `driver/library version mismatch`, GFD's pre-v0.15 label names, a
driver image tag missing for a new OS, TensorRT-LLM's and NCCL's own out-of-memory words, an init
container OOMKilled; on DRA fleets, claims whose selectors only some pools satisfy beside tainted
pools they exclude, a DeviceClass the driver never created, an empty ResourceSlice, an Xid the
kubelet plugin saw but could not publish, v1beta1 objects. Expectations come from
spec/findings.md, written before gpubot ran on them (README.md beside this file names sources).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents import drafleet
from tests.incidents.drafleet import DraFleet, suffix, uid
from tests.incidents.fleets import NS, Fleet, Recipe, mixed_pools, noise_in_viz_and_infer, write_recipes
from tests.incidents.probe2.build import _bound_pod, _operand, _validator

HERE = Path(__file__).resolve().parent
Expect = dict[str, Any]


def _fleet(
    name: str, description: str, *, a100: int = 6, h100: int = 8, l40s: int = 5, cpu: int = 3
) -> Fleet:
    """Three pools beside CPU nodes, with the noise (a lost GPU, rising rows, an unregistered plugin)
    in the L40S and H100 pools; targets pick their node so the noise is never theirs."""
    f = mixed_pools(name, description, a100=a100, h100=h100, l40s=l40s, cpu=cpu)
    noise_in_viz_and_infer(f)
    return f


def _start_error(message: str) -> dict[str, Any]:
    """A container the runtime refused, restarted by the kubelet: CrashLoopBackOff now, StartError
    (exit 128) last, as `kubectl get pod -o yaml` shows it."""
    return {"state": {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": "back-off 5m0s restarting failed container=main"}},
            "lastState": {"terminated": {"exitCode": 128, "reason": "StartError", "message": message,
                                         "startedAt": "1970-01-01T00:00:00Z",
                                         "finishedAt": "2026-11-29T10:09:58Z"}}}  # fmt: skip


def _containerd_refusal(cli_line: str) -> str:
    """containerd 1.7's wrapping of the hook's stderr (NVIDIA/k8s-device-plugin issue 1431)."""
    return (
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create "
        "failed: unable to start container process: error during container init: error running prestart hook #0: "
        f"exit status 1, stdout: , stderr: Auto-detected mode as 'legacy'\n{cli_line}: unknown"
    )


# --- layer 2 -------------------------------------------------------------------------------------


def driver_library_mismatch() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-driver-library-mismatch-host-driver-upgraded-h100-23-nodes",
        "Built on the samples of NVIDIA/k8s-device-plugin issue 1431 and nvidia-container-toolkit issue 394: the host driver of "
        "h100-infer-03 (pre-installed, operator v24.9.2 with driver.enabled=false) was upgraded by unattended-upgrades "
        "without a reboot, so the loaded kernel module and the new libnvidia-ml differ; every new container on the "
        "node is refused with `nvidia-container-cli: initialization error: nvml error: driver/library version "
        "mismatch`. Elsewhere: a lost GPU, rising rows, an unregistered plugin.",
    )  # fmt: skip
    node = "h100-infer-03"
    f.node(node)["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] = "pre-installed"
    f.gpu_series(node, "h100", 8, fb_used=0.0)
    message = _containerd_refusal(
        "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch"
    )
    pod = _bound_pod(
        f, "embed-rerank-0", "search", node, "nvcr.io/nvidia/tritonserver:24.12-py3", _start_error(message)
    )
    f.event_for_pod(pod, "Failed", f"Error: {message}")
    return f, {
        "target": "search/embed-rerank-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_CONTAINER_START_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED"],
        "absent": ["L2_APP_SEES_NO_GPU", "L3_DRIVER_BUILD_FAILED", "L3_PREINSTALLED_DRIVER_CONFLICT", "L5_XID",
                   "L5_DEVICE_UNHEALTHY"],
    }  # fmt: skip


def plugin_image_pull_new_node() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-v24-3-plugin-image-pull-denied-new-a100-plugin-validation-22-nodes",
        "Built on the samples of the validator's plugin-validation loop (gpu-operator validator main.go: `GPU resources are not yet "
        "discovered by the node`) and the kubelet's ErrImagePull text: a new A100 node joined a GPU Operator v24.3.0 "
        "fleet whose device plugin image sits in a private mirror; the node's pull secret is missing, so the plugin "
        "never registers and the 8-GPU fine-tuning job finds the other A100s full.",
        a100=6, h100=7, l40s=5,
    )  # fmt: skip
    node = "a100-train-06"
    n = f.node(node)
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu")
    for i in range(1, 6):
        f.running_pod(f"pretrain-shard-{i}", "research", f"a100-train-{i:02d}", 8)
    image = "registry.corp.example/nvidia/k8s-device-plugin:v0.15.0-ubi8"
    plugin = next(o for o in f.objects if o["kind"] == "Pod" and o["spec"].get("nodeName") == node
                  and o["metadata"]["labels"].get("app") == "nvidia-device-plugin-daemonset")  # fmt: skip
    f.objects.remove(plugin)
    f.logs.pop(f"{NS}/{plugin['metadata']['name']}/nvidia-device-plugin")
    pull = f'Back-off pulling image "{image}"'
    _operand(f, plugin["metadata"]["name"], node, {"app": "nvidia-device-plugin-daemonset"},
             [("nvidia-device-plugin", image)],
             [("toolkit-validation", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.3.0")],
             failing={"nvidia-device-plugin": {"waiting": {"reason": "ImagePullBackOff", "message": pull}}}, restarts=0)  # fmt: skip
    name = _validator(f, node, "v24.3.0", "plugin-validation", "p9w4t")
    f.logs[f"{NS}/{name}/plugin-validation#previous"] = "".join(
        f'time="2026-11-29T10:0{i // 6}:{(i % 6) * 10:02d}Z" level=info msg="GPU resources are not yet discovered by '
        f'the node, retry: {i}"\n'
        for i in range(25, 31)
    ) + 'time="2026-11-29T10:05:00Z" level=info msg="GPU resources are not discovered by the node"\n'  # fmt: skip
    f.pending_pod(
        "llm-finetune-0", "research",
        "0/22 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "16 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu. preemption: 0/22 nodes "
        "are available: 5 No preemption victims found for incoming pod, 17 Preemption is not helpful for scheduling.",
        gpus=8, selector={"pool": "train"},
    )  # fmt: skip
    return f, {
        "target": "research/llm-finetune-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_VALIDATOR_STUCK",
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L2_VALIDATOR_STUCK", "L2_OPERAND_FAILING"],
        "absent": ["L2_WAITING_FOR_DRIVER", "L2_DEVICE_PLUGIN_NVML_FAILED", "L3_DRIVER_BUILD_FAILED", "L5_XID",
                   "L5_DEVICE_UNHEALTHY", "L5_REMAPPED_ROWS_RISING"],
    }  # fmt: skip


# --- layer 3 -------------------------------------------------------------------------------------


_OLD_GFD = ("nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.runtime-version.full")


def _gfd_v0_8_labels(node: dict[str, Any], driver: str, cuda: str) -> None:
    """GFD before v0.15 (GPU Operator v23.x): only the split, now deprecated, cuda.driver.* / cuda.runtime.*."""
    lab = node["metadata"]["labels"]
    for key in _OLD_GFD:
        lab.pop(key, None)
    major, minor, rev = driver.split(".")
    cmajor, cminor = cuda.split(".")
    lab.update({"nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor,
                "nvidia.com/cuda.driver.rev": rev, "nvidia.com/cuda.runtime.major": cmajor,
                "nvidia.com/cuda.runtime.minor": cminor, "nvidia.com/gfd.timestamp": "1732612903"})  # fmt: skip


def old_gfd_labels_cuda_requirement() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-v23-6-old-gfd-labels-cuda-12-2-required-a100-on-525-24-nodes",
        "Built on the samples of libnvidia-container's requirement check (`requirement error: unsatisfied condition: cuda>=12.2, "
        "please update your driver to a newer version, or use an earlier cuda container`) and GFD v0.8's label "
        "catalog: a GPU Operator v23.6.1 fleet labels nodes with the deprecated `nvidia.com/cuda.driver.major/minor/"
        "rev` and `nvidia.com/cuda.runtime.major/minor` only. a100-train-04 missed the driver roll-out and still runs "
        "525.105.17 (CUDA 12.0); a CUDA 12.2 image is refused there.",
        a100=7, h100=8, l40s=5, cpu=3,
    )  # fmt: skip
    for obj in f.objects:
        if obj["kind"] == "Node" and "nvidia.com/gpu.count" in obj["metadata"]["labels"]:
            old = obj["metadata"]["name"] == "a100-train-04"
            _gfd_v0_8_labels(obj, "525.105.17" if old else "535.129.03", "12.0" if old else "12.2")
    node = "a100-train-04"
    message = _containerd_refusal(
        "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.2, please update your driver to a "
        "newer version, or use an earlier cuda container"
    )
    pod = _bound_pod(
        f, "protein-fold-0", "bio", node, "nvcr.io/nvidia/pytorch:23.10-py3", _start_error(message), gpus=4
    )
    f.event_for_pod(pod, "Failed", f"Error: {message}")
    return f, {
        "target": "bio/protein-fold-0",
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_TOO_OLD",
        "codes": [
            "L1_POD_SCHEDULED",
            "L2_CONTAINER_START_FAILED",
            "L3_DRIVER_TOO_OLD",
            "L3_DRIVER_VERSION_SKEW",
        ],
        "absent": ["L2_APP_SEES_NO_GPU", "L3_DRIVER_BUILD_FAILED", "L3_KERNEL_SKEW"],
    }


def driver_image_tag_missing_new_os() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-v24-9-driver-image-ubuntu24-04-tag-missing-os-skew-a100-21-nodes",
        "Built on the samples of gpu-operator issues about driver images per OS (`nvcr.io/nvidia/driver:<version>-<os>` resolved "
        "from the node's NFD os-release labels) and containerd's ErrImagePull text: a100-train-03 was rebuilt on Ubuntu "
        "24.04 (kernel 6.8), the operator v24.9.2 asks for `driver:535.216.01-ubuntu24.04`, which the registry does "
        "not have; the driver pod sits in ErrImagePull, the toolkit and device plugin in Init, the node advertises no "
        "GPU and the other A100s are full. Nothing was built.",
        a100=5, h100=6, l40s=6, cpu=3,
    )  # fmt: skip
    node = "a100-train-03"
    n = f.node(node)
    n["status"]["nodeInfo"].update({"kernelVersion": "6.8.0-48-generic", "osImage": "Ubuntu 24.04.1 LTS"})
    n["metadata"]["labels"].update({"feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
                                    "feature.node.kubernetes.io/kernel-version.full": "6.8.0-48-generic"})  # fmt: skip
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu")
    image = "nvcr.io/nvidia/driver:535.216.01-ubuntu24.04"
    pull = (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": failed to resolve reference '
        f'"{image}": {image}: not found'
    )
    drv = "nvidia-driver-daemonset-w7k4x"
    _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver",
                            "app.kubernetes.io/part-of": "gpu-operator"},
             [("nvidia-driver-ctr", image)],
             [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.7.0")],
             failing={"nvidia-driver-ctr": {"waiting": {"reason": "ErrImagePull", "message": pull}}}, restarts=0)  # fmt: skip
    val = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.2"
    tk = "nvidia-container-toolkit-daemonset-m2q8r"
    waiting = {"running": {"startedAt": "2026-11-29T09:31:10Z"}}
    _operand(f, tk, node, {"app": "nvidia-container-toolkit-daemonset"},
             [("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.17.4-ubuntu20.04")],
             [("driver-validation", val)], failing={"driver-validation": waiting}, restarts=0)  # fmt: skip
    f.logs[f"{NS}/{tk}/driver-validation"] = (
        'time="2026-11-29T10:11:40Z" level=info msg="Attempting to validate a pre-installed driver on the host"\n'
        'time="2026-11-29T10:11:40Z" level=info msg="No pre-installed driver detected on the host: chroot: failed to '
        "run command 'nvidia-smi': No such file or directory\"\n"
        'time="2026-11-29T10:11:40Z" level=info msg="failed to validate the driver, retrying after 5 seconds"\n'
    )
    # The device plugin of the node waits in toolkit-validation behind the driver.
    dp = next(o for o in f.objects if o["kind"] == "Pod" and o["spec"].get("nodeName") == node
              and o["metadata"]["labels"].get("app") == "nvidia-device-plugin-daemonset")  # fmt: skip
    f.objects.remove(dp)
    f.logs.pop(f"{NS}/{dp['metadata']['name']}/nvidia-device-plugin")
    _operand(f, dp["metadata"]["name"], node, {"app": "nvidia-device-plugin-daemonset"},
             [("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")],
             [("toolkit-validation", val)], failing={"toolkit-validation": waiting}, restarts=0)  # fmt: skip
    f.logs[f"{NS}/{dp['metadata']['name']}/toolkit-validation"] = (
        "waiting for nvidia container stack to be setup\n" * 3
    )
    for i in (1, 2, 4, 5):
        f.running_pod(f"pretrain-shard-{i}", "research", f"a100-train-{i:02d}", 8)
    f.pending_pod(
        "isaac-lab-train-0", "robotics",
        "0/21 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "15 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu. preemption: 0/21 nodes "
        "are available: 4 No preemption victims found for incoming pod, 17 Preemption is not helpful for scheduling.",
        gpus=4, selector={"pool": "train"},
    )  # fmt: skip
    return f, {
        "target": "robotics/isaac-lab-train-0",
        # Issue 30: no image for the node's OS is layer 3's L3_DRIVER_IMAGE_UNAVAILABLE (it stops the walk).
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_IMAGE_UNAVAILABLE",
        "codes": [
            "L1_GPU_NODE_NOT_ADVERTISING",
            "L2_WAITING_FOR_DRIVER",
            "L2_OPERAND_FAILING",
            "L3_DRIVER_IMAGE_UNAVAILABLE",
            "L3_KERNEL_SKEW",
        ],
        "absent": ["L3_DRIVER_BUILD_FAILED", "L3_PREINSTALLED_DRIVER_CONFLICT", "L5_XID"],
    }


# --- layer 4 -------------------------------------------------------------------------------------


def _crashed_pod(f: Fleet, name: str, ns: str, node: str, image: str, gpus: int, exit_code: int = 1) -> None:
    _bound_pod(f, name, ns, node, image,
               {"state": {"waiting": {"reason": "CrashLoopBackOff",
                                      "message": f"back-off 5m0s restarting failed container=main pod={name}"}},
                "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error",
                                             "startedAt": "2026-11-29T10:02:00Z",
                                             "finishedAt": "2026-11-29T10:06:40Z"}}}, gpus=gpus)  # fmt: skip


def trtllm_cuda_malloc_async_oom() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-trtllm-cudamallocasync-oom-triton-h100-23-nodes",
        "Built on the samples of triton-inference-server/tensorrtllm_backend issues 195 and 281 and TensorRT-LLM issue 1556: a "
        "Triton server with the TensorRT-LLM backend crash-loops on h100-infer-02 because the engine was built for a "
        "larger batch than its GPUs hold: `[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, "
        "mCudaStream->get()): out of memory`. The framebuffer reads 4 % between restarts.",
    )  # fmt: skip
    node = "h100-infer-02"
    f.gpu_series(node, "h100", 8, fb_used=3262.0)
    _crashed_pod(
        f, "triton-llama3-70b-0", "serving", node, "nvcr.io/nvidia/tritonserver:24.10-trtllm-python-py3", 8
    )
    f.logs["serving/triton-llama3-70b-0/main#previous"] = (
        "I1129 10:05:12.731874 1 server.cc:674]\n"
        "+--------------+---------+--------------------------------------------------------------------------+\n"
        "| Model        | Version | Status                                                                   |\n"
        "+--------------+---------+--------------------------------------------------------------------------+\n"
        "| tensorrt_llm | 1       | UNAVAILABLE: Internal: unexpected error when creating modelInstanceState: |\n"
        "E1129 10:05:12.731902 1 model_lifecycle.cc:654] failed to load 'tensorrt_llm' version 1: Internal: "
        "unexpected error when creating modelInstanceState: [TensorRT-LLM][ERROR] CUDA runtime error in "
        "::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory (/app/tensorrt_llm/cpp/tensorrt_llm/runtime/"
        "tllmBuffers.h:112)\n"
        "1       0x7f387e888d85 /opt/tritonserver/backends/tensorrtllm/libtriton_tensorrtllm.so(+0x35d85) [0x7f387e888d85]\n"
        "error: creating server: Internal - failed to load all models\n"
    )
    return f, {
        "target": "serving/triton-llama3-70b-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L4_GPU_OOM_IN_LOGS",
        "codes": ["L1_POD_SCHEDULED", "L4_GPU_OOM_IN_LOGS"],
        "absent": ["L4_OOMKILLED", "L4_FB_SATURATED", "L2_APP_SEES_NO_GPU", "L5_XID"],
    }


def nccl_cuda_failure_oom() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-nccl-cuda-failure-out-of-memory-ddp-a100-23-nodes",
        "Built on the samples of NVIDIA/nccl issue 1235, pytorch issue 152302 and rwth-i6/returnn issue 1626: an 8-rank DDP job on "
        "a100-train-05 dies when NCCL cannot allocate its buffers: `include/alloc.h:178 NCCL WARN Cuda failure 'out "
        "of memory'`, `Failed to CUDA calloc 6291456 bytes`, then torch's DistBackendError `unhandled cuda error`. "
        "No `CUDA out of memory` line from PyTorch itself; the framebuffer reads 61 % after the crash.",
    )  # fmt: skip
    node = "a100-train-05"
    f.gpu_series(node, "a100", 8, fb_used=49971.0)
    _crashed_pod(f, "ddp-vit-g-0", "vision", node, "nvcr.io/nvidia/pytorch:25.03-py3", 8)
    f.logs["vision/ddp-vit-g-0/main#previous"] = (
        "a100-train-05:2211:2398 [3] NCCL INFO Channel 00/0 : 3[3] -> 4[4] via P2P/CUMEM/read\n"
        "\n"
        "a100-train-05:2211:2398 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n"
        "a100-train-05:2211:2398 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes\n"
        "a100-train-05:2211:2398 [3] NCCL INFO transport/p2p.cc:204 -> 1\n"
        "[rank3]: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
        "NCCLUtils.hpp:328, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.25.1\n"
        "[rank3]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank3]: Last error:\n"
        "[rank3]: Cuda failure 'out of memory'\n"
        "E1129 10:06:39.114000 1 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
        "local_rank: 3 (pid: 2211) of binary: /usr/bin/python\n"
    )
    return f, {
        "target": "vision/ddp-vit-g-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L4_GPU_OOM_IN_LOGS",
        "codes": ["L1_POD_SCHEDULED", "L4_GPU_OOM_IN_LOGS"],
        "absent": ["L4_OOMKILLED", "L4_FB_SATURATED", "L2_APP_SEES_NO_GPU", "L5_XID"],
    }


def init_container_oomkilled() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe4-init-container-oomkilled-shard-fetch-l40s-21-nodes",
        "Built on the samples of kubernetes' OOMKilled statuses (exit 137, `Init:OOMKilled` / `Init:CrashLoopBackOff` in kubectl): "
        "a rendering job's init container `fetch-shards` unpacks a 40 GB scene archive in memory under a 4Gi limit and "
        "is OOMKilled over and over; the GPU container never starts. System memory, not the GPU's.",
        a100=5, h100=6, l40s=6,
    )  # fmt: skip
    node = "l40s-viz-05"
    f.gpu_series(node, "l40s", 4, fb_used=0.0)
    name, ns = "usd-render-0", "viz"
    pod = _bound_pod(f, name, ns, node, "nvcr.io/nvidia/omniverse/kit:106.2",
                     {"state": {"waiting": {"reason": "PodInitializing"}}}, gpus=1)  # fmt: skip
    pod["status"]["phase"] = "Pending"
    pod["spec"]["initContainers"] = [
        {
            "name": "fetch-shards",
            "image": "amazon/aws-cli:2.22.4",
            "resources": {"limits": {"memory": "4Gi"}, "requests": {"memory": "4Gi"}},
        }
    ]
    pod["status"]["initContainerStatuses"] = [{
        "name": "fetch-shards", "image": "amazon/aws-cli:2.22.4", "ready": False, "restartCount": 7, "started": False,
        "state": {"waiting": {"reason": "CrashLoopBackOff",
                              "message": f"back-off 5m0s restarting failed container=fetch-shards pod={name}"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-11-29T10:03:10Z",
                                     "finishedAt": "2026-11-29T10:04:52Z"}},
    }]  # fmt: skip
    f.logs[f"{ns}/{name}/fetch-shards#previous"] = (
        "download: s3://render-assets/city-block/scene.usdz.tar to ../scratch/scene.usdz.tar\n"
        "Extracting scene.usdz.tar (40.2 GiB) ...\n"
    )
    return f, {
        "target": f"{ns}/{name}",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L4_OOMKILLED",
        "codes": ["L1_POD_SCHEDULED", "L4_OOMKILLED"],
        "absent": ["L4_GPU_OOM_IN_LOGS", "L4_FB_SATURATED", "L2_CONTAINER_START_FAILED", "L5_XID"],
    }


# --- DRA -----------------------------------------------------------------------------------------

XID79 = [
    {"effect": "NoExecute", "key": "gpu.nvidia.com/xid", "value": "79", "timeAdded": "2026-11-30T07:02:44Z"}
]
GPU_LOST = [{"effect": "NoSchedule", "key": "gpu.nvidia.com/gpu-lost", "timeAdded": "2026-11-30T06:41:12Z"}]
_SCHED = (
    "0/{n} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, {rest}. "
    "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
)


def _sick_pools(f: DraFleet, pools: dict[str, int], gpus: dict[str, int]) -> None:
    """GPU pools whose even nodes are sick in the ways a large DRA fleet is: a GPU lost, an Xid 79
    taint, a crash-looping driver pod; each healthy node serves a model on two GPUs."""
    sick = iter(["lost", "xid79", "driver", "lost", "xid79"])
    for pool, count in pools.items():
        for i in range(1, count + 1):
            node = f"{pool}-{i:02d}"
            kind = next(sick, None) if i % 2 == 0 else None
            if kind == "lost":
                f.gpu_node(node, pool, gpus[pool], taints={3: GPU_LOST})
            elif kind == "xid79":
                f.gpu_node(node, pool, gpus[pool], taints={1: XID79})
            elif kind == "driver":
                f.gpu_node(node, pool, gpus[pool], driver_state="CrashLoopBackOff")
            else:
                f.gpu_node(node, pool, gpus[pool])
                f.workload("inference", f"llama-serve-{pool}-{i}", node, ["gpu-0", "gpu-1"], container="vllm",
                           image="vllm/vllm-openai:v0.11.0")  # fmt: skip
            if kind:
                f.noise.append(node)


def dra_h100_exhausted_tainted_a100() -> None:
    f = DraFleet(
        "probe4-dra-h100-claims-exhausted-tainted-a100-noise-19-nodes",
        "Built on the samples of the scheduler's DynamicResources messages (`cannot allocate all claims`) and the DRA driver's "
        "deviceinfo.go attributes: a pretraining pod asks, with no node selector, for 4 GPUs whose productName is "
        '"NVIDIA H100 80GB HBM3" and whose memory is at least 40Gi (double-quoted CEL with compareTo). The four H100 '
        "nodes are full (other claims hold all 32 GPUs). A100 and L40S nodes carry a lost GPU and an Xid 79 taint: "
        "their devices can never satisfy the selector, so they are noise, not this pod's answer.",
        now="2026-11-30T09:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 8, "l40s": 6}, {"a100": 8, "l40s": 4})
    for i in range(1, 5):
        node = f"h100-{i:02d}"
        f.gpu_node(node, "h100")
        f.workload("research", f"moe-train-{i}", node, [f"gpu-{g}" for g in range(8)])
    selector = (
        'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3" && '
        'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
    )
    f.pending("research", "llama-pretrain-0", template="h100-x4", selector=selector, count=4, node_selector={},
              scheduler=_SCHED.format(n=19, rest="18 cannot allocate all claims"), created="2026-11-30T08:20:00Z")  # fmt: skip
    _drop_empty_selector(f, "llama-pretrain-0")
    f.write(HERE, {
        "target": "research/llama-pretrain-0", "walk": [1], "verdict": "L1_DRA_CLAIM_PENDING",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_DEVICES_EXHAUSTED"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L1_DRA_SELECTOR_UNSATISFIED", "L1_DRA_NO_DEVICES", "L5_XID",
                   "L5_DEVICE_UNHEALTHY", "L2_OPERAND_FAILING"],
    })  # fmt: skip


def _drop_empty_selector(f: DraFleet, pod: str) -> None:
    for obj in f.objects:
        if obj["kind"] == "Pod" and obj["metadata"]["name"] == pod and not obj["spec"].get("nodeSelector"):
            obj["spec"].pop("nodeSelector", None)


def dra_mig_class_missing() -> None:
    f = DraFleet(
        "probe4-dra-mig-deviceclass-missing-gpu-only-install-18-nodes",
        "Built on the samples of the scheduler's DynamicResources PreFilter (`request gpus: device class mig.nvidia.com does not "
        "exist`): the DRA driver was installed with only whole-GPU support, so the `mig.nvidia.com` DeviceClass was "
        "never created; a notebook's claim asks for a 1g.10gb MIG device on the A100 pool. The H100 and L40S pools "
        "carry a lost GPU, an Xid 79 taint and a crash-looping driver pod.",
        now="2026-11-30T10:00:00Z",
    )
    f.objects = [
        o for o in f.objects if not (o["kind"] == "DeviceClass" and o["metadata"]["name"] == "mig.nvidia.com")
    ]
    f.control_plane()
    _sick_pools(f, {"h100": 6, "l40s": 6}, {"h100": 8, "l40s": 4})
    for i in range(1, 6):
        f.gpu_node(f"a100-{i:02d}", "a100")
    pod = "notebook-ana-0"
    f.pending("datasci", pod, template="mig-1g", selector='device.attributes["gpu.nvidia.com"].profile == "1g.10gb"',
              count=1, node_selector={"pool": "a100"},
              scheduler="0/18 nodes are available: request gpus: device class mig.nvidia.com does not exist. preemption: "
              "0/18 nodes are available: 18 Preemption is not helpful for scheduling.", created="2026-11-30T09:40:00Z")  # fmt: skip
    for obj in f.objects:
        if obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate") and obj["metadata"]["name"].startswith(
            ("mig-1g", pod)
        ):
            spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
            spec["devices"]["requests"][0]["exactly"]["deviceClassName"] = "mig.nvidia.com"
    f.write(HERE, {
        "target": f"datasci/{pod}", "walk": [1, 2, 3, 4, 5], "verdict": "L1_DRA_DEVICECLASS_MISSING",
        # The selector is not the fault: the class is missing. No node is examined, and layer 2 says so.
        "codes": ["L1_DRA_CLAIM_PENDING", "L1_DRA_DEVICECLASS_MISSING", "L2_UNKNOWN"],
        "absent": ["L1_DRA_SELECTOR_UNSATISFIED", "L1_DRA_DEVICE_TAINTED", "L1_DRA_NO_DEVICES", "L1_NO_GPU_ADVERTISED",
                   "L2_OPERAND_FAILING", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


def dra_gke_empty_slice() -> None:
    f = DraFleet(
        "probe4-dra-gke-empty-resourceslice-a100-pool-16-nodes",
        "Built on the samples of kubernetes-sigs/dra-driver-nvidia-gpu issue 1008 (ResourceSlice published with no devices on GKE): "
        "on GKE the kubelet plugin of gke-a100-pool-03 runs and is Ready, but it was installed with the default "
        "driver root instead of /home/kubernetes/bin/nvidia, enumerates no GPU and publishes a slice with zero "
        "devices; the A100 pool's two other nodes are full. Elsewhere: a lost GPU, an Xid 79 taint, a driver pod "
        "crash-looping.",
        now="2026-11-30T11:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"h100": 6, "l40s": 6}, {"h100": 8, "l40s": 4})
    for i in range(1, 4):
        node = f"gke-a100-pool-{i:02d}"
        f.gpu_node(node, "a100", publishes=i != 3)
        if i != 3:
            f.workload("research", f"sft-run-{i}", node, [f"gpu-{g}" for g in range(8)])
    for obj in f.objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"].startswith("gke-a100-pool-"):
            obj["metadata"]["labels"].update({"pool": "gke-a100", "cloud.google.com/gke-nodepool": "a100-pool",
                                              "cloud.google.com/gke-accelerator": "nvidia-a100-80gb"})  # fmt: skip
    node = "gke-a100-pool-03"
    name = f"{node}-{drafleet.DRIVER}-{suffix(node, 'rs')}"
    f.objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                      "metadata": {"name": name, "uid": uid(None, name), "generateName": f"{node}-{drafleet.DRIVER}-",
                                   "creationTimestamp": "2026-11-30T10:12:40Z", "generation": 1,
                                   "ownerReferences": [{"apiVersion": "v1", "controller": True, "kind": "Node",
                                                        "name": node, "uid": uid(None, node)}]},
                      "spec": {"driver": drafleet.DRIVER, "nodeName": node,
                               "pool": {"generation": 1, "name": node, "resourceSliceCount": 1}, "devices": []}})  # fmt: skip
    f.log(node, "gpus", (
        'I1130 10:12:38.874110       1 main.go:241] "Starting DRA kubelet plugin" driver="gpu.nvidia.com"\n'
        "I1130 10:12:38.874312       1 utils.go:43] containerDriverRoot: /driver-root, hostDriverRoot: /\n"
        "I1130 10:12:39.102245       1 nvlib.go:112] No NVIDIA devices found on the node\n"
        'I1130 10:12:40.211803       1 resourceslicecontroller.go:619] "Starting ResourceSlice informer and waiting '
        'for it to sync"\n'
    ))  # fmt: skip
    f.pending("research", "sft-run-4", template="a100-x8", selector="device.attributes['gpu.nvidia.com'].type == 'gpu'",
              count=8, node_selector={"cloud.google.com/gke-nodepool": "a100-pool"},
              scheduler=_SCHED.format(n=16, rest="12 node(s) didn't match Pod's node affinity/selector, 3 cannot "
                                      "allocate all claims"), created="2026-11-30T10:30:00Z")  # fmt: skip
    f.write(HERE, {
        "target": "research/sft-run-4", "walk": [1, 2, 3, 4, 5], "verdict": "L1_DRA_NO_DEVICES",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_NO_DEVICES"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L1_NO_GPU_ADVERTISED", "L2_OPERAND_FAILING", "L5_XID",
                   "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


def dra_xid_seen_not_published() -> None:
    f = DraFleet(
        "probe4-dra-xid48-health-event-republish-failed-h200-17-nodes",
        "Built on the samples of the DRA driver's device health monitor (device_health.go `Sending XID=%d health event for device "
        "%s`, driver.go `Received %s health event`, `Republishing ResourceSlice: …`, `Failed to publish resources "
        "after taint update`): the kubelet plugin on h200-02 saw Xid 48 (double-bit ECC) on the GPU of a running "
        "training pod, but the API server timed out the republish, so the ResourceSlice still shows the GPU "
        "untainted. Elsewhere: a lost GPU, an Xid 79 taint, a driver pod crash-looping.",
        now="2026-11-30T12:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 6}, {"a100": 8, "l40s": 4})
    for i in range(1, 5):
        f.gpu_node(f"h200-{i:02d}", "h200")
    node, pod = "h200-02", "gemma-sft-0"
    f.workload("llm", pod, node, ["gpu-5"], created="2026-11-30T08:00:00Z")
    bad = drafleet.gpu_uuid(node, 5)
    f.log(node, "gpus", (
        'I1130 08:00:04.218811       1 driver.go:164] "Returning newly prepared devices for claim" '
        f'claim="llm/{pod}-gpus-{suffix("llm", pod, "rc")}"\n'
        "I1130 11:41:07.553120       1 device_health.go:248] Processing event XID=48 event\n"
        f"I1130 11:41:07.553302       1 device_health.go:264] Sending XID=48 health event for device {bad}\n"
        f"W1130 11:41:07.553388       1 driver.go:513] Received xid health event for device {bad}\n"
        'I1130 11:41:07.553501       1 driver.go:546] Republishing ResourceSlice: 1 device(s) tainted with '
        'gpu.nvidia.com/xid="48" (effect=NoSchedule)\n'
        "E1130 11:41:17.554911       1 driver.go:564] Failed to publish resources after taint update: update "
        "ResourceSlice: etcdserver: request timed out\n"
    ))  # fmt: skip
    f.write(HERE, {
        "target": f"llm/{pod}", "walk": [1, 2, 3, 4, 5], "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L2_OPERAND_FAILING"],
    })  # fmt: skip


def _to_v1beta1(obj: dict[str, Any]) -> dict[str, Any]:
    """A resource.k8s.io/v1 object as a 1.32 API server (v1beta1) serves it: slices wrap each
    device in `basic`, requests carry the class, mode and selectors without `exactly`."""
    if not obj.get("apiVersion", "").startswith("resource.k8s.io/"):
        return obj
    obj["apiVersion"] = "resource.k8s.io/v1beta1"
    if obj["kind"] == "ResourceSlice":
        obj["spec"]["devices"] = [
            {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}}
            for d in obj["spec"]["devices"]
        ]
    elif obj["kind"] in ("ResourceClaim", "ResourceClaimTemplate"):
        spec = obj["spec"]["spec"] if obj["kind"] == "ResourceClaimTemplate" else obj["spec"]
        for req in spec["devices"]["requests"]:
            req.update(req.pop("exactly", {}))
    elif obj["kind"] == "DeviceClass":
        obj["spec"].pop("extendedResourceName", None)  # 1.34's field
    return obj


def dra_v1beta1_memory_80gi() -> None:
    f = DraFleet(
        "probe4-dra-v1beta1-memory-80gi-selector-h100-81559mi-20-nodes",
        "Built on the samples of the DRA driver's published capacity (deviceinfo.go: memory from NVML, 81559Mi on an H100 80GB "
        "HBM3) and Kubernetes' CEL quantity library: on a Kubernetes 1.32 cluster (resource.k8s.io/v1beta1, slices "
        "with `basic` devices) a user asks for H100s with `device.capacity['gpu.nvidia.com'].memory.compareTo("
        "quantity('80Gi')) >= 0`. 80Gi is 81920Mi: no H100 qualifies, although all eight H100 nodes have free GPUs. "
        "The A100 and L40S pools carry a lost GPU, an Xid 79 taint and a crash-looping driver pod.",
        now="2026-11-30T13:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 5}, {"a100": 8, "l40s": 4})
    for i in range(1, 9):
        f.gpu_node(f"h100-{i:02d}", "h100")
    selector = (
        "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0"
    )
    f.pending("research", "rlhf-actor-0", template="hopper-80g", selector=selector, count=2,
              node_selector={"pool": "h100"},
              scheduler=_SCHED.format(n=20, rest="11 node(s) didn't match Pod's node affinity/selector, 8 cannot "
                                      "allocate all claims"), created="2026-11-30T12:10:00Z")  # fmt: skip
    for node in [o for o in f.objects if o["kind"] == "Node"]:
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.32.4"
    f.objects = [_to_v1beta1(o) for o in f.objects]
    f.write(HERE, {
        "target": "research/rlhf-actor-0", "walk": [1], "verdict": "L1_DRA_SELECTOR_UNSATISFIED",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_SELECTOR_UNSATISFIED"],
        "absent": ["L1_DRA_DEVICES_EXHAUSTED", "L1_DRA_DEVICE_TAINTED", "L1_DRA_NO_DEVICES", "L5_XID"],
    })  # fmt: skip


def dra_shared_claim_pinned_elsewhere() -> None:
    f = DraFleet(
        "probe4-dra-shared-claim-allocated-on-h100-learner-selects-a100-15-nodes",
        "Built on the samples of the DRA driver's shared-claim demo (two pods naming one `resourceClaimName`) "
        "and the scheduler's DynamicResources Filter (`resourceclaim not available on the node`): an RL job's actor "
        "runs on h100-03 holding the shared claim `shared-rollout`; the learner, meant to share its GPUs, was "
        "given `nodeSelector: pool=a100` by a values typo, so no node admits it. The A100 pool carries a lost GPU "
        "and an Xid 79 taint: they are not this pod's answer (its claim is allocated on h100-03).",
        now="2026-11-30T09:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 4}, {"a100": 8, "l40s": 4})
    for i in range(1, 5):
        f.gpu_node(f"h100-{i:02d}", "h100")
    ns, claim_name = "rl", "shared-rollout"
    f.workload(ns, "actor-0", "h100-03", ["gpu-0", "gpu-1"], created="2026-11-30T08:00:00Z")
    claim = next(o for o in f.objects if o["kind"] == "ResourceClaim" and o["metadata"]["namespace"] == ns)
    template = next(
        o for o in f.objects if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["namespace"] == ns
    )
    f.objects.remove(template)  # a claim made by hand, not from a template
    meta = claim["metadata"]
    meta.update(name=claim_name, uid=uid(ns, claim_name))
    for key in ("ownerReferences", "generateName", "annotations"):
        meta.pop(key)
    actor = next(o for o in f.objects if o["kind"] == "Pod" and o["metadata"]["name"] == "actor-0")
    actor["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": claim_name}]
    actor["status"].pop("resourceClaimStatuses")
    scheduler = (
        "0/15 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "6 resourceclaim not available on the node, 8 node(s) didn't match Pod's node affinity/selector. "
        "preemption: 0/15 nodes are available: 15 Preemption is not helpful for scheduling."
    )
    learner = f._pod("learner-0", ns, None, {"app": "learner"},
                     [("learner", "nvcr.io/nvidia/pytorch:25.09-py3", {"state": "ContainerCreating"})],
                     claims=[{"name": "gpus", "resourceClaimName": claim_name}], phase="Pending",
                     created="2026-11-30T08:01:00Z")  # fmt: skip
    learner["spec"].pop("nodeName")
    learner["spec"]["nodeSelector"] = {"pool": "a100"}
    learner["status"] = {"phase": "Pending", "qosClass": "BestEffort",
                         "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                         "message": scheduler, "lastTransitionTime": "2026-11-30T08:01:00Z"}]}  # fmt: skip
    f.event(ns, "learner-0", "FailedScheduling", scheduler, count=14, first="2026-11-30T08:01:00Z", last=f.now,
            component="default-scheduler")  # fmt: skip
    f.write(HERE, {
        "target": f"{ns}/learner-0", "walk": [1], "verdict": "L1_SELECTOR_MISMATCH",
        "codes": ["L1_POD_PENDING", "L1_SELECTOR_MISMATCH", "L1_DRA_CLAIM_PENDING"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L1_DRA_NO_DEVICES", "L1_DRA_DEVICES_EXHAUSTED", "L5_XID",
                   "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


def _in_init(pod: dict[str, Any], init: str, started: str) -> None:
    """A pod whose init container still runs (kubectl: Init:0/1): its containers wait in PodInitializing."""
    pod["status"]["phase"] = "Pending"
    pod["status"]["conditions"] = [{"type": "Initialized", "status": "False"}, {"type": "Ready", "status": "False"},
                                   {"type": "ContainersReady", "status": "False"}, {"type": "PodScheduled", "status": "True"}]  # fmt: skip
    for st in pod["status"]["initContainerStatuses"]:
        if st["name"] == init:
            st.update(ready=False, started=True, state={"running": {"startedAt": started}})
    for st in pod["status"]["containerStatuses"]:
        st.update(ready=False, started=False, state={"waiting": {"reason": "PodInitializing"}})
        st.pop("containerID", None)


def dra_kubelet_plugin_waits_for_driver() -> None:
    f = DraFleet(
        "probe4-dra-new-h200-driver-kernel-unresolved-kubelet-plugin-init-17-nodes",
        "Built on the samples of the DRA driver's kubelet-plugin-prestart.sh (init container `init-container`: "
        "`Check failed. Has the NVIDIA GPU driver been set up?`, `Hint: NVIDIA_DRIVER_ROOT is set to "
        "'/run/nvidia/driver' which typically means that the NVIDIA GPU Operator manages the GPU driver`) and of the "
        "driver container (sample 14, `Could not resolve Linux kernel version`): a new H200 node came up on a kernel "
        "the operator v25.10.1 driver image cannot find headers for; its driver pod crash-loops, the kubelet plugin "
        "waits in Init, no ResourceSlice is published, and the pending fine-tune finds the other H200s full.",
        now="2026-11-30T10:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 6}, {"a100": 8, "l40s": 4})
    for i in range(1, 4):
        f.gpu_node(f"h200-{i:02d}", "h200")
        f.workload("llm", f"dpo-run-{i}", f"h200-{i:02d}", [f"gpu-{g}" for g in range(8)])
    node = "h200-04"
    f.gpu_node(node, "h200", publishes=False, driver_state="CrashLoopBackOff", boot="2026-11-30T09:40:12Z")
    for obj in f.objects:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == node:
            obj["status"]["nodeInfo"]["kernelVersion"] = "6.8.0-87-generic"
    pods = {
        o["metadata"]["name"]: o
        for o in f.objects
        if o["kind"] == "Pod" and o["spec"].get("nodeName") == node
    }
    _in_init(pods[f.plugins[node]], "init-container", "2026-11-30T09:41:30Z")
    toolkit = next(p for n, p in pods.items() if n.startswith("nvidia-container-toolkit-daemonset-"))
    _in_init(toolkit, "driver-validation", "2026-11-30T09:41:25Z")
    driver = next(n for n in pods if n.startswith("nvidia-driver-daemonset-"))
    f.logs[f"{drafleet.OPERATOR_NS}/{driver}/nvidia-driver-ctr#previous"] = (
        "DRIVER_ARCH is x86_64\n"
        "========== NVIDIA Software Installer ==========\n"
        f"Starting installation of NVIDIA driver version {drafleet.DRIVER_VERSION} for Linux kernel version "
        "6.8.0-87-generic\n"
        "Stopping NVIDIA persistence daemon...\n"
        "Unloading NVIDIA driver kernel modules...\n"
        "Unmounting NVIDIA driver rootfs...\n"
        "Checking NVIDIA driver packages...\n"
        "Updating the package cache...\n"
        "Resolving Linux kernel version...\n"
        "Could not resolve Linux kernel version\n"
        "Stopping NVIDIA persistence daemon...\n"
    )
    check = (
        "Check failed. Has the NVIDIA GPU driver been set up? It is expected to be installed under NVIDIA_DRIVER_ROOT "
        "(currently set to '/run/nvidia/driver') in the host filesystem. If that path appears to be unexpected: review "
        "the DRA driver's 'nvidiaDriverRoot' Helm chart variable. Otherwise, review if the GPU driver has actually been "
        "installed under that path.\n"
    )
    f.log(node, "init-container", (
        "create symlink: /driver-root -> /driver-root-parent/driver\n"
        + "".join(f"2026-11-30T09:5{i}:0{i}Z  /driver-root (/run/nvidia/driver on host): nvidia-smi: not found, "
                  "libnvidia-ml.so.1: not found, current contents: [].\n" for i in range(6))
        + "\n" + check + "Hint: Directory /run/nvidia/driver on the host is empty\n"
        "Hint: NVIDIA_DRIVER_ROOT is set to '/run/nvidia/driver' which typically means that the NVIDIA GPU Operator "
        "manages the GPU driver. Make sure that the GPU Operator is deployed and healthy.\n"
    ))  # fmt: skip
    f.pending("llm", "dpo-run-4", template="h200-x8", selector="device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'",
              count=8, node_selector={"pool": "h200"},
              scheduler=_SCHED.format(n=17, rest="12 node(s) didn't match Pod's node affinity/selector, 4 cannot "
                                      "allocate all claims"), created="2026-11-30T09:45:00Z")  # fmt: skip
    f.write(HERE, {
        "target": "llm/dpo-run-4", "walk": [1, 2, 3], "verdict": "L3_DRIVER_BUILD_FAILED",
        "codes": ["L1_DRA_CLAIM_PENDING", "L1_DRA_NO_DEVICES", "L2_WAITING_FOR_DRIVER", "L3_DRIVER_BUILD_FAILED"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L3_PREINSTALLED_DRIVER_CONFLICT", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


RECIPES: list[Recipe] = [
    driver_library_mismatch,
    plugin_image_pull_new_node,
    old_gfd_labels_cuda_requirement,
    driver_image_tag_missing_new_os,
    trtllm_cuda_malloc_async_oom,
    nccl_cuda_failure_oom,
    init_container_oomkilled,
]
DRA = [
    dra_h100_exhausted_tainted_a100,
    dra_mig_class_missing,
    dra_gke_empty_slice,
    dra_xid_seen_not_published,
    dra_v1beta1_memory_80gi,
    dra_shared_claim_pinned_elsewhere,
    dra_kubelet_plugin_waits_for_driver,
]


def main() -> None:
    write_recipes(RECIPES, HERE)
    for build in DRA:
        build()


if __name__ == "__main__":
    main()
