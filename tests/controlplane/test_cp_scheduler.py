"""Suite 4 of issue 29: the real kube-scheduler's own words. Pending GPU pods against fake nodes (API
objects, status written as a kubelet would), the FailedScheduling event the scheduler itself writes
(events.k8s.io/v1: firstTimestamp/lastTimestamp null, source {}), read back through the real API and
walked: layer 1 names the right code for each. The messages are pinned as the server wrote them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.sources.kube import KubeCluster
from layers.sources import NoTelemetry
from layers.walk import walk
from tests.kubecp import ApiError, ControlPlane

NS = "sched"
GPU = "nvidia.com/gpu"


def node(
    name: str,
    gpus: int,
    labels: dict[str, str] | None = None,
    taints: list[Any] | None = None,
    unschedulable: bool = False,
) -> dict[str, Any]:
    alloc = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                **(labels or {}),
            },
        },
        "spec": {"taints": taints or [], "unschedulable": unschedulable},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "lastHeartbeatTime": "2026-12-07T00:00:00Z",
                    "lastTransitionTime": "2026-12-07T00:00:00Z",
                }
            ],
        },
    }


def pod(name: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"limits": {GPU: str(gpus)}},
                }
            ],
            **spec,
        },
    }


GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
OWNER_TAINT = {
    "key": "sagemaker.amazonaws.com/node-health-status",
    "value": "UnschedulablePendingReboot",
    "effect": "NoSchedule",
}

CASES: dict[str, tuple[list[dict[str, Any]], dict[str, Any], str, str]] = {
    # case: (nodes, pod, words the scheduler writes, the code layer 1 gives)
    "insufficient-gpus": (
        [node("g1", 8), node("g2", 8)],
        pod("big", 16),
        "2 Insufficient nvidia.com/gpu",
        "L1_GPU_EXHAUSTED",
    ),
    "gpu-taint": (
        [node("g1", 8, taints=[GPU_TAINT])],
        pod("untol"),
        "1 node(s) had untolerated taint(s)",
        "L1_UNTOLERATED_TAINT",
    ),
    "owner-taint": (
        [node("g1", 8, taints=[OWNER_TAINT])],
        pod("owner"),
        "1 node(s) had untolerated taint(s)",
        "L1_UNTOLERATED_TAINT",
    ),
    "selector": (
        [node("g1", 8)],
        pod("sel", nodeSelector={"nvidia.com/gpu.product": "NVIDIA-B200"}),
        "1 node(s) didn't match Pod's node affinity/selector",
        "L1_SELECTOR_MISMATCH",
    ),
    "cordoned": (
        [node("g1", 8, unschedulable=True)],
        pod("cord"),
        "1 node(s) were unschedulable",
        "L1_NODES_UNSCHEDULABLE",
    ),
}


@pytest.fixture(scope="module")
def scheduler(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    control_plane.start_scheduler()
    try:
        control_plane.rest.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        )
    except ApiError as e:
        if e.code != 409:
            raise
    yield control_plane
    control_plane.stop_component("kube-scheduler")


def failed_scheduling(cp: ControlPlane, name: str, timeout: float = 30.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = cp.rest.get(f"/api/v1/namespaces/{NS}/events?fieldSelector=involvedObject.name%3D{name}")[
            "items"
        ]
        found = [e for e in events if e.get("reason") == "FailedScheduling"]
        if found:
            return dict(found[0])
        time.sleep(0.3)
    raise AssertionError(f"no FailedScheduling event for {name} in {timeout:.0f} s")


@pytest.mark.parametrize("case", list(CASES))
def test_the_scheduler_writes_and_layer_one_reads(scheduler: ControlPlane, case: str) -> None:
    cp = scheduler
    nodes, body, words, code = CASES[case]
    made: list[str] = []
    try:
        for n in nodes:
            status = n.pop("status")
            created = cp.rest.post("/api/v1/nodes", n)
            created["status"] = status
            cp.rest.put(f"/api/v1/nodes/{n['metadata']['name']}/status", created)
            made.append(f"/api/v1/nodes/{n['metadata']['name']}")
        cp.rest.post(f"/api/v1/namespaces/{NS}/pods", body)
        name = body["metadata"]["name"]
        made.append(f"/api/v1/namespaces/{NS}/pods/{name}")
        event = failed_scheduling(cp, name)
        # The events.k8s.io/v1 recorder's shape, in the core/v1 view.
        assert event["firstTimestamp"] is None and event["lastTimestamp"] is None, event
        assert event.get("source") == {} and event["reportingComponent"] == "default-scheduler", event
        assert event["eventTime"], event
        assert words in event["message"], event["message"]
        kube = KubeCluster.from_config(str(cp.kubeconfig), timeout_s=15.0)
        try:
            result = walk(kube, NoTelemetry(now=time.time()), NS, name)
        finally:
            kube.close()
        codes = [f.code for f in result.layers[0].findings]
        assert code in codes, (event["message"], [f.to_dict() for f in result.layers[0].findings])
    finally:
        for path in reversed(made):
            cp.rest.delete(path)
        for e in cp.rest.get(f"/api/v1/namespaces/{NS}/events")["items"]:
            cp.rest.delete(f"/api/v1/namespaces/{NS}/events/{e['metadata']['name']}")
