"""Synthetic GPU fleets for the benchmarks: realistic shapes, any size.

Nodes carry the GFD labels of a DGX-style H100 node (samples/32), each has
the GPU Operator's operand pods, and every GPU has DCGM series. A few nodes
are sick (capacity above allocatable, rising remapped rows, an Xid) so the
walk and the digest have something to find.
"""

from __future__ import annotations

import random
from typing import Any

OPERANDS = [
    ("nvidia-driver-daemonset", "nvidia-driver-ctr"),
    ("nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr"),
    ("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
    ("gpu-feature-discovery", "gpu-feature-discovery"),
    ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter"),
    ("nvidia-operator-validator", "nvidia-operator-validator"),
]
# Four more, for the replay benchmark's ten operand pods per node: the standalone DCGM, the
# MIG manager, and the validator's two workload pods, which finish once validated.
MORE_OPERANDS = [
    ("nvidia-dcgm", "nvidia-dcgm-ctr"),
    ("nvidia-mig-manager", "nvidia-mig-manager"),
    ("nvidia-cuda-validator", "cuda-validation"),
    ("nvidia-device-plugin-validator", "plugin-validation"),
]
_FINISHED = {"nvidia-cuda-validator", "nvidia-device-plugin-validator"}


def node_name(i: int) -> str:
    return f"gpu-{i:05d}"


def _node(i: int, gpus: int, sick: bool) -> dict[str, Any]:
    alloc = gpus - 1 if sick else gpus
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node_name(i),
            "labels": {
                "kubernetes.io/hostname": node_name(i),
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.count": str(gpus),
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                "nvidia.com/gpu.family": "hopper",
                "nvidia.com/gpu.memory": "81559",
                "nvidia.com/gpu.replicas": "1",
                "nvidia.com/cuda.driver-version.full": "595.91.07",
                "nvidia.com/cuda.runtime-version.full": "13.1",
                "nvidia.com/mig.strategy": "single",
                "feature.node.kubernetes.io/pci-10de.present": "true",
            },
        },
        "spec": {},
        "status": {
            "capacity": {"cpu": "96", "memory": "2113442200Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {
                "cpu": "96",
                "memory": "2113339800Ki",
                "nvidia.com/gpu": str(alloc),
                "pods": "110",
            },
            "conditions": [{"type": "Ready", "status": "True"}],
            "nodeInfo": {
                "kernelVersion": "6.8.0-60-generic",
                "osImage": "Ubuntu 24.04.2 LTS",
                "containerRuntimeVersion": "containerd://1.7.27",
                "kubeletVersion": "v1.33.1",
            },
        },
    }


def _operand_pod(i: int, app: str, container: str) -> dict[str, Any]:
    suffix = f"{i:05x}"
    init = (
        ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"]
        if app == "nvidia-operator-validator"
        else []
    )
    running = {"running": {"startedAt": "2026-11-28T08:00:00Z"}}
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-11-28T08:01:00Z"}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{app}-{suffix}",
            "namespace": "gpu-operator",
            "labels": {"app": app, "app.kubernetes.io/managed-by": "gpu-operator"},
        },
        "spec": {
            "nodeName": node_name(i),
            "containers": [{"name": container, "image": f"nvcr.io/nvidia/{app}:v25.3.0"}],
            "initContainers": [
                {"name": n, "image": "nvcr.io/nvidia/gpu-operator-validator:v25.3.0"} for n in init
            ],
        },
        "status": {
            "phase": "Succeeded" if app in _FINISHED else "Running",
            "conditions": [{"type": "Ready", "status": "False" if app in _FINISHED else "True"}],
            "initContainerStatuses": [
                {
                    "name": n,
                    "ready": True,
                    "restartCount": 0,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
                for n in init
            ],
            "containerStatuses": [
                {
                    "name": container,
                    "ready": app not in _FINISHED,
                    "restartCount": 0,
                    "state": done if app in _FINISHED else running,
                }
            ],
        },
    }


