"""Issue 18's inference-server, layer 2 and layer 5 incidents: `python -m tests.incidents.servers.build`.

Production-shaped fleets (20 nodes: A100 `train`, H100 `infer`, L40S `viz` pools beside CPU nodes,
a lost GPU, rising rows and an unregistered plugin elsewhere) around real-world text: NVIDIA NIM,
SGLang (`--mem-fraction-static 0.9`, "KV cache pool is full. Retract requests."), vLLM started by a
ConfigMap's `start.sh`, TGI's queue, a runc mount failure of the CDI spec's `libcuda.so.570…` after a
driver upgrade, the kubelet's allocatedResourcesStatus (KEP-4680), a pending row remap, an exporter
restart that relabels the last-Xid gauge, and the operator's device plugin without a validator.
Each `x-expect` comes from spec/findings.md, written before gpubot ran on it (README.md beside
this file names the sources).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import (
    MODELS,
    NS,
    Fleet,
    Recipe,
    mixed_pools,
    noise_in_viz_and_infer,
    uuid_of,
    write_recipes,
)
from tests.incidents.probe2.build import _bound_pod
from tests.incidents.probe4.build import _start_error

HERE = Path(__file__).resolve().parent
Expect = dict[str, Any]
VAL = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2"
RUNNING = {"state": {"running": {"startedAt": "2026-11-29T08:14:02Z"}}}
POLICY = {
    "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
    "metadata": {"name": "cluster-policy", "creationTimestamp": "2026-09-30T10:00:00Z", "generation": 3,
                 "uid": "5b1d7e0c-3f5a-4a8e-9c51-7d2b9e1f0a42"},
    # The hosts carry the driver (cloud GPU images): the operator runs no driver pods here.
    "spec": {"driver": {"enabled": False}, "toolkit": {"enabled": True},
             "devicePlugin": {"enabled": True}, "validator": {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}}},
    "status": {"state": "ready", "namespace": NS,
               "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                               "lastTransitionTime": "2026-11-29T09:00:00Z"}]},
}  # fmt: skip


def _fleet(name: str, description: str) -> Fleet:
    f = mixed_pools(name, description, a100=6, h100=7, l40s=5, cpu=2)
    noise_in_viz_and_infer(f)
    f.objects.append(POLICY)
    return f


def _server(
    f: Fleet,
    name: str,
    ns: str,
    node: str,
    image: str,
    *,
    gpus: int = 1,
    labels: dict[str, str] | None = None,
    **container: Any,
) -> dict[str, Any]:
    """A running serving pod on `node`; `container` adds command, args, volumeMounts … to its one container."""
    pod = _bound_pod(f, name, ns, node, image, RUNNING, gpus=gpus)
    pod["status"]["containerStatuses"][0]["restartCount"] = 0
    pod["spec"]["containers"][0].update(container)
    pod["metadata"]["labels"].update(labels or {})
    return pod


def _gpus(f: Fleet, node: str, model: str, used: dict[int, tuple[float, tuple[str, str] | None]]) -> None:
    """The node's 8 GPUs' framebuffer (MiB used, and the pod the exporter names for it)."""
    total = MODELS[model][2]
    for gpu in range(8):
        mib, pod = used.get(gpu, (0.0, None))
        base = {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "device": f"nvidia{gpu}", "modelName": MODELS[model][1],
                "Hostname": node, "DCGM_FI_DRIVER_VERSION": "570.158.01"}  # fmt: skip
        if pod:
            base.update({"namespace": pod[0], "pod": pod[1], "container": "main"})
        for metric, value in (("DCGM_FI_DEV_FB_USED", mib), ("DCGM_FI_DEV_FB_FREE", total - mib),
                              ("DCGM_FI_DEV_XID_ERRORS", 0)):  # fmt: skip
            f.series(metric, base, [[-3600, value], [0, value]])


def _every_minute(values: list[float]) -> list[list[float]]:  # int times, float values
    """Samples from ten minutes ago to now, one a minute (the server's scrape), oldest first."""
    return [[-60 * (len(values) - 1 - i), v] for i, v in enumerate(values)]


def _server_series(f: Fleet, metric: str, pod: tuple[str, str], values: list[float], **labels: str) -> None:
    f.series(metric, {"namespace": pod[0], "pod": pod[1], "container": "main", "job": f"{pod[0]}/{pod[1]}",
                      "instance": "10.244.7.41:30000", **labels}, _every_minute(values))  # fmt: skip


# --- layer 4: inference servers ---------------------------------------------------------------


def nim_reserved_no_metrics() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-nim-llama-3-1-8b-framebuffer-reserved-unscraped-h100-20-nodes",
        "Built on the samples of NVIDIA NIM for LLMs' documented deployment (image nvcr.io/nim/meta/llama-3.1-8b-instruct, its "
        "engine reserving ~90 % of the GPU at start) and sample 34's framebuffer numbers: a NIM on h100-infer-02 holds "
        "97 % of its H100. The NIM's metrics endpoint is not scraped, so no overload series exists for it. Elsewhere: "
        "a lost GPU, rising rows, an unregistered plugin.",
    )  # fmt: skip
    node, ref = "h100-infer-02", ("nim", "llama-3-1-8b-instruct-0")
    _server(f, ref[1], ref[0], node, "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4",
            env=[{"name": "NIM_SERVED_MODEL_NAME", "value": "meta/llama-3.1-8b-instruct"}])  # fmt: skip
    _gpus(f, node, "h100", {0: (79120.0, ref)})
    return f, {
        "target": "nim/llama-3-1-8b-instruct-0", "walk": [1, 2, 3, 4, 5], "verdict": "L4_UNKNOWN",
        "codes": ["L1_POD_SCHEDULED", "L2_OK", "L4_FB_RESERVED_NORMAL", "L4_UNKNOWN", "L5_OK"],
        "absent": ["L4_FB_SATURATED", "L4_PREEMPTIONS", "L4_RETRACTIONS", "L4_QUEUE_BACKLOG"],
    }  # fmt: skip


