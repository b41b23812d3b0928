"""Probe (black-box): real exporters' alert label sets over POST /alertmanager, checked in Slack.

Each payload is what Alertmanager 0.25 posts (tests/alertmanager.py) for an
alert rule GPU platform teams run, with the labels Prometheus puts on it as
scraped in the wild:

- dcgm-exporter through the GPU Operator's ServiceMonitor (honorLabels
  false): the exporter pod's `namespace`/`pod`/`container`/`instance` (pod IP
  :9400), the workload as `exported_namespace`/`exported_pod`, `Hostname`,
  `gpu`, `UUID`, `modelName`, `pci_bus_id`, `DCGM_FI_DRIVER_VERSION`;
  without NODE_NAME `Hostname` is the exporter pod's own name; some charts
  relabel `__meta_kubernetes_pod_node_name` into `kubernetes_node`.
  (NVIDIA/dcgm-exporter's default counters and the GPU Operator's
  ServiceMonitor; public ServiceMonitors found with the code search.)
- kube-prometheus-stack's kubernetes-mixin rules: `KubePodCrashLooping`
  (`kube_pod_container_status_waiting_reason{reason="CrashLoopBackOff"}`:
  namespace, pod, container, reason, uid and KSM's target labels),
  `KubePodNotReady` (namespace, pod), `KubeContainerWaiting`
  (namespace, pod, container, reason), `KubeNodeNotReady` (node, condition,
  status), `KubeDeploymentReplicasMismatch` (namespace, deployment); with
  kube-state-metrics scraped honorLabels false, the object's namespace/pod
  become `exported_*` and `namespace`/`pod` are KSM's own pod's.
- node-exporter (`instance` "10.0.1.3:9100", or the node's name where the
  chart relabels it), an exporter on the host network at "10.0.3.7:9400".
- Alertmanager's `Watchdog` and kube-prometheus-stack's `InfoInhibitor`,
  which name no subject at all.

The expectation of each is written from shared/spec/interfaces.md, "Alert-
driven incident threads", before running: an alert concerns a node (`node`,
`kubernetes_node`, `Hostname`, `hostname`, `instance` through the node list,
a dcgm-exporter pod name through its node) or a pod (`namespace`+`pod`,
`exported_namespace`+`exported_pod`); naming both, the pod when it exists and
is not an exporter's or the operator's, else the node; naming neither: 200,
ignored, counted. The cluster is production-shaped: 31 nodes of three GPU
models and a CPU pool, an unrelated node short of GPUs, the operator's and
monitoring's pods with their real owners.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.ops import metrics
from bot.slack.state import RedisState
from bot.slack.transport import start_http
from tests.alertmanager import alert, fingerprint, payload
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import inprocess_bot, node_object, scenario_doc, wait_for

TOKEN = "probe5-alert-token-0123456789abcdef"
CHANNEL = "C0PROBE5"
PREFIX = "gpubot-probe5-subjects:"

DCGM_POD = "nvidia-dcgm-exporter-7xk2p"  # the GPU Operator's DaemonSet pod on gpu-7
DCGM_POD_A100 = "nvidia-dcgm-exporter-m4q9z"  # on gpu-a100-3
KSM_POD = "kube-prometheus-stack-kube-state-metrics-6d4f9b7c8-x2x9k"  # a Deployment's, on cpu-1
NODE_EXPORTER_POD = "kube-prometheus-stack-prometheus-node-exporter-q2w3e"  # on gpu-3
NPD_POD = "node-problem-detector-7rz4t"  # kube-system DaemonSet on the host network, on gpu-h100-4
SMART_POD = "smartctl-exporter-lq8vw"  # a DaemonSet exporter on the pod network, on gpu-a100-8
HEALTH_POD = "gpu-health-exporter-8h2kd"  # a team's own DaemonSet, on gpu-a100-7
QUOTA_POD = "gpu-quota-exporter-5f7c9d-k2m4n"  # a team's own Deployment, on cpu-2


def _addressed(node: dict[str, Any], ip: str) -> dict[str, Any]:
    node["status"]["addresses"] = [
        {"type": "InternalIP", "address": ip},
        {"type": "Hostname", "address": node["metadata"]["name"]},
    ]
    return node


def _gpu(name: str, ip: str, product: str, capacity: int = 8, allocatable: int = 8) -> dict[str, Any]:
    return _addressed(
        node_object(
            name,
            {"nvidia.com/gpu.count": str(capacity), "nvidia.com/gpu.product": product},
            {"cpu": "96", "memory": "1056Gi", "nvidia.com/gpu": str(capacity), "pods": "110"},
            {"cpu": "96", "memory": "1050Gi", "nvidia.com/gpu": str(allocatable), "pods": "110"},
            {"kernelVersion": "5.15.0-118-generic", "containerRuntimeVersion": "containerd://1.7.12"},
        ),
        ip,
    )


def _owned_pod(
    ns: str, name: str, node: str | None, labels: dict[str, str], owner: tuple[str, str], gpus: int = 0
) -> dict[str, Any]:
    kind, owner_name = owner
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "x", "resources": resources}]}
    status: dict[str, Any] = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        status = {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}, "image": "x"}
            ],
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": labels,
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": kind, "name": owner_name, "controller": True}
            ],
        },
        "spec": spec,
        "status": status,
    }


def probe_scenario(folder: Path) -> Path:
    """slack_harness's Xid 79 cluster (gpu-7 lost a GPU, ml/trainer-0 on it) grown into a fleet."""
    doc = scenario_doc()
    for n in doc["objects"]:
        if n["kind"] == "Node":
            _addressed(n, f"10.0.1.{n['metadata']['name'].removeprefix('gpu-')}")
    doc["objects"] += [_gpu(f"gpu-h100-{i}", f"10.0.4.{i}", "NVIDIA-H100-80GB-HBM3") for i in range(1, 13)]
    doc["objects"] += [
        _gpu(f"gpu-a100-{i}", f"10.0.2.{i}", "NVIDIA-A100-SXM4-80GB", 8, 6 if i == 5 else 8)
        for i in range(1, 9)
    ]
    doc["objects"] += [_gpu(f"gpu-l4-{i}", f"10.0.3.{i}", "NVIDIA-L4", 4, 4) for i in range(4, 8)]
    doc["objects"] += [
        _addressed(
            node_object(f"cpu-{i}", {}, {"cpu": "32", "pods": "110"}, {"cpu": "32", "pods": "110"}, {}),
            f"10.0.0.{i}",
        )
        for i in range(1, 4)
    ]
    ds = ("DaemonSet", "nvidia-dcgm-exporter")
    doc["objects"] += [
        _owned_pod("ml", "queued-0", None, {"app": "trainer"}, ("StatefulSet", "queued"), gpus=8),
        _owned_pod(
            "ml", "infer-5c9d7-abcde", "gpu-a100-2", {"app": "infer"}, ("ReplicaSet", "infer-5c9d7"), 1
        ),
        _owned_pod(
            "ml", "infer-5c9d7-fghij", "gpu-a100-6", {"app": "infer"}, ("ReplicaSet", "infer-5c9d7"), 1
        ),
        _owned_pod("gpu-operator", DCGM_POD, "gpu-7", {"app": "nvidia-dcgm-exporter"}, ds),
        _owned_pod("gpu-operator", DCGM_POD_A100, "gpu-a100-3", {"app": "nvidia-dcgm-exporter"}, ds),
        _owned_pod(
            "monitoring",
            KSM_POD,
            "cpu-1",
            {"app.kubernetes.io/name": "kube-state-metrics"},
            ("ReplicaSet", "kube-prometheus-stack-kube-state-metrics-6d4f9b7c8"),
        ),
        _owned_pod(
            "monitoring",
            NODE_EXPORTER_POD,
            "gpu-3",
            {"app.kubernetes.io/name": "prometheus-node-exporter"},
            ("DaemonSet", "kube-prometheus-stack-prometheus-node-exporter"),
        ),
    ]
    doc["objects"] += [
        _owned_pod(
            "monitoring", HEALTH_POD, "gpu-a100-7", {"app": "gpu-health"}, ("DaemonSet", "gpu-health")
        ),
        _owned_pod(
            "monitoring",
            QUOTA_POD,
            "cpu-2",
            {"app": "gpu-quota"},
            ("ReplicaSet", "gpu-quota-exporter-5f7c9d"),
        ),
    ]
    npd = _owned_pod(
        "kube-system", NPD_POD, "gpu-h100-4", {"app": "node-problem-detector"}, ("DaemonSet", "npd")
    )
    npd["spec"]["hostNetwork"] = True
    npd["status"]["podIP"] = "10.0.4.4"
    smart = _owned_pod(
        "monitoring",
        SMART_POD,
        "gpu-a100-8",
        {"app.kubernetes.io/name": "smartctl-exporter"},
        ("DaemonSet", "smart"),
    )
    smart["status"]["podIP"] = "10.244.9.9"
    vllm = _owned_pod("ml", "vllm-0", "gpu-a100-2", {"app": "vllm"}, ("StatefulSet", "vllm"), gpus=1)
    vllm["spec"]["hostNetwork"] = True
    vllm["status"]["podIP"] = "10.0.2.2"
    doc["objects"] += [npd, smart, vllm]
    path = folder / "probe5-fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def bot(
    slack: FakeSlack, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    store = RedisState(redis_server.url, prefix=PREFIX)
    for key in store._redis.scan_iter(f"{PREFIX}*"):
        store._redis.delete(key)
    b = inprocess_bot(
        slack.url,
        probe_scenario(tmp_path_factory.mktemp("probe5")),
        store,
        GPUBOT_ALERT_TOKEN=TOKEN,
        GPUBOT_ALERT_CHANNEL=CHANNEL,
        GPUBOT_ALERT_MAX_THREADS_PER_HOUR="100",  # each probe's subject gets its thread
    )
    server = start_http(b, "127.0.0.1", 0, events=True)
    b.url = f"http://127.0.0.1:{server.server_address[1]}/alertmanager"
    try:
        yield b
    finally:
        server.shutdown()
        server.server_close()
        b.shutdown(wait=True)
        for key in store._redis.scan_iter(f"{PREFIX}*"):
            store._redis.delete(key)
        store.close()