def _workload_pod(i: int, k: int) -> dict[str, Any]:
    """A running CPU pod (no GPU request) of some service, bound to node i."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"web-{i:05d}-{k}", "namespace": "apps", "labels": {"app": "web"}},
        "spec": {
            "nodeName": node_name(i),
            "containers": [{"name": "web", "image": "nginx:1.27", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _history(
    labels: dict[str, str], used: int, bad: bool, samples: int, rng: random.Random
) -> list[dict[str, Any]]:
    """The six series of one GPU with `samples` points over 24 h, as a scrape history gives them."""
    times = [-(86400 * (samples - 1 - k)) // (samples - 1) for k in range(samples)]
    fb = [max(0, min(81559, used + rng.randint(-500, 500))) for _ in times]
    # The sick GPU's rows rise in the last hour and its Xid appears then.
    late = [t >= -3600 for t in times]
    rows = [
        (14 if t == 0 else 12) if bad and lt else (0 if bad else 2) for t, lt in zip(times, late, strict=True)
    ]
    xid = [79 if bad and lt else 0 for lt in late]
    zero = [0] * samples

    def series(name: str, values: list[int]) -> dict[str, Any]:
        return {
            "metric": {"__name__": name, **labels},
            "values": [list(p) for p in zip(times, values, strict=True)],
        }

    return [
        series("DCGM_FI_DEV_FB_USED", fb),
        series("DCGM_FI_DEV_FB_FREE", [81559 - v for v in fb]),
        series("DCGM_FI_DEV_XID_ERRORS", xid),
        series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", rows),
        series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", zero),
        series("DCGM_FI_DEV_ROW_REMAP_FAILURE", zero),
    ]


def make_fleet(
    nodes: int,
    gpus_per_node: int = 8,
    *,
    sick_every: int = 500,
    with_series: bool = True,
    seed: int = 7,
    workload_pods: int = 0,
    operands: int = 6,
    samples: int | None = None,
    sick_series_only: bool = False,
) -> dict[str, Any]:
    """A scenario dict (spec/scenario.md) for a fleet; target pod ml/trainer-0 is pending.

    Each node runs `operands` operand pods (6 or 10), plus `workload_pods` CPU pods of other
    services. Each GPU has six DCGM series of 1-3 samples, or of `samples` evenly over 24 h
    (`sick_series_only`: the sick nodes' GPUs only, for benchmarks/digest_bench.py's stand-in).
    """
    operand_list = (OPERANDS + MORE_OPERANDS)[:operands]
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    logs: dict[str, str] = {}
    for i in range(nodes):
        sick = i % sick_every == 1
        objects.append(_node(i, gpus_per_node, sick))
        for app, container in operand_list:
            objects.append(_operand_pod(i, app, container))
        objects.extend(_workload_pod(i, k) for k in range(workload_pods))
        if sick:
            uuid = f"GPU-{rng.getrandbits(32):08x}-1db1-436e-d958-ddee5da83d07"
            logs[f"gpu-operator/nvidia-device-plugin-daemonset-{i:05x}/nvidia-device-plugin"] = (
                f"I1129 11:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on Device={uuid}; "
                "marking device as unhealthy.\n"
            )
        if not with_series or (sick_series_only and not sick):
            continue
        for g in range(gpus_per_node):
            labels = {
                "gpu": str(g),
                "UUID": f"GPU-{i:05d}{g:03d}-4cc8-97e4-e817-5a36dfd2885e",
                "device": f"nvidia{g}",
                "modelName": "NVIDIA H100 80GB HBM3",
                "Hostname": node_name(i),
            }
            used = rng.randint(1000, 70000)
            bad = sick and g == 3
            if samples:
                metrics.extend(_history(labels, used, bad, samples, rng))
                continue
            metrics.append({"metric": {"__name__": "DCGM_FI_DEV_FB_USED", **labels}, "values": [[0, used]]})
            metrics.append(
                {"metric": {"__name__": "DCGM_FI_DEV_FB_FREE", **labels}, "values": [[0, 81559 - used]]}
            )
            # The last-Xid gauge was scraped a day ago too: the exporter has run for days, so
            # its series did not begin in the last 24 h (a fleet of new series would make the
            # digest's "changed" read return every GPU, which no long-running fleet does).
            metrics.append(
                {
                    "metric": {"__name__": "DCGM_FI_DEV_XID_ERRORS", **labels},
                    "values": [[-88000, 0], [0, 79 if bad else 0]],
                }
            )
            rows = [[-86000, 0], [-3600, 12], [0, 14]] if bad else [[-86000, 2], [0, 2]]
            metrics.append(
                {"metric": {"__name__": "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", **labels}, "values": rows}
            )
            metrics.append(
                {
                    "metric": {"__name__": "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", **labels},
                    "values": [[-86000, 0], [0, 0]],
                }
            )
            metrics.append(
                {"metric": {"__name__": "DCGM_FI_DEV_ROW_REMAP_FAILURE", **labels}, "values": [[0, 0]]}
            )
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer-0", "namespace": "ml"},
            "spec": {
                "containers": [
                    {
                        "name": "trainer",
                        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                        "resources": {"limits": {"nvidia.com/gpu": "8"}},
                    }
                ]
            },
            "status": {
                "phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            },
        }
    )
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "trainer-0.1", "namespace": "ml"},
            "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "trainer-0"},
            "reason": "FailedScheduling",
            "type": "Warning",
            "message": f"0/{nodes} nodes are available: {nodes} Insufficient nvidia.com/gpu. preemption: 0/{nodes} nodes are available: {nodes} No preemption victims found for incoming pod.",
        }
    )
    return {
        "kind": "Scenario",
        "name": f"fleet-{nodes}",
        "description": f"Synthetic fleet of {nodes} nodes x {gpus_per_node} GPUs",
        "now": "2026-11-29T12:00:00Z",
        "objects": objects,
        "logs": logs,
        "metrics": metrics,
    }