def sglang_mem_fraction_static() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-sglang-mem-fraction-static-0-9-framebuffer-full-quiet-h100-20-nodes",
        "Built on the samples of sgl-project/sglang's docs (hyperparameter tuning: `--mem-fraction-static` is the share of GPU memory "
        "for weights and the KV cache pool; production metrics: sglang:num_queue_reqs, sglang:num_retracted_reqs) "
        "and its launch_server command line: lmsysorg/sglang serves Llama 3.1 70B with --tp 2 --mem-fraction-static 0.9 "
        "on two H100s of h100-infer-03, both at 96 %. Its queue empties and it retracts nothing.",
    )  # fmt: skip
    node, ref = "h100-infer-03", ("serving", "sglang-llama-70b-0")
    _server(f, ref[1], ref[0], node, "lmsysorg/sglang:v0.4.6.post5-cu124", gpus=2,
            command=["python3", "-m", "sglang.launch_server"],
            args=["--model-path", "meta-llama/Llama-3.1-70B-Instruct", "--tp", "2", "--mem-fraction-static", "0.9",
                  "--host", "0.0.0.0", "--port", "30000", "--enable-metrics"])  # fmt: skip
    _gpus(f, node, "h100", {0: (78460.0, ref), 1: (78410.0, ref)})
    model = {"model_name": "meta-llama/Llama-3.1-70B-Instruct", "tp_rank": "0"}
    _server_series(f, "sglang:num_queue_reqs", ref, [3, 0, 1, 0, 0, 2, 0, 0, 1, 0, 0], **model)
    _server_series(f, "sglang:num_retracted_reqs", ref, [0] * 11, **model)
    _server_series(f, "sglang:num_running_reqs", ref, [41, 44, 39, 40, 46, 43, 38, 41, 45, 42, 40], **model)
    return f, {
        "target": "serving/sglang-llama-70b-0", "walk": [1, 2, 3, 4, 5], "verdict": "L4_FB_RESERVED_NORMAL",
        "codes": ["L1_POD_SCHEDULED", "L2_OK", "L4_FB_RESERVED_NORMAL", "L5_OK"],
        "absent": ["L4_FB_SATURATED", "L4_RETRACTIONS", "L4_QUEUE_BACKLOG", "L4_UNKNOWN"],
    }  # fmt: skip


START_SH = """\
#!/bin/sh
# Rendered by the platform's serving chart: one entry point for every model of the catalogue.
set -eu
MODEL="${MODEL_ID:-Qwen/Qwen2.5-32B-Instruct}"
exec python3 -m vllm.entrypoints.openai.api_server \\
  --model "$MODEL" --served-model-name qwen2.5-32b \\
  --tensor-parallel-size 1 --max-model-len 32768 --gpu-memory-utilization 0.92 \\
  --port 8000
"""


