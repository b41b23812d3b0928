"""Layer 4 on real log lines and exporter series: system vs GPU memory, vLLM, time-slicing."""

from __future__ import annotations

from typing import Any

import pytest

from layers import memory
from layers.findings import Severity
from layers.sources import NoTelemetry
from tests.layers import builders as b
from tests.layers.fake_telemetry import exposition, sample_text, series, telemetry

NOW = 1_795_953_600.0  # 2026-11-29T12:00:00Z
NODE = "gpu-7"
GPU = {
    "Hostname": NODE,
    "gpu": "0",
    "UUID": "GPU-0f3c1c3e-9a51-4c1e-8d3e-3b1b2f0e9a10",
    "modelName": "NVIDIA H100 80GB HBM3",
}
VLLM_IMAGE = "vllm/vllm-openai:v0.9.1"

# Verbatim from samples 36 (a, b) and 37.
VLLM_FREE_MEMORY = (
    "[multiproc_executor.py:492] ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired "
    "GPU memory utilization (0.95, 45.01 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
)
VLLM_FREE_MEMORY_V1 = (
    "(EngineCore_0 pid=1810465) ERROR 09-03 11:03:37 [core.py:712] ValueError: Free memory on device (7.34/139.72 GiB) on "
    "startup is less than desired GPU memory utilization (0.9, 125.75 GiB). Decrease GPU memory utilization or reduce GPU "
    "memory used by other processes."
)
TORCH_OOM = (
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacty of 23.69 GiB "
    "of which 3.09 GiB is free."
)


def codes(result: Any) -> list[str]:
    return [f.code for f in result.findings]


def fb(used: float, free: float, pod: tuple[str, str] | None = None, **extra: str) -> list:
    labels = {**GPU, **extra, **({"namespace": pod[0], "pod": pod[1]} if pod else {})}
    return [
        series("DCGM_FI_DEV_FB_USED", labels, [(0, used)], NOW),
        series("DCGM_FI_DEV_FB_FREE", labels, [(0, free)], NOW),
    ]


def workload(name: str = "trainer-0", *, image: str = "nvcr.io/nvidia/pytorch:24.05-py3", **kw: Any) -> dict:
    p = b.pod("ml", name, node=NODE, requests={"nvidia.com/gpu": 1}, image=image, **kw)
    p["spec"]["containers"][0]["resources"]["limits"]["memory"] = "16Gi"
    return p


def run(
    objects: list, data: list | None = None, logs: dict | None = None, pod: str = "trainer-0", **kw: Any
) -> Any:
    tel = telemetry(data or [], NOW) if data is not None else NoTelemetry(NOW)
    return memory.check(b.ctx(objects, logs=logs, telemetry=tel, pod=("ml", pod), **kw))


def test_oomkilled_is_system_memory_with_container_and_limit() -> None:
    last = {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-29T11:50:00Z"}
    p = workload(statuses=[b.running("main", restarts=3, last=last)])
    result = run([b.gpu_node(NODE), p], fb(2000, 78000, ("ml", "trainer-0")))
    [f] = [f for f in result.findings if f.code == "L4_OOMKILLED"]
    assert f.severity == Severity.FAULT and "not GPU memory" in f.summary
    assert any("16Gi" in e for e in f.evidence) and any("main" in e for e in f.evidence)
    assert "lastState.terminated.reason" in f.commands[0] and "-n ml trainer-0" in f.commands[0]


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (TORCH_OOM, "CUDA out of memory"),
        ("2026-11-29T11:59:01.123456789Z " + TORCH_OOM, "CUDA out of memory"),
        ("RuntimeError: cuda OUT OF MEMORY. tried to allocate 20.00 MiB", "CUDA out of memory"),
        (VLLM_FREE_MEMORY, "31.44 of 47.38 GiB"),
        (VLLM_FREE_MEMORY_V1, "7.34 of 139.72 GiB"),
    ],
)
def test_gpu_oom_in_current_or_previous_logs(line: str, needle: str) -> None:
    p = workload()
    for previous in (False, True):
        logs = b.logs_for(p, "main", f"loading model\n{line}\n", previous=previous)
        result = run([b.gpu_node(NODE), p], fb(2000, 78000), logs)
        [f] = [f for f in result.findings if f.code == "L4_GPU_OOM_IN_LOGS"]
        assert needle in f.summary and any(line.strip() in e for e in f.evidence)
        assert ("previous" in f.evidence[0]) is previous