def deliver(url: str, alerts: list[dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url,
        data=json.dumps(payload(alerts)).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def am_alert(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """tests/alertmanager.alert's shape with any labels (`status`, `severity` are label names too)."""
    a = alert(name)
    a["labels"] = {"alertname": name, "severity": "critical", **labels}
    a["fingerprint"] = fingerprint(a["labels"])
    return a


def root_heads(slack: FakeSlack) -> list[str]:
    """The first line of every incident root in the alert channel."""
    heads = []
    for c in slack.calls_to("chat.postMessage"):
        if c.params.get("channel") != CHANNEL or c.params.get("thread_ts"):
            continue
        raw = c.params.get("blocks")
        blocks = json.loads(raw) if isinstance(raw, str) else raw
        heads.append(str(blocks[0]["text"]["text"]))
    return heads


def unknown_count() -> float:
    return (
        metrics.REGISTRY.get_sample_value(
            "gpubot_alerts_total", {"status": "firing", "decision": "unknown_subject"}
        )
        or 0.0
    )


# dcgm-exporter's labels on every series, and the GPU Operator ServiceMonitor's target labels.
DCGM = {
    "gpu": "3",
    "UUID": "GPU-0f3c2a91-5bde-4c1e-9a77-ddee5da83d07",
    "device": "nvidia3",
    "modelName": "NVIDIA H100 80GB HBM3",
    "pci_bus_id": "00000000:9B:00.0",
    "DCGM_FI_DRIVER_VERSION": "550.90.07",
    "Hostname": "gpu-7",
}
DCGM_TARGET = {
    "container": "nvidia-dcgm-exporter",
    "endpoint": "gpu-metrics",
    "instance": "10.244.3.17:9400",
    "job": "nvidia-dcgm-exporter",
    "namespace": "gpu-operator",
    "pod": DCGM_POD,
    "service": "nvidia-dcgm-exporter",
}
KSM_TARGET = {
    "container": "kube-state-metrics",
    "endpoint": "http",
    "instance": "10.244.0.5:8080",
    "job": "kube-state-metrics",
    "service": "kube-prometheus-stack-kube-state-metrics",
}
KSM_OWN = {**KSM_TARGET, "namespace": "monitoring", "pod": KSM_POD}  # scraped honorLabels false

# (probe id, alert name, labels, expected root subject or None for "no thread, counted").
PROBES: list[tuple[str, str, dict[str, str], str | None]] = [
    (
        "dcgm-honorlabels-false-workload",
        "GPUXidError",
        {**DCGM, **DCGM_TARGET, "exported_namespace": "ml", "exported_pod": "trainer-0"},
        "pod `ml/trainer-0`",
    ),
    ("dcgm-idle-gpu", "GPUXidError", {**DCGM, **DCGM_TARGET, "gpu": "5"}, "node `gpu-7`"),
    (
        "dcgm-without-node-name",
        "GPUThermalViolation",
        {**DCGM, **DCGM_TARGET, "Hostname": DCGM_POD_A100, "pod": DCGM_POD_A100, "gpu": "6"},
        "node `gpu-a100-3`",
    ),
    (
        "dcgm-kubernetes-node-relabel",
        "GPURowRemapFailure",
        {
            **DCGM,
            "Hostname": "nvidia-dcgm-exporter-p8r2t",
            "kubernetes_node": "gpu-a100-4",
            "instance": "10.244.5.9:9400",
        },
        "node `gpu-a100-4`",
    ),
    (
        "dcgm-lowercase-hostname",
        "GPUXidError",
        {"gpu": "0", "UUID": "GPU-4b1e", "modelName": "NVIDIA L4", "hostname": "gpu-l4-5"},
        "node `gpu-l4-5`",
    ),
    (
        "ksm-crashlooping-honorlabels",
        "KubePodCrashLooping",
        {
            **KSM_TARGET,
            "namespace": "ml",
            "pod": "infer-5c9d7-abcde",
            "container": "main",
            "reason": "CrashLoopBackOff",
            "uid": "5a1e9c1e-7d2b-4a8e-9f3c-1f6f2d8b9e10",
        },
        "pod `ml/infer-5c9d7-abcde`",
    ),
    ("ksm-pod-not-ready", "KubePodNotReady", {"namespace": "ml", "pod": "queued-0"}, "pod `ml/queued-0`"),
    (
        "ksm-node-not-ready",
        "KubeNodeNotReady",
        {**KSM_OWN, "node": "gpu-a100-5", "condition": "Ready", "status": "true"},
        "node `gpu-a100-5`",
    ),
    (
        "ksm-honorlabels-false-exported-pod",
        "KubeContainerWaiting",
        {
            **KSM_OWN,
            "exported_namespace": "ml",
            "exported_pod": "infer-5c9d7-fghij",
            "exported_container": "main",
            "reason": "ContainerCreating",
        },
        "pod `ml/infer-5c9d7-fghij`",
    ),
    # KSM's own pod is not what its alerts are about, and its node (a CPU node) even less: a
    # Deployment's object or a pod already gone names no subject.
    (
        "ksm-honorlabels-false-deployment",
        "KubeDeploymentReplicasMismatch",
        {**KSM_OWN, "exported_namespace": "ml", "deployment": "infer"},
        None,
    ),
    (
        "ksm-honorlabels-false-pod-gone",
        "KubePodCrashLooping",
        {
            **KSM_OWN,
            "exported_namespace": "ml",
            "exported_pod": "trainer-7-gone",
            "exported_container": "trainer",
            "reason": "CrashLoopBackOff",
        },
        None,
    ),
    # A team's own exporters, scraped with honorLabels false too (names gpubot does not know): the
    # target's own pod in namespace/pod is never the subject; a DaemonSet's stands for its node.
    (
        "own-daemonset-exporter-pod-gone",
        "GPUHealthCheckFailed",
        {
            "namespace": "monitoring",
            "pod": HEALTH_POD,
            "instance": "10.244.7.3:9500",
            "job": "gpu-health",
            "exported_namespace": "ml",
            "exported_pod": "trainer-9-gone",
        },
        "node `gpu-a100-7`",
    ),
    (
        "own-deployment-exporter",
        "GPUQuotaExceeded",
        {
            "namespace": "monitoring",
            "pod": QUOTA_POD,
            "instance": "10.244.0.9:8080",
            "job": "gpu-quota",
            "exported_namespace": "ml",
        },
        None,
    ),
    # Exporters whose series name no pod, so Prometheus adds its target's namespace/pod and no
    # exported_*: node-problem-detector (host network) and a smartctl exporter (pod network). The
    # pod named is the one scraped (its IP is the instance's): it stands for its node.
    (
        "npd-target-labels",
        "NodeKernelDeadlock",
        {
            "instance": "10.0.4.4:20257",
            "job": "node-problem-detector",
            "namespace": "kube-system",
            "pod": NPD_POD,
            "type": "KernelDeadlock",
        },
        "node `gpu-h100-4`",
    ),
    (
        "daemonset-exporter-on-pod-network",
        "SmartDeviceTemperatureHigh",
        {
            "instance": "10.244.9.9:9633",
            "job": "smartctl",
            "namespace": "monitoring",
            "pod": SMART_POD,
            "device": "nvme0",
        },
        "node `gpu-a100-8`",
    ),
    # A workload scraped for its own metrics (a host-network inference server): its pod.
    (
        "workload-scraped-itself",
        "VLLMRequestLatencyHigh",
        {"instance": "10.0.2.2:8000", "job": "vllm", "namespace": "ml", "pod": "vllm-0"},
        "pod `ml/vllm-0`",
    ),
    # The same pod crash-looping, as kube-state-metrics reports it (its own instance): the pod.
    (
        "ksm-crashlooping-daemonset-pod",
        "KubePodCrashLooping",
        {
            **KSM_TARGET,
            "namespace": "kube-system",
            "pod": NPD_POD,
            "container": "main",
            "reason": "CrashLoopBackOff",
        },
        f"pod `kube-system/{NPD_POD}`",
    ),
    (
        "node-exporter-target-labels",
        "NodeFilesystemSpaceFillingUp",
        {
            "instance": "10.0.1.3:9100",
            "job": "node-exporter",
            "namespace": "monitoring",
            "pod": NODE_EXPORTER_POD,
            "container": "node-exporter",
            "device": "/dev/nvme0n1p1",
            "fstype": "ext4",
            "mountpoint": "/",
        },
        "node `gpu-3`",
    ),
    (
        "node-exporter-instance-relabelled-to-node",
        "NodeMemoryHighUtilization",
        {"instance": "gpu-h100-9", "job": "node-exporter"},
        "node `gpu-h100-9`",
    ),
    (
        "host-network-exporter-ip-port",
        "GPUHighTemperature",
        {"instance": "10.0.3.7:9400", "job": "dcgm", "gpu": "2"},
        "node `gpu-l4-7`",
    ),
    # dcgm-exporter as a host service on bare metal, scraped by static config: the host's own name,
    # in capitals; the kubelet lowercases it into the node's name, and DNS names know no case.
    (
        "host-service-hostname-in-capitals",
        "GPUXidError",
        {"Hostname": "GPU-H100-11", "gpu": "4"},
        "node `gpu-h100-11`",
    ),
    (
        "static-target-in-capitals",
        "GPUPowerViolation",
        {"instance": "GPU-H100-12:9400", "job": "dcgm-hosts", "gpu": "1"},
        "node `gpu-h100-12`",
    ),
    ("watchdog", "Watchdog", {"prometheus": "monitoring/kube-prometheus-stack-prometheus"}, None),
    ("info-inhibitor", "InfoInhibitor", {"namespace": "ml", "severity": "none"}, None),
    ("unknown-node", "GPUXidError", {**DCGM, "Hostname": "gpu-h100-99"}, None),
]


@pytest.mark.parametrize(("name", "labels", "expected"), [p[1:] for p in PROBES], ids=[p[0] for p in PROBES])
def test_each_exporters_labels_open_the_thread_of_their_subject(
    bot: Any, slack: FakeSlack, name: str, labels: dict[str, str], expected: str | None
) -> None:
    before = len(root_heads(slack))
    unknown = unknown_count()
    status, answer = deliver(bot.url, [am_alert(name, labels)])
    assert status == 200, answer
    if expected is None:
        # Nothing to post: the answer says so, nothing was queued for Slack, the alert was counted.
        assert answer == {"alerts": 1, "incidents_to_post": 0}
        assert unknown_count() == unknown + 1
        wait_for("the bot's pool to drain", lambda: not bot.pending)
        assert len(root_heads(slack)) == before
        return
    assert answer["incidents_to_post"] == 1
    wait_for("the bot's pool to drain", lambda: not bot.pending)
    [head] = root_heads(slack)[before:]
    assert f"*{name}* firing on {expected}" in head
