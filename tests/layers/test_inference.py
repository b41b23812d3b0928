"""The one recogniser of inference servers (layers/facts/inference.py) and their overload series
(layers/facts/servermetrics.py), on the command lines and ConfigMap mounts real charts use."""

from __future__ import annotations

from typing import Any

import pytest

from layers import memory
from layers.facts import inference as inf
from layers.facts import servermetrics as sm
from layers.facts.resourcehealth import device_health
from layers.facts.startfail import classify
from layers.sources import K8sObject
from tests.layers import builders as b
from tests.layers.builders import codes
from tests.layers.fake_telemetry import series, telemetry

NOW = 1_795_953_600.0
NODE = "gpu-7"
GPU = {
    "Hostname": NODE,
    "gpu": "0",
    "UUID": "GPU-0f3c1c3e-9a51-4c1e-8d3e-3b1b2f0e9a10",
    "modelName": "NVIDIA H100",
}


def _pod(image: str = "registry.local/base:1", **container: Any) -> K8sObject:
    pod = b.pod("ml", "srv-0", node=NODE, requests={"nvidia.com/gpu": 1}, image=image)
    pod["spec"]["containers"][0].update(container)
    return pod


@pytest.mark.parametrize(
    ("image", "container", "server"),
    [
        ("vllm/vllm-openai:v0.9.1", {}, "vLLM"),
        ("lmsysorg/sglang:v0.4.6.post5-cu124", {}, "SGLang"),
        ("registry.local/llm:3", {"args": ["--model-path", "m", "--mem-fraction-static", "0.9"]}, "SGLang"),
        ("ghcr.io/huggingface/text-generation-inference:3.0.1", {}, "TGI"),
        (
            "registry.local/llm:3",
            {"command": ["text-generation-launcher"], "args": ["--model-id", "m"]},
            "TGI",
        ),
        ("nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4", {}, "NIM"),
        ("nvcr.io/nvidia/tritonserver:25.01-py3", {}, "Triton"),
        ("registry.local/llm:3", {"command": ["trtllm-serve", "/engines/llama"]}, "TensorRT-LLM"),
        (
            "registry.local/llm:3",
            {"command": ["python3", "-m", "tensorrt_llm.commands.serve"]},
            "TensorRT-LLM",
        ),
        ("ghcr.io/ggml-org/llama.cpp:server-cuda", {}, "llama.cpp"),  # "llama-server" in its command below
        ("registry.local/llm:3", {"command": ["/app/llama-server", "-m", "/models/q4.gguf"]}, "llama.cpp"),
        (
            "registry.local/llm:3",
            {"command": ["sh", "-c", "exec python3 -m vllm.entrypoints.openai.api_server"]},
            "vLLM",
        ),
    ],
)
def test_every_server_the_spec_lists(image: str, container: dict[str, Any], server: str) -> None:
    if image.startswith("ghcr.io/ggml-org") and not container:
        container = {"command": ["llama-server"]}
    got = inf.recognise(_pod(image, **container))
    assert got.server is not None and got.server.name == server, got


def test_kserve_label_and_series_recognise_a_server() -> None:
    pod = _pod()
    pod["metadata"]["labels"]["serving.kserve.io/inferenceservice"] = "llama"
    assert inf.recognise(pod).server == inf.Server(
        "KServe", "the pod is labelled serving.kserve.io/inferenceservice=llama"
    )
    assert inf.recognise(_pod(), ["TGI"]).server == inf.Server("TGI", "the pod exports TGI metrics")


@pytest.mark.parametrize(
    "container",
    [
        {},
        {"command": ["python", "train.py", "--lr", "0.9"]},
        {"env": [{"name": "NOTE", "value": "not a vllm server"}]},  # env is not its command line
    ],
)
def test_a_training_pod_is_not_a_server(container: dict[str, Any]) -> None:
    assert inf.recognise(_pod("nvcr.io/nvidia/pytorch:25.01-py3", **container)).server is None


def _cm(name: str, data: dict[str, str]) -> K8sObject:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ml"},
        "data": data,
    }


SCRIPT = "#!/bin/sh\nexec python3 -m sglang.launch_server --model-path m --tp 8\n"