def vllm_sh_c_start_sh() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-vllm-sh-c-start-sh-from-configmap-framebuffer-reserved-a100-20-nodes",
        "Built on the samples of vLLM's OpenAI server command line (`python3 -m vllm.entrypoints.openai.api_server … "
        "--gpu-memory-utilization 0.92`) and the common chart shape that starts it from a ConfigMap script: the "
        "container runs `sh -c /opt/serve/start.sh` from an in-house base image, the script comes from ConfigMap "
        "qwen-serve-scripts mounted at /opt/serve. Its A100 is at 94 %+; the vLLM metrics are not scraped.",
    )  # fmt: skip
    node, ref = "a100-train-04", ("assist", "qwen-32b-serve-0")
    _server(f, ref[1], ref[0], node, "registry.corp.example/ml/serving-base:2025.11.3",
            command=["sh", "-c"], args=["/opt/serve/start.sh"],
            volumeMounts=[{"name": "serve-scripts", "mountPath": "/opt/serve", "readOnly": True}])  # fmt: skip
    pod = next(o for o in f.objects if o["kind"] == "Pod" and o["metadata"]["name"] == ref[1])
    pod["spec"]["volumes"] = [
        {"name": "serve-scripts", "configMap": {"name": "qwen-serve-scripts", "defaultMode": 493}}
    ]
    f.objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "qwen-serve-scripts", "namespace": ref[0], "uid": "c0a8f3b2-7d41-4e6a-9b1c-2f5e8d7a6b34",
                                   "creationTimestamp": "2026-11-20T12:00:00Z"},
                      "data": {"start.sh": START_SH}})  # fmt: skip
    _gpus(f, node, "a100", {0: (78120.0, ref)})
    return f, {
        "target": "assist/qwen-32b-serve-0", "walk": [1, 2, 3, 4, 5], "verdict": "L4_UNKNOWN",
        "codes": ["L1_POD_SCHEDULED", "L2_OK", "L4_FB_RESERVED_NORMAL", "L4_UNKNOWN", "L5_OK"],
        "absent": ["L4_FB_SATURATED", "L4_PREEMPTIONS"],
    }  # fmt: skip


def sglang_retractions() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-sglang-kv-cache-pool-full-retractions-h100-20-nodes",
        "Built on the samples of sgl-project/sglang's scheduler log line `KV cache pool is full. Retract requests. #retracted_reqs: 1, "
        "#new_token_ratio: 0.9998 -> 1.0000` (docs: hyperparameter tuning) and its counter "
        "sglang:num_retracted_requests_total: a DeepSeek-R1-Distill SGLang on h100-infer-04 started with "
        "--mem-fraction-static 0.7 retracts running requests every few seconds under a long-context load.",
    )  # fmt: skip
    node, ref = "h100-infer-04", ("serving", "sglang-r1-distill-0")
    _server(f, ref[1], ref[0], node, "lmsysorg/sglang:v0.4.6.post5-cu124",
            command=["python3", "-m", "sglang.launch_server"],
            args=["--model-path", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "--mem-fraction-static", "0.7",
                  "--context-length", "65536", "--enable-metrics"])  # fmt: skip
    f.logs[f"{ref[0]}/{ref[1]}/main"] = (
        "[2026-11-29 10:09:41 TP0] Decode batch. #running-req: 61, #token: 212208, token usage: 0.99, cuda graph: True, "
        "gen throughput (token/s): 1904.33, #queue-req: 14\n"
        "[2026-11-29 10:09:43 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: "
        "0.9998 -> 1.0000\n"
        "[2026-11-29 10:09:52 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: "
        "0.9801 -> 1.0000\n"
    )
    _gpus(f, node, "h100", {0: (57890.0, ref)})
    model = {"model_name": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "tp_rank": "0"}
    _server_series(f, "sglang:num_retracted_requests_total", ref,
                   [310, 322, 331, 345, 352, 361, 377, 386, 398, 405, 419], **model)  # fmt: skip
    _server_series(f, "sglang:num_queue_reqs", ref, [12, 9, 14, 11, 16, 13, 15, 10, 14, 12, 14], **model)
    return f, {
        "target": "serving/sglang-r1-distill-0", "walk": [1, 2, 3, 4, 5], "verdict": "L4_RETRACTIONS",
        "codes": ["L1_POD_SCHEDULED", "L4_RETRACTIONS"],
        "absent": ["L4_FB_SATURATED", "L4_FB_RESERVED_NORMAL", "L4_GPU_OOM_IN_LOGS", "L4_UNKNOWN"],
    }  # fmt: skip


