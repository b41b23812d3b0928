"""The second round of layer 2-4 and DRA probe incidents: `python -m tests.incidents.probe7.build`.

Production-shaped fleets (16-22 nodes, A100 / H100 / L40S or H100 / H200 / A100 / L40S pools, GPU
Operator v24.9.2 to v25.10.1) with sick nodes the target never uses, around real-world text nobody had
fed gpubot yet: the host's OOM killer taking the driver container mid-compile, a fabric manager built
for another driver than the driver container's, llama.cpp's `ggml_cuda_init: failed to initialize
CUDA: unknown error` (nvidia_uvm not loaded), a vLLM `torch.OutOfMemoryError` only in the previous
container's log; on DRA fleets, a pod asking for GPUs through the 1.34 DRA extended resource
`deviceclass.resource.kubernetes.io/gpu.nvidia.com`, and an operator-managed kubelet plugin crash-
looping on `ERROR_LIBRARY_NOT_FOUND`. Each `x-expect` comes from spec/findings.md, written before
gpubot ran on it (README.md beside this file names the sources).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents import drafleet
from tests.incidents.drafleet import DraFleet
from tests.incidents.fleets import NS, Fleet, Recipe, mixed_pools, noise_in_viz_and_infer, write_recipes
from tests.incidents.probe2.build import _bound_pod, _operand, _validator
from tests.incidents.probe4.build import _SCHED, _sick_pools, _start_error

HERE = Path(__file__).resolve().parent
Expect = dict[str, Any]
VAL = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:{v}"


def _fleet(
    name: str, description: str, *, a100: int = 6, h100: int = 7, l40s: int = 5, cpu: int = 2
) -> Fleet:
    """Three pools beside CPU nodes, with the noise (a lost GPU, rising rows, an unregistered plugin)
    in the L40S and H100 pools."""
    f = mixed_pools(name, description, a100=a100, h100=h100, l40s=l40s, cpu=cpu)
    noise_in_viz_and_infer(f)
    return f


def _plugin_of(f: Fleet, node: str) -> dict[str, Any]:
    return next(o for o in f.objects if o["kind"] == "Pod" and o["spec"].get("nodeName") == node
                and o["metadata"]["labels"].get("app") == "nvidia-device-plugin-daemonset")  # fmt: skip


def _restarted(
    f: Fleet, name: str, ns: str, node: str, image: str, gpus: int, *, restarts: int = 3
) -> dict[str, Any]:
    """A pod running again after its container died (exit 1): Running now, `lastState` the crash."""
    pod = _bound_pod(f, name, ns, node, image,
                     {"state": {"running": {"startedAt": "2026-11-29T10:07:12Z"}},
                      "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "startedAt": "2026-11-29T09:31:02Z",
                                                   "finishedAt": "2026-11-29T10:06:58Z"}}}, gpus=gpus)  # fmt: skip
    pod["status"]["containerStatuses"][0]["restartCount"] = restarts
    return pod


# --- layer 2 -------------------------------------------------------------------------------------


def driver_ctr_host_oomkilled() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe7-v24-9-driver-ctr-oomkilled-compiling-operands-init-a100-21-nodes",
        "Built on the samples of gpu-operator issues about the driver container killed while it compiles (exit 137, "
        "`OOMKilled` in its lastState) and sample 14's installer steps: a new A100 node of a GPU Operator v24.9.2 "
        "fleet runs the driver container under the ClusterPolicy's 1Gi memory limit; the kernel OOM killer ends "
        "it while it compiles the modules, over and over. The toolkit and device plugin wait in Init, the node "
        "advertises no GPU and the other A100s are full. The OOMKilled container is the operator's, not the "
        "target's.",
    )  # fmt: skip
    node = "a100-train-06"
    n = f.node(node)
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu")
    val = VAL.format(v="v24.9.2")
    drv = "nvidia-driver-daemonset-5x8kq"
    crash = {
        "waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off 5m0s restarting failed container=nvidia-driver-ctr pod={drv}",
        }
    }
    pod = _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
                   [("nvidia-driver-ctr", "nvcr.io/nvidia/driver:550.127.08-ubuntu22.04")],
                   [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.7.0")],
                   failing={"nvidia-driver-ctr": crash}, restarts=9)  # fmt: skip
    pod["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": "2026-11-29T10:01:12Z",
                       "finishedAt": "2026-11-29T10:04:40Z"}
    }  # fmt: skip
    pod["spec"]["containers"][0]["resources"] = {"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}
    f.logs[f"{NS}/{drv}/nvidia-driver-ctr#previous"] = (
        "DRIVER_ARCH is x86_64\n"
        "Creating directory NVIDIA-Linux-x86_64-550.127.08\n"
        "Verifying archive integrity... OK\n"
        "Uncompressing NVIDIA Accelerated Graphics Driver for Linux-x86_64 550.127.08............\n"
        "\n"
        "WARNING: Unable to determine the default X library path. The path /tmp/null/lib will be used, but this "
        "path was not detected in the ldconfig(8) cache, and no directory exists at this path, so it is likely "
        "that libraries installed there will not be found by the loader.\n"
        "\n"
        "========== NVIDIA Software Installer ==========\n"
        "\n"
        "Starting installation of NVIDIA driver version 550.127.08 for Linux kernel version 5.15.0-134-generic\n"
        "\n"
        "Stopping NVIDIA persistence daemon...\n"
        "Unloading NVIDIA driver kernel modules...\n"
        "Unmounting NVIDIA driver rootfs...\n"
        "Checking NVIDIA driver packages...\n"
        "Updating the package cache...\n"
        "Resolving Linux kernel version...\n"
        "Proceeding with Linux kernel version 5.15.0-134-generic\n"
        "Installing Linux kernel headers...\n"
        "Installing Linux kernel module files...\n"
        "Generating Linux kernel version string...\n"
        "Compiling NVIDIA driver kernel modules...\n"
    )
    waiting = {"running": {"startedAt": "2026-11-29T09:31:10Z"}}
    tk = "nvidia-container-toolkit-daemonset-r4n7c"
    _operand(f, tk, node, {"app": "nvidia-container-toolkit-daemonset"},
             [("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.17.4-ubuntu20.04")],
             [("driver-validation", val)], failing={"driver-validation": waiting}, restarts=0)  # fmt: skip
    f.logs[f"{NS}/{tk}/driver-validation"] = (
        'time="2026-11-29T10:11:40Z" level=info msg="Attempting to validate a pre-installed driver on the host"\n'
        'time="2026-11-29T10:11:40Z" level=info msg="No pre-installed driver detected on the host: chroot: failed to '
        "run command 'nvidia-smi': No such file or directory\"\n"
        'time="2026-11-29T10:11:40Z" level=info msg="Attempting to validate a driver container installation"\n'
        'time="2026-11-29T10:11:40Z" level=info msg="failed to validate the driver, retrying after 5 seconds"\n'
    )
    dp = _plugin_of(f, node)
    f.objects.remove(dp)
    f.logs.pop(f"{NS}/{dp['metadata']['name']}/nvidia-device-plugin")
    _operand(f, dp["metadata"]["name"], node, {"app": "nvidia-device-plugin-daemonset"},
             [("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")],
             [("toolkit-validation", val)], failing={"toolkit-validation": waiting}, restarts=0)  # fmt: skip
    for i in range(1, 6):
        f.running_pod(f"pretrain-shard-{i}", "research", f"a100-train-{i:02d}", 8)
    f.pending_pod(
        "llm-sft-0", "research",
        "0/21 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "15 node(s) didn't match Pod's node affinity/selector, 5 Insufficient nvidia.com/gpu. preemption: 0/21 nodes "
        "are available: 5 No preemption victims found for incoming pod, 16 Preemption is not helpful for scheduling.",
        gpus=8, selector={"pool": "train"},
    )  # fmt: skip
    return f, {
        "target": "research/llm-sft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_WAITING_FOR_DRIVER",
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L2_WAITING_FOR_DRIVER", "L2_OPERAND_FAILING"],
        "absent": ["L4_OOMKILLED", "L3_PREINSTALLED_DRIVER_CONFLICT", "L2_NO_RUNTIME_NVIDIA", "L5_XID",
                   "L5_DEVICE_UNHEALTHY", "L5_REMAPPED_ROWS_RISING"],
    }  # fmt: skip


def llama_cpp_cuda_unknown_error_uvm() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe7-llama-cpp-cuda-unknown-error-nvidia-uvm-missing-l40s-20-nodes",
        "Built on the samples of ggml-org/llama.cpp issue 7218 (`ggml_cuda_init: failed to initialize CUDA: unknown error`, "
        "fixed by `modprobe nvidia_uvm`), pytorch issue 159954 and NVIDIA/k8s-device-plugin issue 319: after a host "
        "update l40s-viz-03 came back without the nvidia_uvm module (no /dev/nvidia-uvm), so CUDA cannot initialise "
        "in new containers while NVML, the device plugin and the validator's earlier pass look fine. A llama.cpp "
        "server there falls back to the CPU and answers in minutes. Elsewhere in the L40S pool: a lost GPU and an "
        "unregistered plugin.",
        a100=5, h100=6, l40s=6,
    )  # fmt: skip
    node = "l40s-viz-03"
    f.gpu_series(node, "l40s", 4, fb_used=0.0)
    pod = _bound_pod(f, "llama-cpp-chat-0", "assist", node, "ghcr.io/ggml-org/llama.cpp:server-cuda-b4719",
                     {"state": {"running": {"startedAt": "2026-11-29T09:41:12Z"}}})  # fmt: skip
    pod["status"]["containerStatuses"][0]["restartCount"] = 0
    f.logs["assist/llama-cpp-chat-0/main"] = (
        "ggml_cuda_init: failed to initialize CUDA: unknown error\n"
        "load_backend: loaded CUDA backend from /app/libggml-cuda.so\n"
        "load_backend: loaded CPU backend from /app/libggml-cpu-sapphirerapids.so\n"
        "build: 4719 (a2f8b2f5) with cc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0 for x86_64-linux-gnu\n"
        "system info: n_threads = 48, n_threads_batch = 48, total_threads = 96\n"
        "main: HTTP server is listening, hostname: 0.0.0.0, port: 8080, http threads: 95\n"
        "main: loading model\n"
        "llama_model_load_from_file_impl: using device CPU - 0 MiB free\n"
        "load_tensors: loading model tensors, this can take a while... (mmap = true)\n"
        "load_tensors:   CPU_Mapped model buffer size =  4685.30 MiB\n"
        "srv    load_model: the slot context (8192) exceeds the training context of the model (4096) - capping\n"
        "main: model loaded\n"
        "main: server is listening on http://0.0.0.0:8080 - starting the main loop\n"
        "slot launch_slot_: id  0 | task 0 | processing task\n"
        "prompt eval time =  71840.12 ms /  1893 tokens (   37.95 ms per token,    26.35 tokens per second)\n"
    )
    return f, {
        "target": "assist/llama-cpp-chat-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_APP_SEES_NO_GPU",
        "codes": ["L1_POD_SCHEDULED", "L2_APP_SEES_NO_GPU"],
        "absent": ["L2_CONTAINER_START_FAILED", "L3_DRIVER_BUILD_FAILED", "L4_GPU_OOM_IN_LOGS", "L5_XID",
                   "L5_DEVICE_UNHEALTHY"],
    }  # fmt: skip


def cdi_spec_missing_after_reboot_runtime_cdi_mode() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe7-toolkit-cdi-mode-spec-missing-after-reboot-gpu-all-a100-20-nodes",
        "Built on the samples of containerd's CDI refusal (`could not apply required modification to OCI specification: "
        "error modifying OCI spec: failed to inject CDI devices: unresolvable CDI devices nvidia.com/gpu=all`, "
        "nvidia-container-toolkit's cdi mode and its nvidia-cdi-refresh / cdi-generator unit ordering in the "
        "public write-ups of the error): a100-train-02 runs a host driver with the toolkit's runtime in cdi mode; "
        "after a reboot the unit that writes /var/run/cdi/nvidia.yaml ran before the driver loaded and wrote "
        "nothing, so every GPU container on the node is refused. The driver itself is fine.",
        a100=6, h100=6, l40s=5,
    )  # fmt: skip
    node = "a100-train-02"
    f.node(node)["metadata"]["labels"]["nvidia.com/gpu.deploy.driver"] = "pre-installed"
    f.gpu_series(node, "a100", 8, fb_used=0.0)
    message = (
        "failed to create containerd task: failed to create shim task: OCI runtime create failed: could not apply "
        "required modification to OCI specification: error modifying OCI spec: failed to inject CDI devices: "
        "unresolvable CDI devices nvidia.com/gpu=all: unknown"
    )
    pod = _bound_pod(
        f, "sd-finetune-0", "genai", node, "nvcr.io/nvidia/pytorch:25.01-py3", _start_error(message), gpus=4
    )
    f.event_for_pod(pod, "Failed", f"Error: {message}")
    return f, {
        "target": "genai/sd-finetune-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L2_CONTAINER_START_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED"],
        "absent": ["L2_NO_RUNTIME_NVIDIA", "L2_APP_SEES_NO_GPU", "L3_DRIVER_TOO_OLD", "L3_DRIVER_BUILD_FAILED",
                   "L3_PREINSTALLED_DRIVER_CONFLICT", "L5_XID"],
    }  # fmt: skip


# --- layer 3 -------------------------------------------------------------------------------------


def fabric_manager_version_mismatch() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe7-v25-3-driver-580-126-fabric-manager-590-mismatch-hgx-h100-22-nodes",
        "Built on the samples of NVIDIA/gpu-driver-container issue 735 (the 580.126.09 image ships nv-fabricmanager "
        "590.48.01: `fabric manager NVIDIA GPU driver interface version 590.48.01 don't match with driver version "
        "580.126.09`), gpu-operator issue 544 and dstackai/dstack issue 2348 (PyTorch's `Error 802: system not yet "
        "initialized`): h100-infer-02, an HGX H100 with NVSwitches, was moved to the new driver image; the "
        "driver loads but the fabric is never initialised, the validator's cuda-validation fails its vectorAdd and "
        "the training job sees no GPU. Elsewhere: rising remapped rows on h100-infer-05, a lost L40S GPU.",
    )  # fmt: skip
    node = "h100-infer-02"
    f.gpu_series(node, "h100", 8, fb_used=0.0)
    drv = "nvidia-driver-daemonset-9fz2m"
    _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
             [("nvidia-driver-ctr", "nvcr.io/nvidia/driver:580.126.09-ubuntu22.04")],
             [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0")])  # fmt: skip
    f.logs[f"{NS}/{drv}/nvidia-driver-ctr"] = (
        "Loading NVIDIA driver kernel modules...\n"
        "+ modprobe nvidia\n"
        "+ modprobe nvidia-uvm\n"
        "+ modprobe nvidia-modeset\n"
        "+ set +o xtrace -o nounset\n"
        "Starting NVIDIA persistence daemon...\n"
        "Starting NVIDIA fabric manager daemon...\n"
        "fabric manager NVIDIA GPU driver interface version 590.48.01 don't match with driver version 580.126.09. "
        "Please update with matching NVIDIA driver package.\n"
        "Mounting NVIDIA driver rootfs...\n"
        "Done, now waiting for signal\n"
    )
    name = _validator(f, node, "v25.3.2", "cuda-validation", "h7m2d")
    f.logs[f"{NS}/{name}/cuda-validation#previous"] = (
        'time="2026-11-29T10:08:12Z" level=info msg="pod nvidia-cuda-validator-x2vqk is curently in Failed phase"\n'
    )
    f.logs[f"{NS}/nvidia-cuda-validator-x2vqk/cuda-validation"] = (
        "Failed to allocate device vector A (error code system not yet initialized)!\n"
        "[Vector addition of 50000 elements]\n"
    )
    f.objects.append({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "nvidia-cuda-validator-x2vqk", "namespace": NS, "uid": "5c1f0e2a-6b7d-4e8f-9a0b-1c2d3e4f5a6b",
                     "labels": {"app": "nvidia-cuda-validator"}, "creationTimestamp": "2026-11-29T10:07:40Z"},
        "spec": {"nodeName": node, "restartPolicy": "OnFailure",
                 "containers": [{"name": "nvidia-cuda-validator", "image": VAL.format(v="v25.3.2")}],
                 "initContainers": [{"name": "cuda-validation", "image": VAL.format(v="v25.3.2")}]},
        "status": {"phase": "Failed",
                   "initContainerStatuses": [{"name": "cuda-validation", "image": VAL.format(v="v25.3.2"), "ready": False,
                                              "restartCount": 0,
                                              "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}],
                   "containerStatuses": [{"name": "nvidia-cuda-validator", "image": VAL.format(v="v25.3.2"),
                                          "ready": False, "restartCount": 0,
                                          "state": {"waiting": {"reason": "PodInitializing"}}}]},
    })  # fmt: skip
    pod = _restarted(f, "ddp-llama-8b-0", "research", node, "nvcr.io/nvidia/pytorch:25.09-py3", 8)
    pod["status"]["containerStatuses"][0]["restartCount"] = 4
    f.logs["research/ddp-llama-8b-0/main#previous"] = (
        "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:182: UserWarning: CUDA initialization: "
        "Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
        "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered "
        "internally at /opt/pytorch/pytorch/c10/cuda/CUDAFunctions.cpp:109.)\n"
        "  return torch._C._cuda_getDeviceCount() > 0\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/train.py", line 41, in <module>\n'
        "    torch.cuda.set_device(local_rank)\n"
        "RuntimeError: No CUDA GPUs are available\n"
    )
    return f, {
        "target": "research/ddp-llama-8b-0",
        "walk": [1, 2, 3],
        "verdict": "L3_FABRIC_MANAGER",
        "codes": ["L1_POD_SCHEDULED", "L2_VALIDATOR_STUCK", "L2_APP_SEES_NO_GPU", "L3_FABRIC_MANAGER"],
        "absent": ["L3_DRIVER_BUILD_FAILED", "L3_DRIVER_TOO_OLD", "L5_REMAPPED_ROWS_RISING", "L5_XID"],
    }  # fmt: skip


def pcie_h100_persistenced_nvswitch_lines_healthy() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe7-pcie-h100-driver-ctr-persistenced-nvswitch-ls-lines-healthy-20-nodes",
        "Built on the samples of the driver container's start-up on a machine without NVSwitches (gpu-driver-container "
        "nvidia-driver: `ls: cannot access '/proc/driver/nvidia-nvswitch/devices/*': No such file or directory` when "
        "it looks for a fabric to manage) and nvidia-persistenced's `nvidia-persistenced failed to initialize. Check "
        "syslog for more details.` on its first try: a PCIe H100 node whose driver pod is Ready and whose training pod "
        "runs fine. Nothing is wrong on the pod's node; elsewhere: rising rows, a lost L40S GPU, an unregistered "
        "plugin.",
        a100=5, h100=7, l40s=6,
    )  # fmt: skip
    node = "h100-infer-06"
    f.gpu_series(node, "h100", 8, fb_used=41203.0)
    drv = "nvidia-driver-daemonset-q8r3t"
    _operand(f, drv, node, {"app": "nvidia-driver-daemonset", "app.kubernetes.io/component": "nvidia-driver"},
             [("nvidia-driver-ctr", "nvcr.io/nvidia/driver:570.158.01-ubuntu22.04")],
             [("k8s-driver-manager", "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0")])  # fmt: skip
    f.logs[f"{NS}/{drv}/nvidia-driver-ctr"] = (
        "Starting installation of NVIDIA driver version 570.158.01 for Linux kernel version 5.15.0-134-generic\n"
        "Installing NVIDIA driver kernel modules...\n"
        "Loading NVIDIA driver kernel modules...\n"
        "+ modprobe nvidia\n"
        "+ modprobe nvidia-uvm\n"
        "+ modprobe nvidia-modeset\n"
        "+ set +o xtrace -o nounset\n"
        "Starting NVIDIA persistence daemon...\n"
        "nvidia-persistenced failed to initialize. Check syslog for more details.\n"
        "ls: cannot access '/proc/driver/nvidia-nvswitch/devices/*': No such file or directory\n"
        "Mounting NVIDIA driver rootfs...\n"
        "Done, now waiting for signal\n"
    )
    _validator(f, node, "v25.3.2", "", "t6k2w")
    pod = _bound_pod(f, "ft-mistral-7b-0", "research", node, "nvcr.io/nvidia/pytorch:25.01-py3",
                     {"state": {"running": {"startedAt": "2026-11-29T09:12:40Z"}}}, gpus=8)  # fmt: skip
    pod["status"]["containerStatuses"][0]["restartCount"] = 0
    f.logs["research/ft-mistral-7b-0/main"] = (
        "[rank0]: step 4200/20000 loss=1.284 lr=1.9e-05 tokens/s=48211\n"
        "[rank0]: step 4210/20000 loss=1.279 lr=1.9e-05 tokens/s=48307\n"
    )
    return f, {
        "target": "research/ft-mistral-7b-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L2_OK", "L3_OK", "L4_OK", "L5_OK"],
        "absent": ["L3_DRIVER_BUILD_FAILED", "L3_FABRIC_MANAGER", "L2_OPERAND_FAILING", "L2_VALIDATOR_STUCK",
                   "L5_REMAPPED_ROWS_RISING", "L5_XID"],
    }  # fmt: skip


# --- layer 4 -------------------------------------------------------------------------------------


def vllm_torch_oom_previous_only() -> tuple[Fleet, Expect]:
    f = _fleet(
        "probe7-vllm-torch-outofmemoryerror-previous-log-only-h100-21-nodes",
        "Built on the samples of vllm-project/vllm issues about CUDA-graph capture running out of memory "
        "(`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate … GiB. GPU 0 has a total capacity of "
        "79.19 GiB of which … is free`): a vLLM server on h100-infer-03 with gpu_memory_utilization 0.97 died "
        "capturing CUDA graphs; the kubelet restarted it and the new container is loading the model again, its "
        "log clean so far. Only `kubectl logs --previous` shows the OOM. The framebuffer is at 97 % again: the "
        "new server's own reservation. vLLM's metrics are not scraped.",
    )  # fmt: skip
    node = "h100-infer-03"
    f.gpu_series(node, "h100", 1, fb_used=79112.0)
    pod = _restarted(f, "vllm-qwen-72b-0", "serving", node, "vllm/vllm-openai:v0.10.1.1", 1)
    pod["spec"]["containers"][0]["args"] = ["--model", "Qwen/Qwen2.5-72B-Instruct-AWQ",
                                            "--gpu-memory-utilization", "0.97", "--max-model-len", "32768"]  # fmt: skip
    f.logs["serving/vllm-qwen-72b-0/main"] = (
        "INFO 11-29 10:07:20 [__init__.py:241] Automatically detected platform cuda.\n"
        "INFO 11-29 10:07:24 [api_server.py:1805] vLLM API server version 0.10.1.1\n"
        "INFO 11-29 10:07:41 [core.py:75] Initializing a V1 LLM engine (v0.10.1.1) with config: "
        "model='Qwen/Qwen2.5-72B-Instruct-AWQ', quantization=awq_marlin, max_seq_len=32768\n"
        "INFO 11-29 10:07:52 [gpu_model_runner.py:1953] Starting to load model Qwen/Qwen2.5-72B-Instruct-AWQ...\n"
    )
    f.logs["serving/vllm-qwen-72b-0/main#previous"] = (
        "INFO 11-29 09:33:10 [gpu_model_runner.py:2007] Model loading took 38.7412 GiB and 41.216839 seconds\n"
        "INFO 11-29 09:33:31 [gpu_worker.py:276] Available KV cache memory: 34.12 GiB\n"
        "INFO 11-29 09:33:31 [kv_cache_utils.py:849] GPU KV cache size: 111,792 tokens\n"
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  73%|███████▎  | 49/67 [00:11<00:04,  4.31it/s]\n"
        "ERROR 11-29 10:06:57 [core.py:700] EngineCore failed to start.\n"
        "ERROR 11-29 10:06:57 [core.py:700] Traceback (most recent call last):\n"
        'ERROR 11-29 10:06:57 [core.py:700]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/'
        'gpu_model_runner.py", line 2627, in capture_model\n'
        "ERROR 11-29 10:06:57 [core.py:700] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. "
        "GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this "
        "process has 78.12 GiB memory in use. Of the allocated memory 74.35 GiB is allocated by PyTorch, and "
        "2.31 GiB is reserved by PyTorch but unallocated.\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    return f, {
        "target": "serving/vllm-qwen-72b-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L4_GPU_OOM_IN_LOGS",
        "codes": ["L1_POD_SCHEDULED", "L4_GPU_OOM_IN_LOGS"],
        "absent": ["L4_OOMKILLED", "L4_FB_SATURATED", "L4_PREEMPTIONS", "L2_APP_SEES_NO_GPU", "L5_XID"],
    }  # fmt: skip


# --- DRA -----------------------------------------------------------------------------------------

EXTENDED = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"


def dra_extended_resource_h100_exhausted() -> None:
    f = DraFleet(
        "probe7-dra-extended-resource-deviceclass-gpu-h100-exhausted-sick-a100-19-nodes",
        "Built on the samples of KEP-5004 (DRA extended resources, Kubernetes 1.34: a pod asks for "
        f"`{EXTENDED}: 4` in its limits, no resourceClaims; the scheduler makes the claim when it places the "
        "pod) and the scheduler's DynamicResources messages: a batch job written for the device plugin was moved "
        "to a DRA-only cluster (NVIDIA DRA driver v25.8.1, no device plugin, no `nvidia.com/gpu` anywhere) with "
        "`nodeSelector: pool=h100`. The four H100 nodes are full (other claims hold all 32 GPUs). The A100 and "
        "L40S pools carry a lost GPU, an Xid 79 taint and a crash-looping driver pod.",
        now="2026-11-30T11:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 6}, {"a100": 8, "l40s": 4})
    for i in range(1, 5):
        node = f"h100-{i:02d}"
        f.gpu_node(node, "h100")
        f.workload("research", f"moe-train-{i}", node, [f"gpu-{g}" for g in range(8)])
    scheduler = _SCHED.format(n=19, rest="14 node(s) didn't match Pod's node affinity/selector, 4 cannot allocate "
                              "all claims")  # fmt: skip
    pod = f._pod("batch-embed-0", "research", None, {"app": "batch-embed"},
                 [("main", "nvcr.io/nvidia/pytorch:25.09-py3", {"state": "ContainerCreating"})],
                 phase="Pending", created="2026-11-30T10:20:00Z")  # fmt: skip
    pod["spec"].pop("nodeName")
    pod["spec"]["nodeSelector"] = {"pool": "h100"}
    pod["spec"]["containers"][0]["resources"] = {"limits": {EXTENDED: "4"}, "requests": {EXTENDED: "4"}}
    pod["status"] = {"phase": "Pending", "qosClass": "BestEffort",
                     "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                     "message": scheduler, "lastTransitionTime": "2026-11-30T10:20:00Z"}]}  # fmt: skip
    f.event("research", "batch-embed-0", "FailedScheduling", scheduler, count=9, first="2026-11-30T10:20:00Z",
            last=f.now, component="default-scheduler")  # fmt: skip
    f.write(HERE, {
        "target": "research/batch-embed-0", "walk": [1], "verdict": "L1_DRA_CLAIM_PENDING",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_DEVICES_EXHAUSTED"],
        "absent": ["L1_NO_GPU_ADVERTISED", "L1_GPU_NODE_NOT_ADVERTISING", "L1_RESOURCE_MISMATCH", "L1_GPU_EXHAUSTED",
                   "L1_DRA_DEVICE_TAINTED", "L1_DRA_NO_DEVICES", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


def dra_gpucluster_plugin_nvml_library_not_found() -> None:
    f = DraFleet(
        "probe7-dra-gpucluster-kubelet-plugin-nvml-library-not-found-new-h200-18-nodes",
        "Built on the samples of kubernetes-sigs/dra-driver-nvidia-gpu issue 1272 (the operator-managed kubelet plugin in "
        "namespace gpu-operator, hostDriverRoot `/`, crash-looping on `Error: error creating driver: error enumerating "
        "all possible devices: error enumerating GPUs and MIG devices: error initializing NVML: "
        "ERROR_LIBRARY_NOT_FOUND` because a stray directory named libnvidia-ml.so.1 shadows the library): a GPU "
        "Operator v25.10.1 `GPUCluster` runs the DRA driver (pods labelled `app.kubernetes.io/name=nvidia-dra-driver`, "
        "no device plugin, no GFD) on hosts with a pre-installed driver. A new H200 node's plugin never starts, so "
        "it publishes no ResourceSlice, and the pending fine-tune finds the other H200s full.",
        now="2026-11-30T12:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 6}, {"a100": 8, "l40s": 4})
    for i in range(1, 4):
        f.gpu_node(f"h200-{i:02d}", "h200")
        f.workload("llm", f"grpo-run-{i}", f"h200-{i:02d}", [f"gpu-{g}" for g in range(8)])
    node = "h200-04"
    f.gpu_node(node, "h200", publishes=False, plugin="CrashLoopBackOff", plugin_restarts=11,
               boot="2026-11-30T11:10:12Z")  # fmt: skip
    for obj in f.objects:  # GPUCluster: the operator runs the DRA driver in its namespace, under its own name
        meta = obj["metadata"]
        if obj["kind"] == "Pod" and meta.get("namespace") == drafleet.DRA_NS:
            meta["namespace"] = drafleet.OPERATOR_NS
            labels = meta["labels"]
            labels["app.kubernetes.io/name"] = "nvidia-dra-driver"
            labels["app.kubernetes.io/managed-by"] = "gpu-operator"
            labels.pop("app.kubernetes.io/instance", None)
        if obj["kind"] == "Node":
            meta["labels"]["nvidia.com/gpu.deploy.driver"] = "pre-installed"
    f.objects = [o for o in f.objects if not (o["kind"] == "Pod" and o["metadata"]["name"].startswith(
        "nvidia-driver-daemonset-"))]  # fmt: skip
    f.objects.append({"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
                      "metadata": {"name": "gpu-cluster", "creationTimestamp": "2026-11-02T09:40:00Z"},
                      "spec": {"driver": {"enabled": False}, "toolkit": {"enabled": True},
                               "draDriver": {"enabled": True, "gpus": {"enabled": True}}}})  # fmt: skip
    crash = (
        'I1130 11:58:21.402113       1 main.go:241] "Starting DRA kubelet plugin" driver="gpu.nvidia.com"\n'
        'Feature gates: map[string]bool{"AllAlpha":false, "AllBeta":false, "ContextualLogging":true, '
        '"MPSSupport":true, "TimeSlicingSettings":false}\n'
        f'Flags: (*main.Flags)({{\n  nodeName: (string) "{node}",\n  namespace: (string) "gpu-operator",\n'
        '  cdiRoot: (string) "/var/run/cdi",\n  containerDriverRoot: (string) "/driver-root",\n'
        '  hostDriverRoot: (string) "/",\n})\n'
        "I1130 11:58:21.530217       1 main.go:187] shutdown\n"
        "Error: error creating driver: error enumerating all possible devices: error enumerating GPUs and MIG "
        "devices: error initializing NVML: ERROR_LIBRARY_NOT_FOUND\n"
    )
    plugin = f.plugins[node]
    for container in ("gpus", "compute-domains"):
        f.logs[f"{drafleet.OPERATOR_NS}/{plugin}/{container}#previous"] = crash
    f.pending("llm", "grpo-run-4", template="h200-x8",
              selector="device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H200'", count=8,
              node_selector={"pool": "h200"},
              scheduler=_SCHED.format(n=18, rest="13 node(s) didn't match Pod's node affinity/selector, 4 cannot "
                                      "allocate all claims"), created="2026-11-30T11:30:00Z")  # fmt: skip
    f.write(HERE, {
        "target": "llm/grpo-run-4", "walk": [1, 2, 3, 4, 5], "verdict": "L1_DRA_NO_DEVICES",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_NO_DEVICES", "L2_OPERAND_FAILING"],
        "absent": ["L1_DRA_DEVICE_TAINTED", "L1_NO_GPU_ADVERTISED", "L2_OPERATOR_NOT_FOUND", "L2_WAITING_FOR_DRIVER",
                   "L3_PREINSTALLED_DRIVER_CONFLICT", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


XID79 = [
    {"effect": "NoExecute", "key": "gpu.nvidia.com/xid", "value": "79", "timeAdded": "2026-11-30T13:12:09Z"}
]


def _to_v1beta2(obj: dict[str, Any]) -> dict[str, Any]:
    """A resource.k8s.io/v1 object as a 1.33 API server serves it at v1beta2: the same shapes (flat
    devices, `exactly`), without 1.34's DeviceClass `extendedResourceName`."""
    if obj.get("apiVersion", "").startswith("resource.k8s.io/"):
        obj["apiVersion"] = "resource.k8s.io/v1beta2"
        if obj["kind"] == "DeviceClass":
            obj["spec"].pop("extendedResourceName", None)
    return obj