@pytest.mark.parametrize(
    ("container", "volume"),
    [
        # directory mount, absolute path
        ({"command": ["sh", "-c", "/opt/serve/start.sh"], "volumeMounts": [{"name": "s", "mountPath": "/opt/serve"}]},
         {"name": "s", "configMap": {"name": "serve"}}),
        # relative script in the mount's directory, args form
        ({"command": ["/bin/bash", "-c"], "args": ["cd /opt/serve && ./start.sh"], "workingDir": "/opt/serve",
          "volumeMounts": [{"name": "s", "mountPath": "/opt/serve"}]},
         {"name": "s", "configMap": {"name": "serve"}}),
        # one-file subPath mount
        ({"command": ["sh", "/entrypoint.sh"], "volumeMounts": [{"name": "s", "mountPath": "/entrypoint.sh", "subPath": "start.sh"}]},
         {"name": "s", "configMap": {"name": "serve"}}),
        # items renaming the key
        ({"command": ["sh", "-c", "/opt/run/launch"], "volumeMounts": [{"name": "s", "mountPath": "/opt/run"}]},
         {"name": "s", "configMap": {"name": "serve", "items": [{"key": "start.sh", "path": "launch"}]}}),
        # a projected volume's ConfigMap source
        ({"command": ["sh", "-c", "/opt/serve/start.sh"], "volumeMounts": [{"name": "s", "mountPath": "/opt/serve"}]},
         {"name": "s", "projected": {"sources": [{"configMap": {"name": "serve"}}]}}),
    ],
)  # fmt: skip
def test_a_script_file_from_a_mounted_configmap(container: dict[str, Any], volume: dict[str, Any]) -> None:
    pod = _pod(**container)
    pod["spec"]["volumes"] = [volume]
    reads: list[tuple[str, str]] = []

    def read(ns: str, name: str) -> K8sObject | None:
        reads.append((ns, name))
        return _cm(name, {"start.sh": SCRIPT, "other.sh": "echo hi"})

    got = inf.recognise(pod, read_configmap=read)
    assert got.server is not None and got.server.name == "SGLang", got
    assert "ConfigMap ml/serve (key start.sh) that starts SGLang" in got.server.why
    assert reads == [("ml", "serve")]  # one read, by name


def test_a_script_the_command_does_not_name_is_not_read() -> None:
    pod = _pod(command=["python", "serve.py"], volumeMounts=[{"name": "s", "mountPath": "/opt/serve"}])
    pod["spec"]["volumes"] = [{"name": "s", "configMap": {"name": "serve"}}]
    assert inf.recognise(pod, read_configmap=lambda ns, n: _cm(n, {"start.sh": SCRIPT})).server is None
    unmounted = _pod(command=["sh", "-c", "/opt/serve/start.sh"])
    assert (
        inf.recognise(unmounted, read_configmap=lambda ns, n: pytest.fail("no mount, no read")).server is None
    )


def test_a_configmap_that_cannot_be_read_is_a_note_not_an_error() -> None:
    pod = _pod(
        command=["sh", "-c", "/opt/serve/start.sh"], volumeMounts=[{"name": "s", "mountPath": "/opt/serve"}]
    )
    pod["spec"]["volumes"] = [{"name": "s", "configMap": {"name": "serve"}}]

    def refuse(ns: str, name: str) -> K8sObject | None:
        raise b.forbidden("get", "configmaps", ns)

    got = inf.recognise(pod, read_configmap=refuse)
    assert got.server is None
    assert got.notes and got.notes[0].startswith("could not read ConfigMap ml/serve (mounted at /opt/serve")


def test_reservation_settings_from_the_command_line() -> None:
    pod = _pod(args=["--gpu-memory-utilization=0.92", "--mem-fraction-static", "0.85"])
    assert inf.reservation_args(pod) == [
        "gpu_memory_utilization = 0.92 (container main's args)",
        "mem_fraction_static = 0.85 (container main's args)",
    ]


# --- the overload series ---------------------------------------------------------------------------

POD = {"namespace": "ml", "pod": "srv-0"}


def _minutes(values: list[float]) -> list[tuple[float, float]]:
    return [(-60.0 * (len(values) - 1 - i), v) for i, v in enumerate(values)]


