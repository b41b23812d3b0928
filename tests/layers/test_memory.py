"""Layer 4 on real log lines and exporter series: system vs GPU memory, vLLM, time-slicing."""

from __future__ import annotations

from typing import Any

import pytest

from layers import memory
from layers.findings import Severity
from layers.sources import NoTelemetry
from tests.layers import builders as b
from tests.layers.builders import codes
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
    # Spec: a reservation judged without the preemption check also says unknown, and what to scrape.
    assert sorted(codes(result)) == ["L4_FB_RESERVED_NORMAL", "L4_UNKNOWN"]
    f = next(x for x in result.findings if x.code == "L4_FB_RESERVED_NORMAL")
    assert any("preemptions could not be checked" in e for e in f.evidence)
    u = next(x for x in result.findings if x.code == "L4_UNKNOWN")
    assert "vllm:num_preemptions_total" in u.summary and "ml/vllm-0" in u.summary
    assert result.status.label == "unknown"


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
    # Sample 39 has no vLLM series: the reservation is normal, the preemption check could not run.
    assert sorted(codes(memory.check(ctx))) == ["L4_FB_RESERVED_NORMAL", "L4_UNKNOWN"]


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
    # Spec: a walk about a node checks the framebuffer of every GPU on it (98.8 % here).
    assert codes(result) == ["L4_FB_SATURATED", "L4_TIME_SLICING"]
    assert "ml/trainer-0" in result.findings[1].evidence[-1]


def test_node_walk_judges_each_gpu_by_the_pod_its_series_name() -> None:
    node = b.gpu_node(NODE)
    vllm = workload("vllm-0", image=VLLM_IMAGE)
    data = fb(78000, 1000, ("ml", "vllm-0")) + fb(1000, 78000, None, gpu="1", UUID="GPU-1")
    result = memory.check(b.ctx([node, vllm], telemetry=telemetry(data, NOW), node=NODE))
    assert sorted(codes(result)) == ["L4_FB_RESERVED_NORMAL", "L4_UNKNOWN"]


def test_ok_never_claims_a_framebuffer_it_did_not_read() -> None:
    node = b.gpu_node(NODE)
    quiet = memory.check(b.ctx([node], telemetry=telemetry(fb(1000, 78000), NOW), node=NODE))
    [ok] = quiet.findings
    assert ok.code == "L4_OK" and "below the ceiling on 1 GPU(s)" in ok.summary
    # Only an Xid series for the node: telemetry is there, the framebuffer is not. A check that could
    # not run is unknown (spec), naming the series to enable, never an OK.
    xid_only = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 0)], NOW)]
    blind = memory.check(b.ctx([node], telemetry=telemetry(xid_only, NOW), node=NODE))
    [unk] = blind.findings
    assert unk.code == "L4_UNKNOWN" and unk.node == NODE, unk
    assert "DCGM_FI_DEV_FB_USED" in unk.summary and "DCGM_FI_DEV_FB_FREE" in unk.summary
    assert (
        unk.evidence[0]
        == "GPUs with DCGM series: 1; with DCGM_FI_DEV_FB_USED: 0; with DCGM_FI_DEV_FB_FREE: 0"
    )


def test_a_gpu_pod_whose_gpus_have_no_framebuffer_series_is_unknown() -> None:
    """The pod's node exports DCGM (an Xid gauge) but no FB_USED/FB_FREE: the check could not run. The
    node's nvidia.com/gpu.memory label stands in for FB_FREE only with FB_USED, so it does not help here."""
    xid_only = [series("DCGM_FI_DEV_XID_ERRORS", GPU, [(0, 0)], NOW)]
    result = run([b.gpu_node(NODE), workload()], xid_only)
    assert codes(result) == ["L4_UNKNOWN"] and result.status == Severity.UNKNOWN
    assert "framebuffer not checked on" in result.findings[0].summary


# --- variants: OOM lines from the frameworks as users posted them --------------------------


