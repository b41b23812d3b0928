"""Alert labels → the node or pod they concern, with the label sets real exporters produce.

The cluster is a fleet: GPU nodes of two models with InternalIP and Hostname
addresses, workload pods, the GPU Operator's dcgm-exporter and device-plugin
pods, kube-state-metrics and node-exporter pods.
"""

from __future__ import annotations

from typing import Any

import pytest

from bot.sources.snapshot import SnapshotCluster
from handlers.alert_subjects import ClusterDirectory, Subject, instance_host, subject_of
from layers.sources import K8sObject, SourceError


def _node(name: str, ip: str, product: str) -> K8sObject:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": product}},
        "status": {
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "capacity": {"nvidia.com/gpu": "8"},
            "allocatable": {"nvidia.com/gpu": "8"},
        },
    }


def _pod(ns: str, name: str, node: str | None, labels: dict[str, str]) -> K8sObject:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def fleet() -> SnapshotCluster:
    nodes = [_node(f"gpu-h100-{i}", f"10.0.1.{i}", "NVIDIA-H100-80GB-HBM3") for i in range(1, 25)]
    nodes += [_node(f"gpu-a100-{i}", f"10.0.2.{i}", "NVIDIA-A100-SXM4-80GB") for i in range(1, 13)]
    nodes.append(_node("ip-10-0-3-7.ec2.internal", "10.0.3.7", "NVIDIA-L4"))
    pods = [
        _pod("ml", "trainer-0", "gpu-h100-7", {"app": "trainer"}),
        _pod("ml", "queued-0", None, {"app": "trainer"}),
        _pod("gpu-operator", "nvidia-dcgm-exporter-7xk2p", "gpu-h100-7", {"app": "nvidia-dcgm-exporter"}),
        _pod(
            "gpu-operator",
            "nvidia-device-plugin-daemonset-x7k2p",
            "gpu-h100-7",
            {"app": "nvidia-device-plugin-daemonset"},
        ),
        _pod("monitoring", "dcgm-exporter-lcxpl", "gpu-a100-3", {"app.kubernetes.io/name": "dcgm-exporter"}),
        _pod(
            "monitoring",
            "kube-state-metrics-6d4f9",
            "cpu-1",
            {"app.kubernetes.io/name": "kube-state-metrics"},
        ),
        _pod(
            "monitoring",
            "node-exporter-q2w3e",
            "gpu-h100-7",
            {"app.kubernetes.io/name": "prometheus-node-exporter"},
        ),
    ]
    return SnapshotCluster(nodes + pods)


@pytest.fixture(scope="module")
def directory() -> ClusterDirectory:
    return ClusterDirectory(fleet())


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        # dcgm-exporter 3.x with NODE_NAME: Hostname is the node; no pod on the GPU.
        (
            {"alertname": "GPUXidError", "Hostname": "gpu-h100-7", "gpu": "3", "UUID": "GPU-7ad09335-aadb"},
            Subject("node", "gpu-h100-7"),
        ),
        # dcgm-exporter 4.5+: lowercase hostname.
        ({"alertname": "GPUXidError", "hostname": "gpu-a100-2", "gpu": "1"}, Subject("node", "gpu-a100-2")),
        # No NODE_NAME: Hostname is the exporter pod's name (sample 28), mapped through its pod.
        (
            {
                "alertname": "GPUXidError",
                "Hostname": "dcgm-exporter-lcxpl",
                "container": "",
                "namespace": "",
                "pod": "",
            },
            Subject("node", "gpu-a100-3"),
        ),
        # Prometheus kept the target's labels: pod/namespace are the exporter's, the workload is exported_*.
        (
            {
                "alertname": "GPUXidError",
                "Hostname": "gpu-h100-7",
                "namespace": "gpu-operator",
                "pod": "nvidia-dcgm-exporter-7xk2p",
                "exported_namespace": "ml",
                "exported_pod": "trainer-0",
                "instance": "10.0.1.7:9400",
            },
            Subject("pod", "trainer-0", "ml", "gpu-h100-7"),
        ),
        # honorLabels: namespace/pod name the workload directly.
        (
            {"alertname": "GPUXidError", "Hostname": "gpu-h100-7", "namespace": "ml", "pod": "trainer-0"},
            Subject("pod", "trainer-0", "ml", "gpu-h100-7"),
        ),
        # The pod named is the exporter itself: the alert concerns the node.
        (
            {
                "alertname": "GPUXidError",
                "Hostname": "gpu-h100-7",
                "namespace": "gpu-operator",
                "pod": "nvidia-dcgm-exporter-7xk2p",
            },
            Subject("node", "gpu-h100-7"),
        ),
        # A pod that no longer exists: the node.
        (
            {
                "alertname": "GPUXidError",
                "Hostname": "gpu-h100-7",
                "exported_namespace": "ml",
                "exported_pod": "gone-0",
            },
            Subject("node", "gpu-h100-7"),
        ),
        # kube-state-metrics: node; and a pending GPU pod (no node yet).
        ({"alertname": "GPUAllocatableBelowCapacity", "node": "gpu-a100-12"}, Subject("node", "gpu-a100-12")),
        (
            {"alertname": "GPUPodPending", "namespace": "ml", "pod": "queued-0", "job": "kube-state-metrics"},
            Subject("pod", "queued-0", "ml", None),
        ),
        # kube-state-metrics scraped without honorLabels: pod is KSM's own, the node label is the subject.
        (
            {
                "alertname": "GPUAllocatableBelowCapacity",
                "node": "gpu-h100-2",
                "namespace": "monitoring",
                "pod": "kube-state-metrics-6d4f9",
            },
            Subject("node", "gpu-h100-2"),
        ),
        # The device plugin's own pod restarting: its node.
        (
            {
                "alertname": "KubePodCrashLooping",
                "namespace": "gpu-operator",
                "pod": "nvidia-device-plugin-daemonset-x7k2p",
            },
            Subject("node", "gpu-h100-7"),
        ),
        # node-exporter: instance through the node's addresses (IP, host name, with and without port).
        (
            {"alertname": "NodeHighTemp", "instance": "10.0.2.5:9100", "job": "node-exporter"},
            Subject("node", "gpu-a100-5"),
        ),
        (
            {"alertname": "NodeHighTemp", "instance": "ip-10-0-3-7.ec2.internal:9100"},
            Subject("node", "ip-10-0-3-7.ec2.internal"),
        ),
        ({"alertname": "NodeHighTemp", "instance": "10.0.1.11"}, Subject("node", "gpu-h100-11")),
        ({"alertname": "NodeDown", "kubernetes_node": "gpu-h100-20"}, Subject("node", "gpu-h100-20")),
    ],
)
def test_real_exporter_labels_name_their_subject(
    directory: ClusterDirectory, labels: dict[str, str], expected: Subject
) -> None:
    assert subject_of(labels, directory) == expected