def test_java_heap_oom_is_not_gpu_memory() -> None:
    p = workload()
    logs = b.logs_for(p, "main", 'Exception in thread "main" java.lang.OutOfMemoryError: Java heap space\n')
    assert "L4_GPU_OOM_IN_LOGS" not in codes(run([b.gpu_node(NODE), p], fb(2000, 78000), logs))


def test_forbidden_logs_are_unknown_with_the_rbac_hint() -> None:
    p = workload()
    result = run(
        [b.gpu_node(NODE), p], fb(2000, 78000), fail={"pod_log": b.forbidden("get", "pods/log", "ml")}
    )
    [f] = [f for f in result.findings if f.code == "L4_UNKNOWN"]
    assert "'get' on 'pods/log'" in f.summary and result.status == Severity.UNKNOWN


def test_framebuffer_saturated_on_the_pods_gpu() -> None:
    p = workload()
    result = run([b.gpu_node(NODE), p], fb(80000, 1559, ("ml", "trainer-0")))
    [f] = [f for f in result.findings if f.code == "L4_FB_SATURATED"]
    assert f.severity == Severity.FAULT and f.node == NODE and "98%" in f.summary
    assert any("80000" in e and "1559" in e for e in f.evidence)
    assert f.commands[0].startswith('DCGM_FI_DEV_FB_USED{Hostname="gpu-7",gpu="0"} / (')


def test_falls_back_to_all_gpus_of_the_node_without_pod_labels() -> None:
    p = workload()
    data = fb(80000, 1559) + fb(100, 80000, gpu="1", UUID="GPU-other")
    result = run([b.gpu_node(NODE), p], data)
    [f] = [f for f in result.findings if f.code == "L4_FB_SATURATED"]
    assert "GPU 0" in f.summary and "does not map GPUs to pods" in f.evidence[0]


def test_pod_without_gpu_is_not_judged_by_the_nodes_framebuffer() -> None:
    cpu_pod = b.pod("ml", "trainer-0", node=NODE)
    assert codes(run([b.gpu_node(NODE), cpu_pod], fb(80000, 1559))) == ["L4_OK"]


def test_other_pods_gpu_does_not_count_when_the_pod_has_its_own_series() -> None:
    p = workload()
    data = fb(80000, 1559, ("ml", "someone-else")) + fb(
        100, 80000, ("ml", "trainer-0"), gpu="1", UUID="GPU-mine"
    )
    assert codes(run([b.gpu_node(NODE), p], data)) == ["L4_OK"]


def _vllm(utilization_labels: dict[str, str] | None, preemptions: list[tuple[float, float]]) -> list:
    pod = {"namespace": "ml", "pod": "vllm-0"}
    data = fb(78000, 1000, ("ml", "vllm-0"))
    if utilization_labels is not None:
        data.append(series("vllm:cache_config_info", {**utilization_labels, **pod}, [(0, 1)], NOW))
    data.append(
        series(
            "vllm:num_preemptions_total",
            {**pod, "model_name": "meta-llama/Llama-3.1-8B-Instruct"},
            preemptions,
            NOW,
        )
    )
    return data


def test_vllm_reservation_without_preemptions_is_normal() -> None:
    p = workload("vllm-0", image="registry.local/llm-server:1")  # vLLM known by its series only
    info = exposition(sample_text("34_"), NOW)[0].labels  # 34(a): gpu_memory_utilization="0.9"
    result = run(
        [b.gpu_node(NODE), p],
        _vllm({k: v for k, v in info.items() if k != "__name__"}, [(-240, 5), (0, 5)]),
        pod="vllm-0",
    )
    assert codes(result) == ["L4_FB_RESERVED_NORMAL"]
    f = result.findings[0]
    assert f.severity == Severity.INFO and "gpu_memory_utilization 0.9" in f.summary


def test_vllm_preemptions_are_the_fault_not_usage() -> None:
    p = workload("vllm-0", image=VLLM_IMAGE)
    result = run(
        [b.gpu_node(NODE), p],
        _vllm({"gpu_memory_utilization": "0.9"}, [(-240, 5), (-120, 30), (0, 60)]),
        pod="vllm-0",
    )
    assert codes(result) == ["L4_PREEMPTIONS"]
    assert "rate(vllm:num_preemptions_total" in result.findings[0].commands[0]


def test_vllm_by_image_without_its_metrics_is_not_saturated() -> None:
    p = workload("vllm-0", image=VLLM_IMAGE)
    result = run([b.gpu_node(NODE), p], fb(78000, 1000, ("ml", "vllm-0")), pod="vllm-0")
    [f] = result.findings
    assert f.code == "L4_FB_RESERVED_NORMAL" and any(
        "preemptions could not be checked" in e for e in f.evidence
    )