def tgi_queue_backlog() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-tgi-queue-never-empties-framebuffer-reserved-l40s-20-nodes",
        "Built on the samples of huggingface/text-generation-inference's metrics (docs reference/metrics: tgi_queue_size, "
        "tgi_batch_current_size) and its launcher's --cuda-memory-fraction: a TGI 3.0 on l40s-viz-01 serving "
        "Mistral 7B holds 97 % of its L40S and its queue has not emptied for ten minutes during a product launch.",
    )  # fmt: skip
    node, ref = "l40s-viz-01", ("chat", "tgi-mistral-7b-0")
    _server(f, ref[1], ref[0], node, "ghcr.io/huggingface/text-generation-inference:3.0.1",
            args=["--model-id", "mistralai/Mistral-7B-Instruct-v0.3", "--max-batch-prefill-tokens", "8192",
                  "--cuda-memory-fraction", "0.97"])  # fmt: skip
    total = MODELS["l40s"][2]
    for gpu in range(4):
        base = {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "device": f"nvidia{gpu}", "modelName": MODELS["l40s"][1],
                "Hostname": node, "DCGM_FI_DRIVER_VERSION": "570.158.01"}  # fmt: skip
        mib = 44710.0 if gpu == 0 else 0.0
        if gpu == 0:
            base.update({"namespace": ref[0], "pod": ref[1], "container": "main"})
        for metric, value in (("DCGM_FI_DEV_FB_USED", mib), ("DCGM_FI_DEV_FB_FREE", total - mib),
                              ("DCGM_FI_DEV_XID_ERRORS", 0)):  # fmt: skip
            f.series(metric, base, [[-3600, value], [0, value]])
    _server_series(f, "tgi_queue_size", ref, [18, 22, 25, 21, 27, 30, 26, 24, 29, 31, 28])
    _server_series(f, "tgi_batch_current_size", ref, [32] * 11)
    return f, {
        "target": "chat/tgi-mistral-7b-0", "walk": [1, 2, 3, 4, 5], "verdict": "L4_QUEUE_BACKLOG",
        "codes": ["L1_POD_SCHEDULED", "L4_FB_RESERVED_NORMAL", "L4_QUEUE_BACKLOG"],
        "absent": ["L4_FB_SATURATED", "L4_UNKNOWN", "L4_RETRACTIONS"],
    }  # fmt: skip


# --- layer 2 ------------------------------------------------------------------------------------


LIBCUDA_MOUNT = (
    "failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "
    "unable to start container process: error during container init: error mounting "
    '"/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01" to rootfs at "/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01": '
    "mount /usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01:/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01 "
    "(via /proc/self/fd/6), flags: 0x5001: no such file or directory: unknown"
)


def cdi_libcuda_mount_after_upgrade() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-runc-cdi-libcuda-570-mount-after-driver-upgrade-a100-20-nodes",
        "Built on the samples of NVIDIA/nvidia-container-toolkit issue 434 (a CDI spec's mounts name libcuda.so.<driver version>) "
        "and runc's `error mounting \"…\" to rootfs at \"…\"` wrapping: a100-train-03's host driver was upgraded from "
        "570.158.01 to 570.172.08, the CDI spec in /var/run/cdi still lists the old libraries, and every new GPU "
        "container there fails to start with StartError (exit 128).",
    )  # fmt: skip
    node = "a100-train-03"
    for n in (o for o in f.objects if o["kind"] == "Node"):  # the fleet's upgrade went everywhere
        if "nvidia.com/cuda.driver-version.full" in n["metadata"]["labels"]:
            n["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "570.172.08"
    _bound_pod(
        f,
        "bert-finetune-7",
        "research",
        node,
        "nvcr.io/nvidia/pytorch:25.01-py3",
        _start_error(LIBCUDA_MOUNT),
    )
    _gpus(f, node, "a100", {})
    return f, {
        "target": "research/bert-finetune-7", "walk": [1, 2, 3, 4, 5], "verdict": "L2_CONTAINER_START_FAILED",
        "codes": ["L1_POD_SCHEDULED", "L2_CONTAINER_START_FAILED"],
        # Written first with L2_OK absent too: the node's operands are Ready and say so beside the
        # refusal (as in probe7's CDI incident); layer 2's status is the refusal's fault.
        "absent": ["L2_APP_SEES_NO_GPU", "L3_DRIVER_TOO_OLD"],
    }  # fmt: skip


def operator_plugin_without_validator() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-operator-device-plugin-no-validator-clusterpolicy-a100-20-nodes",
        "Built on the samples of the GPU Operator's ClusterPolicy and operand labels (gpu-operator assets, app=nvidia-device-plugin-"
        "daemonset): the operator runs (its pod, a ready ClusterPolicy) and manages the device plugin on every node, "
        "but no nvidia-operator-validator pod runs on a100-train-05, where a healthy training pod is asked about.",
    )  # fmt: skip
    node = "a100-train-05"
    _bound_pod(f, "llm-eval-3", "research", node, "nvcr.io/nvidia/pytorch:25.01-py3", RUNNING, gpus=8)
    _gpus(f, node, "a100", {g: (40960.0, ("research", "llm-eval-3")) for g in range(8)})
    return f, {
        "target": "research/llm-eval-3", "walk": [1, 2, 3, 4, 5], "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L2_OK"],
        "absent": ["L2_OPERATOR_NOT_FOUND", "L2_OPERAND_FAILING"],
    }  # fmt: skip


