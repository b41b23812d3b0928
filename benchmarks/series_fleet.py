"""A series-heavy fleet for the replay benchmark: every GPU of the fleet has its DCGM health series.

    python benchmarks/series_fleet.py OUT.json [--nodes 2000]

2,000 nodes x 8 GPUs, and for every GPU the health series a dcgm-exporter with the
GPU Operator's default counters exports (XID, remapped rows, row-remap failure and
pending, ECC volatile and aggregate, clock events by reason, Xid counts), three points each
(24 h ago, 1 h ago, now), with the exporter's full label set. The operator's pods run
around the target's node only (the rest of the fleet has nodes and series, as a pasted
`kubectl get nodes` plus a Prometheus dump has). The target `ml/target-0` is bound to
`gpu-00001`, whose GPU 3 has an Xid 79 and rising remapped rows: a bound pod's walk reads
one node's series out of ~224,000 (~205 MB at 2,000 nodes).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.fleet import OPERANDS, _node, _operand_pod, node_name  # noqa: E402

TARGET_NODE = 1
SICK_GPU = 3
TIMES = (-86400, -3600, 0)
# The exporter's per-GPU gauges and counters (dcgm-exporter default-counters.csv), each one series.
GAUGES = (
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
)
# Every reason the exporter counts (idle, power cap, sync boost and application clocks included:
# the walk must skip them, and they are most of the series).
CLOCK_EVENTS = (
    "gpu_idle",
    "clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal",
    "hw_thermal",
    "hw_power_brake",
)


def _labels(i: int, g: int) -> dict[str, str]:
    node = node_name(i)
    return {
        "DCGM_FI_DRIVER_VERSION": "570.148.08",
        "Hostname": node,
        "UUID": f"GPU-{i:05d}{g:03d}-4cc8-97e4-e817-5a36dfd2885e",
        "cluster": "prod-us-east-1",
        "container": "nvidia-dcgm-exporter",
        "device": f"nvidia{g}",
        "endpoint": "gpu-metrics",
        "gpu": str(g),
        "instance": f"10.{i // 250}.{i % 250}.{10 + g}:9400",
        "job": "nvidia-dcgm-exporter",
        "modelName": "NVIDIA H100 80GB HBM3",
        "namespace": "gpu-operator",
        "node": node,
        "pci_bus_id": f"00000000:{0x18 + g * 0x10:02X}:00.0",
        "pod": f"nvidia-dcgm-exporter-{i:05x}",
        "prometheus": "monitoring/k8s",
        "service": "nvidia-dcgm-exporter",
    }


def _series(
    name: str, labels: dict[str, str], values: tuple[float, float, float], **extra: str
) -> dict[str, Any]:
    return {
        "metric": {"__name__": name, **labels, **extra},
        "values": [[t, v] for t, v in zip(TIMES, values, strict=True)],
    }


def make_series_fleet(nodes: int = 2000, gpus: int = 8) -> dict[str, Any]:
    objects: list[dict[str, Any]] = []
    metrics: list[dict[str, Any]] = []
    logs: dict[str, str] = {}
    for i in range(nodes):
        objects.append(_node(i, gpus, sick=i == TARGET_NODE))
        for g in range(gpus):
            labels = _labels(i, g)
            bad = i == TARGET_NODE and g == SICK_GPU
            for name in GAUGES:
                values: tuple[float, float, float] = (0, 0, 0)
                if bad and name == "DCGM_FI_DEV_XID_ERRORS":
                    values = (0, 0, 79)
                elif bad and name == "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS":
                    values = (0, 12, 14)
                metrics.append(_series(name, labels, values))
            for reason in CLOCK_EVENTS:
                metrics.append(_series("DCGM_EXP_CLOCK_EVENTS_COUNT", labels, (0, 0, 0), clock_event=reason))
            if bad:
                metrics.append(_series("DCGM_EXP_XID_ERRORS_COUNT", labels, (0, 0, 1), xid="79"))
    # The operator's pods around the target only.
    for i in (TARGET_NODE - 1, TARGET_NODE, TARGET_NODE + 1):
        objects.extend(_operand_pod(i, app, container) for app, container in OPERANDS)
    uuid = _labels(TARGET_NODE, SICK_GPU)["UUID"]
    logs[f"gpu-operator/nvidia-device-plugin-daemonset-{TARGET_NODE:05x}/nvidia-device-plugin"] = (
        f"I1129 11:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on Device={uuid}; "
        "marking device as unhealthy.\n"
    )
    objects.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "target-0", "namespace": "ml"},
            "spec": {
                "nodeName": node_name(TARGET_NODE),
                "containers": [
                    {
                        "name": "trainer",
                        "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ],
            },
            "status": {
                "phase": "Running",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True"},
                ],
                "containerStatuses": [
                    {"name": "trainer", "ready": True, "restartCount": 0, "state": {"running": {}}}
                ],
            },
        }
    )
    return {
        "kind": "Scenario",
        "name": f"series-fleet-{nodes}",
        "description": f"{nodes} nodes x {gpus} GPUs, DCGM health series for every GPU",
        "now": "2026-11-29T12:00:00Z",
        "objects": objects,
        "logs": logs,
        "metrics": metrics,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--nodes", type=int, default=2000)
    args = p.parse_args(argv)
    Path(args.out).write_text(json.dumps(make_series_fleet(args.nodes)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