def dra_v1beta2_xid79_taint_on_only_free_h100() -> None:
    f = DraFleet(
        "probe7-dra-v1beta2-xid79-taint-only-free-h100-others-full-17-nodes",
        "Built on the samples of the DRA driver's device health taints (`gpu.nvidia.com/xid=79`, NoExecute; Kubernetes "
        "1.33 with the DRADeviceTaints gate, objects served at resource.k8s.io/v1beta2) and the scheduler's `cannot "
        "allocate all claims`: three H100 nodes are full; on h100-04 one GPU fell off the bus (Xid 79) and its taint "
        "leaves 7 GPUs for an 8-GPU claim. The A100 and L40S pools carry their own lost GPU, Xid 79 taint and "
        "crash-looping driver pod: noise.",
        now="2026-11-30T14:00:00Z",
    )
    f.control_plane()
    _sick_pools(f, {"a100": 6, "l40s": 6}, {"a100": 8, "l40s": 4})
    for i in range(1, 4):
        f.gpu_node(f"h100-{i:02d}", "h100")
        f.workload("research", f"pretrain-{i}", f"h100-{i:02d}", [f"gpu-{g}" for g in range(8)])
    f.gpu_node("h100-04", "h100", taints={5: XID79})
    f.pending("research", "pretrain-4", template="h100-x8",
              selector="device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", count=8,
              node_selector={"pool": "h100"},
              scheduler=_SCHED.format(n=17, rest="12 node(s) didn't match Pod's node affinity/selector, 4 cannot "
                                      "allocate all claims"), created="2026-11-30T13:20:00Z")  # fmt: skip
    for node in [o for o in f.objects if o["kind"] == "Node"]:
        node["status"]["nodeInfo"]["kubeletVersion"] = "v1.33.5"
    f.objects = [_to_v1beta2(o) for o in f.objects]
    # Not in the folder's top level: the shared scenario-format check lists v1 and v1beta1 DRA kinds
    # only; tests/incidents/test_probe7_incidents.py walks it.
    f.write(HERE / "v1beta2", {
        "target": "research/pretrain-4", "walk": [1, 5], "verdict": "L5_XID",
        "codes": ["L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_DEVICE_TAINTED", "L5_XID"],
        "absent": ["L1_DRA_SELECTOR_UNSATISFIED", "L1_DRA_NO_DEVICES", "L5_DEVICE_UNHEALTHY"],
    })  # fmt: skip


RECIPES: list[Recipe] = [
    driver_ctr_host_oomkilled,
    llama_cpp_cuda_unknown_error_uvm,
    cdi_spec_missing_after_reboot_runtime_cdi_mode,
    fabric_manager_version_mismatch,
    pcie_h100_persistenced_nvswitch_lines_healthy,
    vllm_torch_oom_previous_only,
]
DRA = [
    dra_extended_resource_h100_exhausted,
    dra_gpucluster_plugin_nvml_library_not_found,
    dra_v1beta2_xid79_taint_on_only_free_h100,
]


def main() -> None:
    write_recipes(RECIPES, HERE)
    for build in DRA:
        build()


if __name__ == "__main__":
    main()