# --- layer 5 ------------------------------------------------------------------------------------


def allocated_resources_unhealthy() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-kubelet-allocated-resources-status-unhealthy-h100-20-nodes",
        "Built on the samples of KEP-4680 (kubernetes/enhancements: status.containerStatuses[].allocatedResourcesStatus, "
        "Kubernetes 1.31+ with ResourceHealthStatus) and the device plugin's health stream: the kubelet on "
        "h100-infer-06 reports one of the two GPUs allocated to a Triton pod Unhealthy and the other Unknown; the "
        "device plugin's log was rotated since it marked the GPU.",
    )  # fmt: skip
    node, ref = "h100-infer-06", ("serving", "triton-ensemble-0")
    pod = _server(f, ref[1], ref[0], node, "nvcr.io/nvidia/tritonserver:25.01-py3", gpus=2,
                  command=["tritonserver", "--model-repository=/models"])  # fmt: skip
    pod["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = [
        {"name": "nvidia.com/gpu", "resources": [
            {"resourceID": uuid_of(node, 2), "health": "Unhealthy"},
            {"resourceID": uuid_of(node, 3), "health": "Unknown"},
        ]},
    ]  # fmt: skip
    _gpus(f, node, "h100", {2: (30110.0, ref), 3: (30050.0, ref)})
    return f, {
        "target": "serving/triton-ensemble-0", "walk": [1, 2, 3, 4, 5], "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_POD_SCHEDULED", "L2_OK", "L5_DEVICE_UNHEALTHY"],
        "absent": ["L5_OK", "L4_FB_SATURATED"],
    }  # fmt: skip


def row_remap_pending_only() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-row-remap-pending-after-sbe-burst-a100-20-nodes",
        "Built on sample 27 (dcgm-exporter's DCGM_FI_DEV_ROW_REMAP_PENDING beside the remapped-row counters) and "
        "NVIDIA's row-remapping docs (a remap waits for a GPU reset): GPU 6 of a100-train-02 has one remap pending "
        "since a correctable-error burst last week; the remapped-row counts did not move in the last day.",
    )  # fmt: skip
    node, ref = "a100-train-02", ("research", "pretrain-shard-2")
    _bound_pod(f, ref[1], ref[0], node, "nvcr.io/nvidia/pytorch:25.01-py3", RUNNING, gpus=8)
    _gpus(f, node, "a100", {g: (61200.0, ref) for g in range(8)})
    base = {"gpu": "6", "UUID": uuid_of(node, 6), "device": "nvidia6", "modelName": MODELS["a100"][1],
            "Hostname": node, "DCGM_FI_DRIVER_VERSION": "570.158.01"}  # fmt: skip
    f.series("DCGM_FI_DEV_ROW_REMAP_PENDING", base, [[-8 * 86400, 0], [-7 * 86400, 1], [-3600, 1], [0, 1]])
    f.series(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", base, [[-8 * 86400, 0], [-7 * 86400, 1], [-3600, 1], [0, 1]]
    )
    f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, [[-3600, 0], [0, 0]])
    return f, {
        "target": "research/pretrain-shard-2", "walk": [1, 2, 3, 4, 5], "verdict": "L5_ROW_REMAP_PENDING",
        "codes": ["L1_POD_SCHEDULED", "L5_ROW_REMAP_PENDING"],
        "absent": ["L5_ROW_REMAP_FAILURE", "L5_REMAPPED_ROWS_RISING", "L5_OK"],
    }  # fmt: skip