@pytest.mark.parametrize(
    "line",
    [
        # vllm-project/vllm#15598 (Ray worker prefix, torch >= 2.5 name).
        "(RayWorkerWrapper pid=206994, ip=192.168.10.25) ERROR 03-27 10:29:13 [worker_base.py:620] "
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 6 has a total capacity of "
        "44.53 GiB of which 448.00 KiB is free.",
        # vllm-project/vllm#2140 (torch < 2.5 name).
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacty of "
        "23.69 GiB of which 3.09 GiB is free.",
        # vllm-project/vllm#10439 and #27508: V0 worker and V1 engine-core prefixes.
        "vllm-1  | ERROR 11-18 18:07:28 engine.py:366] ValueError: No available memory for the cache blocks. Try "
        "increasing `gpu_memory_utilization` when initializing the engine.",
        "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] ValueError: No available memory for the "
        "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
        # vLLM V1 start-up check when the KV cache cannot hold one request.
        "(EngineCore_DP0 pid=812) ERROR 06-02 08:11:09 [core.py:586] ValueError: To serve at least one request with "
        "the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV "
        "cache memory (9.45 GiB). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
        # JAX / XLA.
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
        "17179869184 bytes.",
        # TensorFlow.
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with "
        "shape[32,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        # cuBLAS and llama.cpp-style allocators.
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 4096.00 MiB on device 0: cudaMalloc failed: out of "
        "memory",
        # Colour codes and CRLF from a log shipper.
        "\x1b[1;31mERROR\x1b[0m torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.\r",
    ],
)
def test_gpu_oom_line_variants(line: str) -> None:
    p = workload()
    logs = b.logs_for(p, "main", f"INFO starting\n{line}\nINFO exiting\n", previous=True)
    result = run([b.gpu_node(NODE), p], fb(2000, 78000), logs)
    [f] = [f for f in result.findings if f.code == "L4_GPU_OOM_IN_LOGS"]
    assert f.severity == Severity.FAULT and f.node == NODE and f.next is None
    assert len(f.evidence) == 1 and "previous" in f.evidence[0]
    assert "\x1b" not in f.evidence[0] and "\r" not in f.evidence[0]
    assert result.status == Severity.FAULT


@pytest.mark.parametrize(
    "line",
    [
        'Exception in thread "main" java.lang.OutOfMemoryError: GC overhead limit exceeded',
        "MemoryError: Unable to allocate 3.21 GiB for an array with shape (431, 1000, 1000) and data type float64",
        'grpc._channel._InactiveRpcError: status = StatusCode.RESOURCE_EXHAUSTED details = "Received message larger '
        'than max (8388608 vs. 4194304)"',
        "INFO 06-02 08:10:01 [gpu_worker.py:227] Memory profiling takes 5.21 seconds. the current vLLM instance can use "
        "total_gpu_memory (79.11GiB) x gpu_memory_utilization (0.90) = 71.20GiB",
        "INFO 06-02 08:10:02 [kv_cache_utils.py:716] GPU KV cache size: 415,728 tokens",
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory",
    ],
)
def test_lines_that_are_not_gpu_oom(line: str) -> None:
    p = workload()
    logs = b.logs_for(p, "main", line + "\n")
    assert codes(run([b.gpu_node(NODE), p], fb(2000, 78000, ("ml", "trainer-0")), logs)) == ["L4_OK"]


# --- variants: system memory ---------------------------------------------------------------


def test_exit_137_without_oomkilled_reason_is_not_oomkilled() -> None:
    # SIGKILL for another cause (liveness probe, eviction): reason Error, not OOMKilled.
    last = {"exitCode": 137, "reason": "Error", "finishedAt": "2026-11-29T11:50:00Z"}
    p = workload(statuses=[b.running("main", restarts=1, last=last)])
    assert codes(run([b.gpu_node(NODE), p], fb(2000, 78000, ("ml", "trainer-0")))) == ["L4_OK"]


