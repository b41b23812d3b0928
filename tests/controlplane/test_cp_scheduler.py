"""Suite 4 of issue 29: the real kube-scheduler's own words. Pending GPU pods against fake nodes (API
objects, status written as a kubelet would), the FailedScheduling event the scheduler itself writes
(events.k8s.io/v1: firstTimestamp/lastTimestamp null, source {}), read back through the real API and
walked: layer 1 names the right code for each. The messages are pinned as the server wrote them."""

from __future__ import annotations

import copy
import json
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


def pod(name: str, gpus: int = 1, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
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


ZONE = "topology.kubernetes.io/zone"
SPREAD = {
    "maxSkew": 1,
    "topologyKey": ZONE,
    "whenUnsatisfiable": "DoNotSchedule",
    "labelSelector": {"matchLabels": {"app": "spread"}},
}


def bound(name: str, node_name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A running pod already bound to a node (no GPU), counted by the spread constraint."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running"},
    }


def zonal_volume(zone: str) -> list[dict[str, Any]]:
    """A PersistentVolume in one zone, bound to the claim `data` (a zonal disk, pre-bound both ways)."""
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"zonal-pv-{zone}"},
        "spec": {
            "capacity": {"storage": "100Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "claimRef": {"namespace": NS, "name": "data"},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0abc"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    }
    pvc = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": NS,
            # what the PV controller writes once it bound the two
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"},
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "",
            "volumeName": f"zonal-pv-{zone}",
            "resources": {"requests": {"storage": "100Gi"}},
        },
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "100Gi"}},
    }
    return [pv, pvc]


DRIVER = "gpu.nvidia.com"


def dra_one_gpu(node_name: str) -> list[dict[str, Any]]:
    """A DeviceClass, one GPU published on the node, and a claim for two."""
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node_name}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": "gpu-0",
                        "attributes": {
                            "productName": {"string": "NVIDIA H100 80GB HBM3"},
                            "type": {"string": "gpu"},
                        },
                    }
                ],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "two-gpus", "namespace": NS},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": DRIVER,
                                "allocationMode": "ExactCount",
                                "count": 2,
                            },
                        }
                    ]
                }
            },
        },
    ]


def dra_pod(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                    "resources": {"claims": [{"name": "gpu"}]},
                }
            ],
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
    "topology-spread": (
        [
            node("g1", 8, labels={ZONE: "a"}),
            node("g2", 0, labels={ZONE: "b"}),
            *[bound(f"spread-{i}", "g1", labels={"app": "spread"}) for i in range(2)],
        ],
        pod("spread-new", labels={"app": "spread"}, topologySpreadConstraints=[SPREAD]),
        "node(s) didn't match pod topology spread constraints",
        "L1_TOPOLOGY_SPREAD",
    ),
    "zonal-volume": (
        [node("g1", 8, labels={ZONE: "a"}), *zonal_volume("b")],
        pod("zonal", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]),
        "1 node(s) didn't match PersistentVolume's node affinity",
        "L1_VOLUME_NODE_AFFINITY",
    ),
    "dra-claim": (
        [node("g1", 0), *dra_one_gpu("g1")],
        dra_pod("dra", "two-gpus"),
        "cannot allocate all claims",
        "L1_DRA_SELECTOR_UNSATISFIED",  # no node publishes two: the count, not a taken device,
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


def path_of(obj: dict[str, Any]) -> str:
    api, kind, meta = obj["apiVersion"], obj["kind"], obj["metadata"]
    root = f"/api/{api}" if "/" not in api else f"/apis/{api}"
    if meta.get("namespace"):
        root += f"/namespaces/{meta['namespace']}"
    plural = {
        "PersistentVolume": "persistentvolumes",
        "PersistentVolumeClaim": "persistentvolumeclaims",
        "DeviceClass": "deviceclasses",
        "ResourceSlice": "resourceslices",
        "ResourceClaim": "resourceclaims",
        "Node": "nodes",
        "Pod": "pods",
    }[kind]
    return f"{root}/{plural}"


def create(cp: ControlPlane, obj: dict[str, Any]) -> str:
    """Create `obj`; its status (a kubelet's or a controller's) through the status subresource."""
    status = obj.pop("status", None)
    where = path_of(obj)
    created = cp.rest.post(where, obj)
    path = f"{where}/{obj['metadata']['name']}"
    if status:
        created["status"] = status
        cp.rest.put(f"{path}/status", created)
    return path


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


MESSAGES: dict[str, str] = {}  # what the scheduler wrote, per case (printed by -s for the docs)


@pytest.mark.parametrize("case", list(CASES))
def test_the_scheduler_writes_and_layer_one_reads(scheduler: ControlPlane, case: str) -> None:
    cp = scheduler
    # Node names of their own per case: a node deleted by the case before may still be in the
    # scheduler's cache, and a pod bound to its namesake would get no FailedScheduling at all.
    nodes, body, words, code = json.loads(
        json.dumps(CASES[case]).replace('"g1', f'"{case}-g1').replace('"g2', f'"{case}-g2')
    )
    made: list[str] = []
    try:
        for obj in copy.deepcopy(nodes):
            made.append(create(cp, obj))
        cp.rest.post(f"/api/v1/namespaces/{NS}/pods", body)
        name = body["metadata"]["name"]
        made.append(f"/api/v1/namespaces/{NS}/pods/{name}")
        event = failed_scheduling(cp, name)
        # The events.k8s.io/v1 recorder's shape, in the core/v1 view.
        assert event["firstTimestamp"] is None and event["lastTimestamp"] is None, event
        assert event.get("source") == {} and event["reportingComponent"] == "default-scheduler", event
        assert event["eventTime"], event
        MESSAGES[case] = event["message"]
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
