"""Synthetic DRA fleets for the benchmarks and the request-count test: any size, real shapes.

Every node publishes one ResourceSlice of driver gpu.nvidia.com with `gpus` H100s (the attributes
and capacity the NVIDIA DRA driver's deviceinfo.go publishes); `claims` allocated ResourceClaims hold
one GPU each, spread evenly; one node (dra-00001) has a GPU tainted gpu.nvidia.com/xid=79. The
target `ml/finetune-0` is pending with a 4-GPU claim no node can satisfy: the walk takes every
branch of layer 1 (CEL on every device, every claim listed, the taint) and goes to layer 5.
"""

from __future__ import annotations

from typing import Any

from tests.slack_harness import node_object

DRIVER = "gpu.nvidia.com"
NOW = "2026-11-29T14:00:00Z"


def node_name(i: int) -> str:
    return f"dra-{i:05d}"


def _node(i: int) -> dict[str, Any]:
    return node_object(
        node_name(i),
        {"feature.node.kubernetes.io/pci-10de.present": "true"},
        {"cpu": "96", "memory": "2113442200Ki", "pods": "110"},
        {"cpu": "96", "memory": "2113339800Ki", "pods": "110"},
        {"kernelVersion": "6.8.0-60-generic", "osImage": "Ubuntu 24.04.2 LTS", "kubeletVersion": "v1.34.2"},
    )


def _device(i: int, g: int, tainted: bool) -> dict[str, Any]:
    dev: dict[str, Any] = {
        "name": f"gpu-{g}",
        "attributes": {
            "architecture": {"string": "Hopper"},
            "brand": {"string": "Nvidia"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "cudaDriverVersion": {"version": "13.1.0"},
            "driverVersion": {"version": "595.91.7"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x18 + 16 * g:02x}:00.0"},
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{i:08x}-{g:04x}-4000-8000-{i * 8 + g:012x}"},
        },
        "capacity": {"memory": {"value": "81559Mi"}},
    }
    if tainted:
        dev["taints"] = [
            {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule", "timeAdded": NOW}
        ]
    return dev


def _slice(i: int, gpus: int) -> dict[str, Any]:
    name = node_name(i)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{name}-gpu.nvidia.com-x7k2p"},
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": [_device(i, g, tainted=i == 1 and g == 0) for g in range(gpus)],
        },
    }


def _claim(k: int, node: str, device: str) -> dict[str, Any]:
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1},
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"serve-{k:05d}-gpu-4qz7m", "namespace": "serving"},
        "spec": {"devices": {"requests": [request]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]}
            },
            "reservedFor": [{"resource": "pods", "name": f"serve-{k:05d}", "uid": f"uid-{k}"}],
        },
    }


def make_dra_fleet(nodes: int, gpus: int = 8, claims: int = 10_000) -> dict[str, Any]:
    """A scenario document (kind: Scenario) for a DRA fleet of this size."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": DRIVER},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"
                        }
                    }
                ]
            },
        }
    ]
    for i in range(1, nodes + 1):
        objects += [_node(i), _slice(i, gpus)]
    # Claims fill GPUs node by node, round robin, leaving fewer than 4 free on every node.
    per_node = min(gpus - 3 if gpus > 3 else gpus, max(1, -(-claims // nodes)))
    k = 0
    for i in range(1, nodes + 1):
        for g in range(1, per_node + 1):
            if k >= claims or g >= gpus:
                break
            objects.append(_claim(k, node_name(i), f"gpu-{g}"))
            k += 1
    expr = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0 || device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"
    request = {
        "name": "gpus",
        "exactly": {
            "deviceClassName": DRIVER,
            "allocationMode": "ExactCount",
            "count": 4,
            "selectors": [{"cel": {"expression": expr}}],
        },
    }
    objects += [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "finetune-0-gpus-8ssvq", "namespace": "ml"},
            "spec": {"devices": {"requests": [request]}},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "finetune-0", "namespace": "ml"},
            "spec": {
                "containers": [
                    {
                        "name": "trainer",
                        "image": "nvcr.io/nvidia/pytorch:25.09-py3",
                        "resources": {"claims": [{"name": "gpus"}]},
                    }
                ],
                "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "four-h100"}],
            },
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": f"0/{nodes} nodes are available: {nodes} cannot allocate all claims.",
                    }
                ],
                "resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "finetune-0-gpus-8ssvq"}],
            },
        },
    ]
    return {"kind": "Scenario", "name": f"dra-fleet-{nodes}", "now": NOW, "objects": objects}