def test_oomkilled_now_in_crashloop_with_integer_limit_and_init_container() -> None:
    p = workload(
        init_containers=("download-weights",),
        statuses=[
            b.waiting("main", "CrashLoopBackOff", restarts=7, last={"exitCode": 137, "reason": "OOMKilled"})
        ],
        init_statuses=[b.terminated("download-weights", exit_code=137, reason="OOMKilled")],
    )
    p["spec"]["containers"][0]["resources"]["limits"]["memory"] = 8589934592  # an int, as YAML may give it
    result = run([b.gpu_node(NODE), p], fb(2000, 78000, ("ml", "trainer-0")))
    found = [f for f in result.findings if f.code == "L4_OOMKILLED"]
    assert {f.summary.split(" was ")[0] for f in found} == {
        "container main",
        "init container download-weights",
    }
    main = next(f for f in found if f.summary.startswith("container main"))
    assert any("8589934592" in e for e in main.evidence) and any(
        "restartCount: 7" in e for e in main.evidence
    )


def test_pod_without_container_statuses_yet_is_not_an_error() -> None:
    p = workload()
    p["status"] = {"phase": "Pending"}
    result = run([b.gpu_node(NODE), p], fb(2000, 78000, ("ml", "trainer-0")))
    assert codes(result) == ["L4_OK"]


def test_oomkilled_ephemeral_debug_container() -> None:
    p = workload()
    p["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox"}]
    p["status"]["ephemeralContainerStatuses"] = [
        {
            "name": "debugger",
            "restartCount": 0,
            "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
        }
    ]
    [f] = [f for f in run([b.gpu_node(NODE), p], fb(2000, 78000)).findings if f.code == "L4_OOMKILLED"]
    assert "debugger" in f.summary


# --- variants: exporter and vLLM series --------------------------------------------------------


def test_mig_instance_of_the_pod_saturated_lowercase_hostname_exporter_pod_sample_40() -> None:
    # Sample 40: hostname holds the exporter pod's name; the pod's MIG instance has its own FB series.
    node_name = "a30-worker-2"
    exporter = b.pod(
        "monitoring",
        "dcgm-exporter-wwwjh",
        node=node_name,
        labels={"app.kubernetes.io/name": "dcgm-exporter"},
    )
    triton = b.pod(
        "default", "triton-server-f7cb5d77-95xcf", node=node_name, requests={"nvidia.com/mig-1g.6gb": 1},
        image="nvcr.io/nvidia/tritonserver:24.08-py3",
    )  # fmt: skip
    data = exposition(sample_text("40_"), NOW)
    used = [
        s for s in data if s.labels["__name__"] == "DCGM_FI_DEV_FB_FREE" and s.labels.get("GPU_I_ID") == "3"
    ]
    assert used, "sample 40 carries the MIG instance's FB_FREE"
    mig = {k: v for k, v in used[0].labels.items() if k != "__name__"}
    data.append(series("DCGM_FI_DEV_FB_USED", mig, [(0, 5800)], NOW))
    data = [
        s
        for s in data
        if not (s.labels["__name__"] == "DCGM_FI_DEV_FB_FREE" and s.labels.get("GPU_I_ID") == "3")
    ]
    data.append(series("DCGM_FI_DEV_FB_FREE", mig, [(0, 150)], NOW))
    tel = telemetry(data, NOW)
    ctx = b.ctx(
        [b.gpu_node(node_name, 3), exporter, triton],
        telemetry=tel,
        pod=("default", triton["metadata"]["name"]),
    )
    result = memory.check(ctx)
    # Triton is an inference server that reserves memory up front (spec, layer 4): its full MIG
    # instance is a reservation, and without an overload series for it the layer says so.
    [f] = [f for f in result.findings if f.code == "L4_FB_RESERVED_NORMAL"]
    assert "MIG 1g.6gb/3" in f.summary and f.node == node_name and "Triton's" in f.summary
    assert 'hostname="dcgm-exporter-wwwjh"' in f.commands[0]
    assert "L4_NO_TELEMETRY" not in codes(result) and "L4_FB_SATURATED" not in codes(result)
    [u] = [u for u in result.findings if u.code == "L4_UNKNOWN"]
    assert u.summary.startswith(
        "Triton overload (preemptions, retractions or a queue backlog) of default/triton"
    )


