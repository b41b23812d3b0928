"""What the probe3 incidents add to a fleet (tests/incidents/fleets.py): cordons, a node the node
controller tainted unreachable, full nodes, DCGM labels as dcgm-exporter 3.3+ writes them, a GPU lost
with the device plugin's lines, the MIG mixed strategy's resources."""

from __future__ import annotations

from tests.incidents.fleets import MODELS, OPERATOR_VERSION, Fleet, uuid_of

DAY = 86400
EDGE = -DAY + 300  # the first sample of a day's history: never on the window's edge
VAL = f"nvcr.io/nvidia/cloud-native/gpu-operator-validator:{OPERATOR_VERSION}"
CP_TAINT = "1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"


def cordon(f: Fleet, node: str, when: str = "2026-11-28T16:40:00Z") -> None:
    n = f.node(node)
    n["spec"]["unschedulable"] = True
    n["spec"]["taints"] = [
        *(n["spec"].get("taints") or []),
        {"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "timeAdded": when},
    ]


def unreachable(f: Fleet, node: str) -> None:
    """What the node lifecycle controller does when the kubelet stops posting status."""
    n = f.node(node)
    n["spec"]["taints"] = [
        {
            "effect": "NoSchedule",
            "key": "node.kubernetes.io/unreachable",
            "timeAdded": "2026-11-29T09:31:12Z",
        },
        {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "timeAdded": "2026-11-29T09:31:17Z"},
    ]
    n["status"]["conditions"] = [
        {"type": t, "status": "Unknown", "reason": "NodeStatusUnknown",
         "message": "Kubelet stopped posting node status.",
         "lastHeartbeatTime": "2026-11-29T09:30:21Z", "lastTransitionTime": "2026-11-29T09:31:12Z"}
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
    ]  # fmt: skip


def fill(f: Fleet, node: str, prefix: str, ns: str, per_pod: int = 8, pods: int = 1) -> None:
    for i in range(pods):
        f.running_pod(f"{prefix}-{i}", ns, node, per_pod)


def gpu_labels(node: str, model: str, gpu: int, host_key: str = "Hostname", **extra: str) -> dict[str, str]:
    return {"gpu": str(gpu), "UUID": uuid_of(node, gpu), "pci_bus_id": f"00000000:{0x18 + 0x20 * gpu:02X}:00.0",
            "device": f"nvidia{gpu}", "modelName": MODELS[model][1], host_key: node,
            "DCGM_FI_DRIVER_VERSION": "570.158.01", **extra}  # fmt: skip


def lose_gpu_with_log(f: Fleet, node: str, xid: int, gpu: int, when: str = "I1129 09:47:13.902117") -> str:
    n = f.node(node)
    n["status"]["allocatable"]["nvidia.com/gpu"] = str(int(n["status"]["capacity"]["nvidia.com/gpu"]) - 1)
    uuid = uuid_of(node, gpu)
    f.plugin_log(
        node,
        f"{when}       1 health.go:185] XidCriticalError: Xid={xid} on Device={uuid}; marking device as unhealthy.\n"
        f"{when[:-3]}988       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n",
    )
    return uuid


def mixed_mig(f: Fleet, node: str, layout: dict[str, int]) -> None:
    n = f.node(node)
    n["metadata"]["labels"].update({"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig.config": "all-balanced",
                                    "nvidia.com/mig.config.state": "success", "nvidia.com/mig.capable": "true"})  # fmt: skip
    for key in ("capacity", "allocatable"):
        del n["status"][key]["nvidia.com/gpu"]
        for res, count in layout.items():
            n["status"][key][res] = str(count)
