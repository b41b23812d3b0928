"""The layer 2-4 probe incidents, written out as YAML: `python -m tests.incidents.probe2.build`.

Each recipe is a production-shaped fleet (12-25 nodes, several pools, sick nodes the target could
never use) around one real-world variant of layers 2-4: operator pods of another GPU Operator
release (v23.9 / v24.x / v25.x names), driver containers failing with real installer messages,
version skew across nodes, system versus CUDA out-of-memory, vLLM preemptions on a time-sliced GPU.
Expectations come from spec/findings.md, not from what gpubot prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import (
    NS,
    Fleet,
    Recipe,
    mixed_pools,
    noise_in_viz_and_infer,
    uuid_of,
    write_recipes,
)

HERE = Path(__file__).resolve().parent


def _fleet(name: str, description: str, *, a100: int = 5, h100: int = 6, l40s: int = 4) -> Fleet:
    """Three pools beside two CPU nodes, with the noise in pools the target never uses."""
    f = mixed_pools(name, description, a100=a100, h100=h100, l40s=l40s, cpu=2)
    noise_in_viz_and_infer(f)
    return f


def _status(name: str, image: str, state: dict[str, Any], restarts: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "ready": False,
        "restartCount": restarts,
        "started": False,
        "state": state,
    }


def _crashloop(container: str, pod: str, exit_code: int = 1) -> dict[str, Any]:
    return {"waiting": {"reason": "CrashLoopBackOff",
                        "message": f"back-off 5m0s restarting failed container={container} pod={pod}"},
            "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}  # fmt: skip


def _operand(
    f: Fleet,
    name: str,
    node: str,
    labels: dict[str, str],
    containers: list[tuple[str, str]],
    init: list[tuple[str, str]] | None = None,
    *,
    failing: dict[str, dict[str, Any]] | None = None,
    restarts: int = 14,
) -> dict[str, Any]:
    """An operand pod on `node`; containers named in `failing` carry that state (init containers after
    a failing one wait in PodInitializing, as the kubelet leaves them)."""
    failing = failing or {}
    started = {"running": {"startedAt": "2026-11-29T08:02:11Z"}}
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2026-11-29T08:01:40Z",
                           "finishedAt": "2026-11-29T08:01:44Z"}}  # fmt: skip
    init_statuses = []
    blocked = False
    for c, image in init or []:
        if c in failing:
            init_statuses.append(_status(c, image, failing[c], restarts))
            blocked = True
        elif blocked:
            init_statuses.append(_status(c, image, {"waiting": {"reason": "PodInitializing"}}))
        else:
            init_statuses.append({**_status(c, image, done), "ready": True})
    statuses = []
    for c, image in containers:
        if c in failing:
            statuses.append(_status(c, image, failing[c], restarts))
        elif blocked:
            statuses.append(_status(c, image, {"waiting": {"reason": "PodInitializing"}}))
        else:
            statuses.append({**_status(c, image, started), "ready": True, "started": True})
    ready = "False" if failing else "True"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels, "uid": _uid(name),
                     "creationTimestamp": "2026-11-29T08:01:30Z"},
        "spec": {"nodeName": node, "containers": [{"name": c, "image": i} for c, i in containers]},
        "status": {"phase": "Pending" if blocked else "Running",
                   "conditions": [{"type": "Initialized", "status": "False" if blocked else "True"},
                                  {"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": ready},
                                  {"type": "PodScheduled", "status": "True"}],
                   "containerStatuses": statuses},
    }  # fmt: skip
    if init:
        pod["spec"]["initContainers"] = [{"name": c, "image": i} for c, i in init]
        pod["status"]["initContainerStatuses"] = init_statuses
    f.objects.append(pod)
    return pod


def _uid(name: str) -> str:
    import hashlib

    h = hashlib.sha1(f"probe2/{name}".encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _validator(f: Fleet, node: str, version: str, stuck: str, suffix: str) -> str:
    val = f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{version}"
    name = f"nvidia-operator-validator-{suffix}"
    stages = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
    _operand(f, name, node, {"app": "nvidia-operator-validator", "app.kubernetes.io/part-of": "gpu-operator"},
             [("nvidia-operator-validator", val)], [(s, val) for s in stages],
             failing={stuck: _crashloop(stuck, name)} if stuck else None)  # fmt: skip
    return name


def _bound_pod(
    f: Fleet, name: str, ns: str, node: str, image: str, state: dict[str, Any], gpus: int = 1, **extra: Any
) -> dict[str, Any]:
    main = {"name": "main", "image": image, "resources": {"limits": {"nvidia.com/gpu": str(gpus), **extra}}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": _uid(f"{ns}/{name}"), "labels": {"app": name.rsplit("-", 1)[0]},
                     "creationTimestamp": "2026-11-29T09:00:00Z"},
        "spec": {"nodeName": node, "containers": [main]},
        "status": {"phase": "Running", "startTime": "2026-11-29T09:00:02Z",
                   "conditions": [{"type": "PodScheduled", "status": "True"}],
                   "containerStatuses": [{"name": "main", "image": image, "ready": "running" in state,
                                          "restartCount": 6, "started": "running" in state, **state}]},
    }  # fmt: skip
    f.objects.append(pod)
    return pod


def driver_v23_9_kernel_unresolved() -> tuple[Fleet, dict[str, Any]]:
    f = _fleet(
        "probe2-v23-9-driver-ctr-kernel-unresolved-a100-19-nodes",
        "Built on sample 14 (gpu-operator issue 155) and sample 12: a GPU Operator v23.9.2 driver daemonset "
        "(`nvidia-driver-daemonset`, container `nvidia-driver-ctr`) crash-loops on a rebuilt A100 node with "
        "`Could not resolve Linux kernel version`; its validator waits in driver-validation. The training pod "
        "bound to it waits in ContainerCreating. Elsewhere: a lost GPU, rising rows, an unregistered plugin.",
    )  # fmt: skip
    node = "a100-train-02"
    drv = "nvidia-driver-daemonset-kq7xd"
    image = "nvcr.io/nvidia/driver:535.129.03-ubuntu22.04"
    _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver",
                            "app.kubernetes.io/part-of": "gpu-operator", "pod-template-generation": "3"},
             [("nvidia-driver-ctr", image)],
             [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.6.5")],
             failing={"nvidia-driver-ctr": _crashloop("nvidia-driver-ctr", drv)})  # fmt: skip
    f.logs[f"{NS}/{drv}/nvidia-driver-ctr"] = (
        "DRIVER_ARCH is x86_64\n"
        "Creating directory NVIDIA-Linux-x86_64-535.129.03\n"
        "========== NVIDIA Software Installer ==========\n"
        "Starting installation of NVIDIA driver version 535.129.03 for Linux kernel version 5.15.0-134-generic\n"
        "Stopping NVIDIA persistence daemon...\n"
        "Unloading NVIDIA driver kernel modules...\n"
        "Unmounting NVIDIA driver rootfs...\n"
        "Checking NVIDIA driver packages...\n"
        "Updating the package cache...\n"
        "Resolving Linux kernel version...\n"
        "Could not resolve Linux kernel version\n"
        "Stopping NVIDIA persistence daemon...\n"
        "Unloading NVIDIA driver kernel modules...\n"
        "Unmounting NVIDIA driver rootfs...\n"
    )
    _validator(f, node, "v23.9.2", "driver-validation", "x4m2p")
    val = f"{NS}/nvidia-operator-validator-x4m2p/driver-validation"
    f.logs[val] = "running command chroot with args [/run/nvidia/driver nvidia-smi]\nchroot: failed to run command 'nvidia-smi': No such file or directory\ncommand failed, retrying after 5 seconds\n"  # fmt: skip
    _bound_pod(f, "bert-pretrain-0", "research", node, "nvcr.io/nvidia/pytorch:24.01-py3",
               {"state": {"waiting": {"reason": "ContainerCreating"}}})  # fmt: skip
    return f, {
        "target": "research/bert-pretrain-0",
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_BUILD_FAILED",
        "codes": [
            "L1_POD_SCHEDULED",
            "L2_WAITING_FOR_DRIVER",
            "L2_VALIDATOR_STUCK",
            "L3_DRIVER_BUILD_FAILED",
        ],
        "absent": ["L5_XID", "L5_DEVICE_UNHEALTHY"],
    }


def toolkit_v24_crashloop_no_runtime() -> tuple[Fleet, dict[str, Any]]:
    f = _fleet(
        "probe2-v24-6-toolkit-ctr-crashloop-no-runtime-h100-21-nodes",
        "Built on samples 10 and 38 (gpu-operator issue 1374): GPU Operator v24.6.2's "
        "`nvidia-container-toolkit-daemonset` (container `nvidia-container-toolkit-ctr`) crash-loops on an "
        "H100 node, the validator stops at toolkit-validation, and the inference pod's sandbox fails with "
        "`no handler found for \"nvidia\"`-era text: `failed to get sandbox runtime: no runtime for \"nvidia\" "
        "is configured`. Elsewhere: a lost GPU, rising rows, an unregistered plugin.",
        a100=5, h100=8, l40s=4,
    )  # fmt: skip
    node = "h100-infer-03"
    tk = "nvidia-container-toolkit-daemonset-9fj2w"
    _operand(f, tk, node, {"app": "nvidia-container-toolkit-daemonset", "app.kubernetes.io/part-of": "gpu-operator"},
             [("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.16.2-ubuntu20.04")],
             [("driver-validation", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.6.2")],
             failing={"nvidia-container-toolkit-ctr": _crashloop("nvidia-container-toolkit-ctr", tk)})  # fmt: skip
    f.logs[f"{NS}/{tk}/nvidia-container-toolkit-ctr"] = (
        'time="2026-11-29T10:09:12Z" level=info msg="Starting nvidia-toolkit"\n'
        'time="2026-11-29T10:09:12Z" level=info msg="Installing toolkit"\n'
        'time="2026-11-29T10:09:13Z" level=info msg="Setting up runtime"\n'
        'time="2026-11-29T10:09:13Z" level=fatal msg="error running nvidia-toolkit: unable to setup runtime: '
        "unable to load config: failed to load config: toml: line 42: expected key separator '='\"\n"
    )
    _validator(f, node, "v24.6.2", "toolkit-validation", "r8d3k")
    pod = _bound_pod(f, "triton-llama-0", "serving", node, "nvcr.io/nvidia/tritonserver:24.08-py3",
                     {"state": {"waiting": {"reason": "ContainerCreating"}}})  # fmt: skip
    f.event_for_pod(
        pod,
        "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: "
        'no runtime for "nvidia" is configured',
    )
    return f, {
        "target": "serving/triton-llama-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_NO_RUNTIME_NVIDIA",
        "codes": ["L1_POD_SCHEDULED", "L2_NO_RUNTIME_NVIDIA", "L2_VALIDATOR_STUCK", "L2_OPERAND_FAILING"],
        "absent": ["L3_DRIVER_BUILD_FAILED", "L5_XID"],
    }


def driver_v25_nouveau_module_fail() -> tuple[Fleet, dict[str, Any]]:
    f = _fleet(
        "probe2-v25-3-driver-nouveau-module-fail-l40s-17-nodes",
        "Built on sample 16 and gpu-operator issues on nouveau: GPU Operator v25.3.1's driver pod "
        "(`nvidia-driver-daemonset-…`) on an L40S logs `Failed to install the kernel module` after the "
        "installer found nouveau loaded; device plugin and validator wait in Init. The pod is bound there.",
        a100=4, h100=5, l40s=5,
    )  # fmt: skip
    node = "l40s-viz-03"
    drv = "nvidia-driver-daemonset-b2n8c"
    _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver",
                            "app.kubernetes.io/part-of": "gpu-operator"},
             [("nvidia-driver-ctr", "nvcr.io/nvidia/driver:570.158.01-ubuntu22.04")],
             [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0")],
             failing={"nvidia-driver-ctr": _crashloop("nvidia-driver-ctr", drv)})  # fmt: skip
    f.logs[f"{NS}/{drv}/nvidia-driver-ctr"] = (
        "========== NVIDIA Software Installer ==========\n"
        "Starting installation of NVIDIA driver version 570.158.01 for Linux kernel version 5.15.0-134-generic\n"
        "Installing NVIDIA driver kernel modules...\n"
        "WARNING: The Nouveau kernel driver is currently in use by your system.  This driver is incompatible "
        "with the NVIDIA driver, and must be disabled before proceeding.\n"
        "ERROR: Unable to load the kernel module 'nvidia.ko'.  This happens most frequently when this kernel "
        "module was built against the wrong or improperly configured kernel sources\n"
        "Failed to install the kernel module\n"
        "Stopping NVIDIA persistence daemon...\n"
    )
    _validator(f, node, "v25.3.1", "driver-validation", "m5t9z")
    _bound_pod(f, "omniverse-render-0", "viz", node, "nvcr.io/nvidia/omniverse/kit:106.0",
               {"state": {"waiting": {"reason": "ContainerCreating"}}})  # fmt: skip
    return f, {
        "target": "viz/omniverse-render-0",
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_BUILD_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_WAITING_FOR_DRIVER", "L3_DRIVER_BUILD_FAILED"],
        "absent": ["L3_PREINSTALLED_DRIVER_CONFLICT"],
    }


def driver_skew_too_old() -> tuple[Fleet, dict[str, Any]]:
    f = Fleet(
        "probe2-driver-kernel-skew-cuda-insufficient-h100-20-nodes",
        "Built on sample 32 (H100 labels) and the CUDA runtime message: one H100 node was left on driver "
        "550.127.05 (CUDA 12.4) and kernel 5.15.0-122 when the pool moved to 570.158.01 (CUDA 12.8); the "
        "pod's image needs CUDA 12.8 and crash-loops with `CUDA driver version is insufficient for CUDA "
        "runtime version`. Elsewhere: a lost GPU, rising rows.",
    )
    f.control_plane()
    f.cpu_node("cpu-01")
    for i in range(1, 9):
        kw: dict[str, Any] = {"driver": "550.127.05", "cuda": "12.4"} if i == 7 else {}
        f.gpu_node(f"h100-infer-{i:02d}", "h100", pool="infer", operands="plugin", **kw)
    f.node("h100-infer-07")["status"]["nodeInfo"]["kernelVersion"] = "5.15.0-122-generic"
    for i in range(1, 7):
        f.gpu_node(f"a100-train-{i:02d}", "a100", pool="train", operands="plugin")
    for i in range(1, 5):
        f.gpu_node(f"l40s-viz-{i:02d}", "l40s", 4, pool="viz", operands="plugin")
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    f.sick_rows_rising("a100-train-04", "a100")
    node = "h100-infer-07"
    _bound_pod(f, "sglang-qwen-0", "serving", node, "lmsysorg/sglang:v0.4.6-cu128",
               {"state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}})  # fmt: skip
    f.logs["serving/sglang-qwen-0/main#previous"] = (
        "Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 14, in <module>\n'
        "RuntimeError: The NVIDIA driver on your system is too old (found version 12040). Please update your "
        "GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx\n"
    )
    return f, {
        "target": "serving/sglang-qwen-0",
        "walk": [1, 2, 3],
        "verdict": "L3_DRIVER_TOO_OLD",
        "codes": ["L1_POD_SCHEDULED", "L3_DRIVER_TOO_OLD", "L3_DRIVER_VERSION_SKEW", "L3_KERNEL_SKEW"],
        "absent": ["L5_XID"],
    }


def system_oomkilled_not_cuda() -> tuple[Fleet, dict[str, Any]]:
    f = _fleet(
        "probe2-oomkilled-cgroup-dataloader-a100-18-nodes",
        "Built on sample 37's caveat (GPU OOM is not OOMKilled) and kubernetes OOMKilled statuses: a "
        "training pod's container last ended `OOMKilled` (exit 137) under an 64Gi memory limit while the "
        "GPU framebuffer sits at 40 %; no CUDA out-of-memory line in its log.",
        a100=4, h100=6, l40s=5,
    )  # fmt: skip
    node = "a100-train-01"
    f.gpu_series(node, "a100", 8, fb_used=32768.0)
    _bound_pod(f, "dataloader-heavy-0", "research", node, "nvcr.io/nvidia/pytorch:25.01-py3",
               {"state": {"running": {"startedAt": "2026-11-29T10:05:00Z"}},
                "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                             "startedAt": "2026-11-29T09:40:00Z",
                                             "finishedAt": "2026-11-29T10:04:51Z"}}},
               gpus=8, memory="64Gi")  # fmt: skip
    f.logs["research/dataloader-heavy-0/main#previous"] = (
        "Epoch 3: 41%|████      | 2210/5390 [21:14<30:33, 1.73it/s]\n"
        "DataLoader worker (pid 211) is killed by signal: Killed.\n"
    )
    return f, {
        "target": "research/dataloader-heavy-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L4_OOMKILLED",
        "codes": ["L1_POD_SCHEDULED", "L4_OOMKILLED"],
        "absent": ["L4_GPU_OOM_IN_LOGS", "L4_FB_SATURATED"],
    }


def vllm_preemptions_time_sliced() -> tuple[Fleet, dict[str, Any]]:
    f = _fleet(
        "probe2-vllm-preemptions-time-sliced-l40s-shared-16-nodes",
        "Built on samples 34, 35 and 39: a vLLM server shares a time-sliced L40S (replicas 4, product "
        "NVIDIA-L40S-SHARED) with a notebook; framebuffer at 98 %, `vllm:num_preemptions_total` rising and "
        "the V0 warning `Sequence group 0 is preempted by PreemptionMode.RECOMPUTE mode because there is "
        "not enough KV cache space.`",
        a100=4, h100=5, l40s=4,
    )  # fmt: skip
    node = "l40s-shared-01"
    f.gpu_node(node, "l40s", 1, pool="shared", operands="plugin", replicas=4)
    mem = 46068
    used = 45150.0
    base = {"gpu": "0", "UUID": uuid_of(node, 0), "device": "nvidia0", "modelName": "NVIDIA L40S",
            "Hostname": node, "DCGM_FI_DRIVER_VERSION": "570.158.01"}  # fmt: skip
    for metric, value in (
        ("DCGM_FI_DEV_FB_USED", used),
        ("DCGM_FI_DEV_FB_FREE", mem - used),
        ("DCGM_FI_DEV_XID_ERRORS", 0),
    ):
        f.series(metric, {**base, "pod": "vllm-mistral-0", "namespace": "serving", "container": "main"},
                 [[-3600, value], [0, value]])  # fmt: skip
    vl = {"model_name": "mistralai/Mistral-7B-Instruct-v0.3", "pod": "vllm-mistral-0", "namespace": "serving",
          "instance": "10.244.31.7:8000", "job": "vllm"}  # fmt: skip
    f.series("vllm:num_preemptions_total", vl, [[-900, 12], [-600, 20], [-300, 41], [0, 77]])
    f.series(
        "vllm:cache_config_info",
        {**vl, "gpu_memory_utilization": "0.9", "block_size": "16"},
        [[-600, 1], [0, 1]],
    )
    _bound_pod(f, "vllm-mistral-0", "serving", node, "vllm/vllm-openai:v0.6.3",
               {"state": {"running": {"startedAt": "2026-11-29T09:00:05Z"}}})  # fmt: skip
    f.running_pod("jupyter-bob-0", "notebooks", node, 1)
    f.logs["serving/vllm-mistral-0/main"] = (
        "INFO 11-29 10:10:02 metrics.py:351] Avg prompt throughput: 812.4 tokens/s, Avg generation throughput: "
        "96.1 tokens/s, Running: 31 reqs, Swapped: 0 reqs, Pending: 17 reqs, GPU KV cache usage: 99.6%, CPU KV "
        "cache usage: 0.0%.\n"
        "WARNING 11-29 10:10:04 scheduler.py:1089] Sequence group 412 is preempted by PreemptionMode.RECOMPUTE "
        "mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
        "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
        "total_num_cumulative_preemption=51\n"
    )
    return f, {
        "target": "serving/vllm-mistral-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L4_PREEMPTIONS",
        "codes": ["L1_POD_SCHEDULED", "L4_PREEMPTIONS", "L4_TIME_SLICING"],
        "absent": ["L4_FB_RESERVED_NORMAL", "L4_FB_SATURATED", "L4_GPU_OOM_IN_LOGS"],
    }


def validator_cuda_validation_busy() -> tuple[Fleet, dict[str, Any]]:
    f = _fleet(
        "probe2-v24-9-validator-cuda-validation-exclusive-process-22-nodes",
        "Built on sample 17 and gpu-operator issues on the cuda-validation workload: a v24.9.2 validator "
        "stops at cuda-validation on an H100 node whose GPUs were set to EXCLUSIVE_PROCESS; its log says "
        "`Failed to allocate device vector A (error code CUDA-capable device(s) is/are busy or unavailable)!`. "
        "Driver and toolkit pods are Ready; the inference pod on the node runs.",
        a100=6, h100=8, l40s=4,
    )  # fmt: skip
    node = "h100-infer-02"
    name = _validator(f, node, "v24.9.2", "cuda-validation", "c7v4q")
    f.logs[f"{NS}/{name}/cuda-validation"] = (
        'time="2026-11-29T10:08:31Z" level=info msg="version: 0fe1e8db, commit: 0fe1e8d"\n'
        'time="2026-11-29T10:08:31Z" level=info msg="pod nvidia-cuda-validator-t2x9d is curently in Failed phase"\n'
        "Failed to allocate device vector A (error code CUDA-capable device(s) is/are busy or unavailable)!\n"
        "[Vector addition of 50000 elements]\n"
    )
    f.gpu_series(node, "h100", 8, fb_used=20480.0)
    _bound_pod(f, "embed-service-0", "serving", node, "nvcr.io/nvidia/tritonserver:24.08-py3",
               {"state": {"running": {"startedAt": "2026-11-29T09:00:05Z"}}})  # fmt: skip
    return f, {
        "target": "serving/embed-service-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_VALIDATOR_STUCK",
        "codes": ["L1_POD_SCHEDULED", "L2_VALIDATOR_STUCK", "L2_OPERAND_FAILING", "L3_OK", "L5_OK"],
        "absent": ["L2_WAITING_FOR_DRIVER", "L3_DRIVER_BUILD_FAILED", "L5_XID"],
    }


RECIPES: list[Recipe] = [
    driver_v23_9_kernel_unresolved,
    toolkit_v24_crashloop_no_runtime,
    driver_v25_nouveau_module_fail,
    driver_skew_too_old,
    system_oomkilled_not_cuda,
    vllm_preemptions_time_sliced,
    validator_cuda_validation_busy,
]


def main() -> None:
    write_recipes(RECIPES, HERE)


if __name__ == "__main__":
    main()