@pytest.mark.parametrize(
    "pod_labels",
    [
        {"exported_namespace": "ml", "exported_pod": "vllm-0", "namespace": "monitoring", "pod": "prom-0"},
        {"kubernetes_namespace": "ml", "kubernetes_pod_name": "vllm-0"},
        {"namespace": "ml", "pod": "vllm-0"},
    ],
)
def test_vllm_v1_engines_and_pod_label_spellings(pod_labels: dict[str, str]) -> None:
    p = workload("vllm-0", image="registry.local/llm-server:1")
    model = {"model_name": "meta-llama/Llama-3.1-70B-Instruct"}
    data = fb(78000, 1000, ("ml", "vllm-0"))
    data.append(
        series(
            "vllm:vllm_config_info",
            {**pod_labels, **model, "engine": "0", "cache_config_gpu_memory_utilization": "0.92"},
            [(0, 1)],
            NOW,
        )
    )
    for engine in ("0", "1"):  # data parallel: one counter per engine
        data.append(
            series(
                "vllm:num_preemptions_total",
                {**pod_labels, **model, "engine": engine},
                [(-280, 0), (-140, 0), (0, 30 if engine == "1" else 0)],
                NOW,
            )
        )
    result = run([b.gpu_node(NODE), p], data, pod="vllm-0")
    assert codes(result) == ["L4_PREEMPTIONS"]
    assert any("gpu_memory_utilization = 0.92" in e for e in result.findings[0].evidence)


@pytest.mark.parametrize(
    ("labels", "word"),
    [
        ({"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": 4}, "time-slicing"),
        ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-shared"}, "time-slicing"),
        (
            {
                "nvidia.com/gpu.sharing-strategy": "mps",
                "nvidia.com/gpu.replicas": "4",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",
            },
            "MPS",
        ),
    ],
)
def test_sharing_label_variants(labels: dict[str, Any], word: str) -> None:
    result = run([b.gpu_node(NODE, labels=labels), workload()], fb(2000, 78000, ("ml", "trainer-0")))
    [f] = [f for f in result.findings if f.code == "L4_TIME_SLICING"]
    assert f.severity == Severity.WARN and word in f.summary


def test_node_series_without_host_label_found_by_the_pods_labels() -> None:
    # A federated view keeps pod labels but drops Hostname (dcgm DCGM#235 shows such a series).
    labels = {
        "gpu": "0",
        "UUID": "GPU-0f3c1c3e-9a51-4c1e-8d3e-3b1b2f0e9a10",
        "namespace": "ml",
        "pod": "trainer-0",
    }
    data = [
        series("DCGM_FI_DEV_FB_USED", labels, [(0, 80500)], NOW),
        series("DCGM_FI_DEV_FB_FREE", labels, [(0, 500)], NOW),
    ]
    result = run([b.gpu_node(NODE), workload()], data)
    assert "L4_FB_SATURATED" in codes(result)


def test_oom_lines_found_in_the_current_log_survive_a_refused_previous_log() -> None:
    from bot.sources.snapshot import SnapshotCluster
    from layers.facts.context import WalkContext
    from layers.findings import Target
    from layers.sources import NoTelemetry, SourceError

    class PreviousForbidden(SnapshotCluster):
        def pod_log(self, namespace: str, pod: str, container: str, **kw: object) -> str:
            if kw.get("previous"):
                raise SourceError("forbidden", "no", verb="get", resource="pods/log", namespace=namespace)
            return super().pod_log(namespace, pod, container, **kw)  # type: ignore[arg-type]

    p = b.pod("ml", "train-0", node="gpu-1", phase="Running", containers=("train",))
    logs = {"ml/train-0/train": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"}
    cluster = PreviousForbidden([b.gpu_node("gpu-1"), p], logs)
    ctx = WalkContext(cluster, NoTelemetry(0.0), Target("ml", "train-0", "gpu-1"), p)
    codes = [f.code for f in memory.gpu_oom_in_logs(ctx, p)]
    assert "L4_GPU_OOM_IN_LOGS" in codes and "L4_UNKNOWN" in codes