SHARED_NODE = "gke-gpu-share-test-a100-inference-mps-b3fc3d0e-3bpg"


@pytest.mark.parametrize(("memory_label", "saturated"), [("81920", False), ("16384", True)])
def test_shared_gpu_whole_gpu_value_sample_39(memory_label: str, saturated: bool) -> None:
    # Sample 39 has no FB_FREE: the node's nvidia.com/gpu.memory label gives the total.
    node = b.gpu_node(SHARED_NODE, 1, labels={"nvidia.com/gpu.memory": memory_label})
    burn = b.pod(
        "default", "gpu-burn-deployment-1-85dc8ff699-clvh5", node=SHARED_NODE, requests={"nvidia.com/gpu": 1}
    )
    vllm = b.pod("vllm-inference", "vllm-medgemma-4b-it-d599b4c99-f95nk", node=SHARED_NODE, image=VLLM_IMAGE)
    tel = telemetry(exposition(sample_text("39_"), NOW), NOW)
    result = memory.check(b.ctx([node, burn, vllm], telemetry=tel, pod=("default", burn["metadata"]["name"])))
    if not saturated:
        assert codes(result) == ["L4_OK"]
        return
    [f] = result.findings
    assert f.code == "L4_FB_SATURATED"
    assert any("also used by vllm-inference/vllm-medgemma-4b-it-d599b4c99-f95nk" in e for e in f.evidence)
    ctx = b.ctx([node, burn, vllm], telemetry=tel, pod=("vllm-inference", vllm["metadata"]["name"]))
    assert codes(memory.check(ctx)) == ["L4_FB_RESERVED_NORMAL"]


@pytest.mark.parametrize(
    "labels",
    [
        {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"},
        {"nvidia.com/gpu.replicas": "2"},
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED"},
    ],
)
def test_time_slicing_names_the_other_gpu_pods(labels: dict[str, str]) -> None:
    p = workload()
    other = b.pod("team-b", "notebook-1", node=NODE, requests={"nvidia.com/gpu": 1})
    cpu_only = b.pod("team-b", "web-1", node=NODE)
    result = run([b.gpu_node(NODE, labels=labels), p, other, cpu_only], fb(2000, 78000))
    [f] = [f for f in result.findings if f.code == "L4_TIME_SLICING"]
    assert f.severity == Severity.WARN and f.node == NODE
    sharers = f.evidence[-1]
    assert "team-b/notebook-1" in sharers and "web-1" not in sharers and "trainer-0" not in sharers


def test_no_time_slicing_with_one_replica() -> None:
    labels = {"nvidia.com/gpu.sharing-strategy": "none", "nvidia.com/gpu.replicas": "1"}
    assert codes(run([b.gpu_node(NODE, labels=labels), workload()], fb(2000, 78000))) == ["L4_OK"]


def test_telemetry_down_is_unknown_naming_source_and_error() -> None:
    result = run([b.gpu_node(NODE), workload()], None)
    [f] = result.findings
    assert f.code == "L4_NO_TELEMETRY" and f.severity == Severity.UNKNOWN
    assert "no metrics source" in f.summary and "PROMETHEUS_URL" in f.summary


def test_no_series_for_the_node_is_no_telemetry() -> None:
    data = [series("DCGM_FI_DEV_FB_USED", {**GPU, "Hostname": "gpu-8"}, [(0, 10)], NOW)]
    exporter = b.operand("nvidia-dcgm-exporter", NODE, name="nvidia-dcgm-exporter-q2w3e")
    result = run([b.gpu_node(NODE), workload(), exporter], data)
    [f] = result.findings
    assert f.code == "L4_NO_TELEMETRY" and f.node == NODE
    assert "nvidia-dcgm-exporter-q2w3e" in f.commands[0] and NODE in f.commands[0]


def test_healthy_pod_is_ok() -> None:
    result = run([b.gpu_node(NODE), workload()], fb(8000, 72000, ("ml", "trainer-0")))
    assert codes(result) == ["L4_OK"] and result.status == Severity.OK and result.next == 5


def test_node_walk_checks_sharing_and_telemetry_only() -> None:
    node = b.gpu_node(NODE, labels={"nvidia.com/gpu.sharing-strategy": "time-slicing"})
    tel = telemetry(fb(80000, 1000), NOW)
    result = memory.check(b.ctx([node, workload()], telemetry=tel, node=NODE))
    assert codes(result) == ["L4_TIME_SLICING"]  # no pod: its memory is not judged
    assert "ml/trainer-0" in result.findings[0].evidence[-1]