def test_server_signals_by_pod() -> None:
    data = [
        series(sm.SGLANG_RETRACTED_TOTAL, {**POD, "tp_rank": "0"}, _minutes([1, 3, 6, 9, 12, 15]), NOW),
        series(sm.SGLANG_QUEUE, {**POD, "tp_rank": "0"}, _minutes([4, 2, 5, 3, 6, 2]), NOW),
        series(sm.TGI_QUEUE, {"namespace": "ml", "pod": "tgi-0"}, _minutes([0, 0, 3, 0, 1, 0]), NOW),
        series(sm.SGLANG_QUEUE, {"namespace": "other", "pod": "srv-0"}, _minutes([9] * 6), NOW),
    ]
    got = sm.read_server_signals(telemetry(data, NOW), [("ml", "srv-0"), ("ml", "tgi-0")])
    sglang, tgi = got[("ml", "srv-0")], got[("ml", "tgi-0")]
    assert sglang.servers == ["SGLang"] and sglang.retracting and sglang.backlog == {sm.SGLANG_QUEUE: 2}
    assert tgi.servers == ["TGI"] and not tgi.retracting and tgi.backlog == {}
    assert sm.read_server_signals(telemetry(data, NOW), []) == {}


def _fb_ctx(pod: K8sObject, data: list[Any]) -> Any:
    fb = [
        series("DCGM_FI_DEV_FB_USED", {**GPU, **POD}, [(-60, 78000), (0, 78000)], NOW),
        series("DCGM_FI_DEV_FB_FREE", {**GPU, **POD}, [(-60, 1500), (0, 1500)], NOW),
    ]
    return b.ctx([b.gpu_node(NODE, 1), pod], telemetry=telemetry(fb + data, NOW), pod=("ml", "srv-0"))


def test_sglang_at_the_ceiling_with_its_series_is_normal_without_unknown() -> None:
    pod = _pod("lmsysorg/sglang:v0.4.6", args=["--mem-fraction-static", "0.9"])
    data = [series(sm.SGLANG_QUEUE, POD, _minutes([2, 0, 1, 0, 0, 0]), NOW),
            series(sm.SGLANG_RETRACTED, POD, _minutes([0] * 6), NOW)]  # fmt: skip
    result = memory.check(_fb_ctx(pod, data))
    assert codes(result) == ["L4_FB_RESERVED_NORMAL"]


def test_configmap_refusal_is_evidence_on_the_saturated_finding() -> None:
    pod = _pod(
        command=["sh", "-c", "/opt/serve/start.sh"], volumeMounts=[{"name": "s", "mountPath": "/opt/serve"}]
    )
    pod["spec"]["volumes"] = [{"name": "s", "configMap": {"name": "serve"}}]
    ctx = b.ctx(
        [b.gpu_node(NODE, 1), pod],
        telemetry=_fb_ctx(pod, []).telemetry,
        pod=("ml", "srv-0"),
        fail={"get_configmap": b.forbidden("get", "configmaps", "ml")},
    )
    [f] = memory.check(ctx).findings
    assert f.code == "L4_FB_SATURATED"
    assert any(
        "could not read ConfigMap ml/serve" in e and "'get' on 'configmaps'" in e for e in f.evidence
    ), f.evidence


# --- KEP-4680 and the runc mount -----------------------------------------------------------------


def test_allocated_resources_status_of_device_plugin_and_dra_pods() -> None:
    pod = _pod()
    pod["status"]["containerStatuses"][0]["allocatedResourcesStatus"] = [
        {"name": "nvidia.com/gpu", "resources": [{"resourceID": "GPU-aaa", "health": "Unhealthy"}]},
        {
            "name": "claim:gpu-claim/gpu",
            "resources": [{"resourceID": "gpu.nvidia.com/node-a/gpu-1", "health": "Unknown"}],
        },
    ]
    got = [(h.resource, h.resource_id, h.health) for h in device_health(pod)]
    assert got == [
        ("nvidia.com/gpu", "GPU-aaa", "Unhealthy"),
        ("claim:gpu-claim/gpu", "gpu.nvidia.com/node-a/gpu-1", "Unknown"),
    ]


@pytest.mark.parametrize(
    "message",
    [
        "runc create failed: unable to start container process: error during container init: error mounting "
        '"/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01" to rootfs at "/usr/lib/x86_64-linux-gnu/libcuda.so.570.158.01": '
        "mount …: no such file or directory: unknown",
        r"container init caused: rootfs_linux.go:76: mounting \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05\" "
        r"to rootfs at \"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.104.05\" caused: no such file or directory",
    ],
)
def test_a_driver_library_mount_failure_names_the_driver(message: str) -> None:
    got = classify(message)
    assert got is not None and got[0] == "driver-mount" and ".so.5" in got[1]


def test_a_configmap_mount_failure_is_not_the_drivers() -> None:
    assert (
        classify(
            'error mounting "/var/lib/kubelet/pods/x/volumes/cfg" to rootfs at "/etc/cfg": not a directory'
        )
        is None
    )