def xid48_history_exporter_restart() -> tuple[Fleet, Expect]:
    f = _fleet(
        "servers-xid48-history-survives-exporter-restart-relabel-h100-20-nodes",
        "Built on the samples of dcgm-exporter's DCGM_FI_DEV_XID_ERRORS (the last Xid, never reset) and sample 40 (Hostname holds "
        "the exporter pod's name when NODE_NAME is unset): GPU 1 of h100-infer-01 had Xid 48 three weeks ago; the "
        "dcgm-exporter pod was replaced two hours ago, so its series now carry the new pod's name and instance.",
    )  # fmt: skip
    node, ref = "h100-infer-01", ("serving", "embed-batch-0")
    _bound_pod(f, ref[1], ref[0], node, "nvcr.io/nvidia/pytorch:25.01-py3", RUNNING, gpus=1)
    new, old = "nvidia-dcgm-exporter-q8f2m", "nvidia-dcgm-exporter-7kd9x"
    f.objects.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": new, "namespace": NS, "uid": "2f0c9a1e-8b7d-4c3a-a5e6-1d9f0b2c7e48",
                                   "labels": {"app": "nvidia-dcgm-exporter"}, "creationTimestamp": "2026-11-29T08:12:00Z"},
                      "spec": {"nodeName": node, "initContainers": [{"name": "toolkit-validation", "image": VAL}],
                               "containers": [{"name": "nvidia-dcgm-exporter",
                                                                 "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04"}]},
                      "status": {"phase": "Running", "startTime": "2026-11-29T08:12:03Z",
                                 "conditions": [{"type": "Ready", "status": "True"}],
                                 "initContainerStatuses": [{"name": "toolkit-validation", "image": VAL, "ready": True, "restartCount": 0,
                                                            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
                                 "containerStatuses": [{"name": "nvidia-dcgm-exporter", "ready": True, "restartCount": 0,
                                                        "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
                                                        "started": True, "state": {"running": {"startedAt": "2026-11-29T08:12:09Z"}}}]}})  # fmt: skip
    total = MODELS["h100"][2]
    restart = -7200
    for host, ip, span in (
        (old, "10.244.3.17:9400", [-30 * 86400, restart - 60]),
        (new, "10.244.3.52:9400", [restart, 0]),
    ):
        for gpu in range(8):
            base = {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "device": f"nvidia{gpu}", "modelName": MODELS["h100"][1],
                    "Hostname": host, "instance": ip, "DCGM_FI_DRIVER_VERSION": "570.158.01"}  # fmt: skip
            xid = 48 if gpu == 1 else 0
            used = 20400.0 if gpu == 0 else 0.0
            times = sorted({*range(span[0] + 3600, span[1], 43200), span[1]})
            for metric, value in (("DCGM_FI_DEV_FB_USED", used), ("DCGM_FI_DEV_FB_FREE", total - used)):
                f.series(metric, base, [[t, value] for t in times])
            xids = [[t, (xid if t >= -21 * 86400 else 0)] for t in times]
            f.series("DCGM_FI_DEV_XID_ERRORS", base, xids)
    return f, {
        "target": "serving/embed-batch-0", "walk": [1, 2, 3, 4, 5], "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L2_OK", "L5_XID"],
        "absent": ["L5_DEVICE_UNHEALTHY", "L4_NO_TELEMETRY"],
    }  # fmt: skip


RECIPES: list[Recipe] = [
    nim_reserved_no_metrics,
    sglang_mem_fraction_static,
    vllm_sh_c_start_sh,
    sglang_retractions,
    tgi_queue_backlog,
    cdi_libcuda_mount_after_upgrade,
    operator_plugin_without_validator,
    allocated_resources_unhealthy,
    row_remap_pending_only,
    xid48_history_exporter_restart,
]


# Bundled too (bot/scenarios, under their own names): the codes issue 18 added need a bundled scenario each.
BUNDLED: list[tuple[Recipe, str]] = [
    (sglang_retractions, "sglang-kv-cache-retractions"),
    (tgi_queue_backlog, "tgi-queue-backlog-framebuffer-reserved"),
    (row_remap_pending_only, "row-remap-pending-waits-for-reset"),
]
SCENARIOS = HERE.parent.parent.parent / "bot" / "scenarios"


def main() -> None:
    write_recipes(RECIPES, HERE)
    for recipe, name in BUNDLED:
        fleet, expect = recipe()
        fleet.name = name
        print(fleet.write(SCENARIOS, expect))


if __name__ == "__main__":
    main()