@pytest.mark.parametrize(
    "labels",
    [
        {"alertname": "Watchdog"},  # Alertmanager's always-firing heartbeat
        {"alertname": "GPUXidError", "Hostname": "gpu-h100-99"},  # not a node of this cluster
        {"alertname": "NodeHighTemp", "instance": "10.9.9.9:9100"},
        {"alertname": "TargetDown", "job": "kubelet", "namespace": "kube-system"},
        {"alertname": "X", "node": "Not A Valid Name!"},
        {"alertname": "X", "namespace": "ml", "pod": "../../etc"},
    ],
)
def test_alerts_naming_nothing_here_have_no_subject(
    directory: ClusterDirectory, labels: dict[str, str]
) -> None:
    assert subject_of(labels, directory) is None


def test_instance_hosts() -> None:
    assert instance_host("10.0.3.7:9100") == "10.0.3.7"
    assert instance_host("[fd00::7]:9100") == "fd00::7"
    assert instance_host("gpu-7") == "gpu-7"


class _Down:
    source = "down"

    def __getattr__(self, name: str) -> Any:
        def fail(*_a: Any, **_k: Any) -> Any:
            raise SourceError("unavailable", "API server at https://10.0.0.1 did not answer")

        return fail


def test_without_the_cluster_labels_are_taken_as_named() -> None:
    down = ClusterDirectory(_Down())  # type: ignore[arg-type]
    assert subject_of(
        {"alertname": "A", "Hostname": "gpu-7", "pod": "x", "namespace": "ml"}, down
    ) == Subject("node", "gpu-7")
    assert subject_of({"alertname": "A", "namespace": "ml", "pod": "trainer-0"}, down) == Subject(
        "pod", "trainer-0", "ml"
    )
    assert subject_of({"alertname": "A", "instance": "gpu-9.example:9100"}, down) == Subject(
        "node", "gpu-9.example"
    )
    assert subject_of({"alertname": "A", "instance": "10.0.0.9:9100"}, down) is None


def test_a_node_that_just_joined_is_found_after_a_recheck() -> None:
    cluster = fleet()
    now = [0.0]
    directory = ClusterDirectory(cluster, ttl_s=60, recheck_s=10, clock=lambda: now[0])
    assert not directory.has_node("gpu-new")
    cluster.add(_node("gpu-new", "10.0.9.1", "NVIDIA-L4"))
    now[0] = 5.0
    assert not directory.has_node("gpu-new")  # the list is 5 s old: not listed again for every alert
    now[0] = 11.0
    assert directory.has_node("gpu-new")
