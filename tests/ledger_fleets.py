"""Ledger histories on production-shaped fleets (tests/incidents/fleets.py): the device plugin's
Xid lines in its klog format (samples 06 and 08), DCGM's Xid counter and last-Xid gauge, the
row-remap flags, as dcgm-exporter labels them; sick nodes elsewhere in the fleet as noise.

Times are given as minutes before the fleet's `now` (2026-11-29T10:12:00Z).
"""

from __future__ import annotations

import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.incidents.fleets import MODELS, NS, Fleet, mixed_pools, noise_in_viz_and_infer, uuid_of

NOW = datetime(2026, 11, 29, 10, 12, tzinfo=UTC)
NODE = "a100-train-03"


def fleet(name: str) -> Fleet:
    f = mixed_pools(name, "a ledger history on a mixed fleet, with the noise every large cluster has")
    noise_in_viz_and_infer(f)
    return f


def klog(minutes_ago: float) -> str:
    t = NOW - timedelta(minutes=minutes_ago)
    return t.strftime("I%m%d %H:%M:%S.") + f"{t.microsecond:06d}"


def plugin_xid(
    f: Fleet, node: str, gpu: int, xid: int, minutes_ago: float, *, cascade: int | None = None
) -> None:
    """The plugin's lines for an Xid it acted on (and a follow-up Xid in the same second)."""
    uuid = uuid_of(node, gpu)
    lines = ""
    for number in (xid, cascade) if cascade else (xid,):
        ts = klog(minutes_ago)
        lines += (
            f"{ts}       1 health.go:159] Processing event {{Device:{{Handle:0x7f7597647848}} EventType:8 "
            f"EventData:{number} GpuInstanceId:4294967295 ComputeInstanceId:4294967295}}\n"
            f"{ts}       1 health.go:185] XidCriticalError: Xid={number} on Device={uuid}; marking device as unhealthy.\n"
        )
    lines += f"{klog(minutes_ago)}       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}\n"
    f.plugin_log(node, lines)


def base_labels(node: str, gpu: int, model: str = "a100") -> dict[str, str]:
    return {
        "gpu": str(gpu),
        "UUID": uuid_of(node, gpu),
        "device": f"nvidia{gpu}",
        "modelName": MODELS[model][1],
        "Hostname": node,
        "DCGM_FI_DRIVER_VERSION": "570.158.01",
    }


def xid_counter(f: Fleet, node: str, gpu: int, xid: int, points: list[list[float]]) -> None:
    """dcgm-exporter's DCGM_EXP_XID_ERRORS_TOTAL for one GPU and Xid: [seconds before now, total]."""
    f.series("DCGM_EXP_XID_ERRORS_TOTAL", {**base_labels(node, gpu), "xid": str(xid)}, points)


def last_xid(f: Fleet, node: str, gpu: int, points: list[list[float]]) -> None:
    f.series("DCGM_FI_DEV_XID_ERRORS", base_labels(node, gpu), points)


def remap_flag(f: Fleet, node: str, gpu: int, metric: str, points: list[list[float]]) -> None:
    f.series(metric, base_labels(node, gpu), points)


def write(f: Fleet, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return f.write(folder, {"target": None})


# --- production shapes: who owns the operator's pods, a tenant's imitation ------------------------


def operator_owned(f: Fleet, *, cluster_policy: bool = True) -> None:
    """As a real cluster has them: every operator pod owned by its DaemonSet (the operator's own by its
    ReplicaSet), and the ClusterPolicy whose status names the operator's namespace."""
    for obj in f.objects:
        meta = obj["metadata"]
        if obj["kind"] != "Pod" or meta.get("namespace") != NS:
            continue
        app = meta["labels"].get("app", "")
        kind, owner = (
            ("ReplicaSet", "gpu-operator-7fzxtpws4j") if app == "gpu-operator" else ("DaemonSet", app)
        )
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": owner, "controller": True, "blockOwnerDeletion": True,
             "uid": f"00000000-0000-4000-8000-{zlib.crc32(owner.encode()):012d}"}
        ]  # fmt: skip
    if cluster_policy:
        f.objects.append(
            {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
             "spec": {"driver": {"enabled": True}}, "status": {"namespace": NS, "state": "ready"}}
        )  # fmt: skip


def impostor(f: Fleet, node: str, namespace: str, uuid: str, xid: int, minutes_ago: list[float]) -> str:
    """A tenant's bare pod labelled as the operator's device plugin, printing the plugin's Xid lines."""
    name = f"nvidia-device-plugin-daemonset-{namespace[:5]}x"
    f.objects.append(
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": namespace, "labels": {"app": "nvidia-device-plugin-daemonset"},
                      "uid": "5d0c2b9e-1f7a-4c1e-9b7e-2a6f3c8d9e01", "creationTimestamp": "2026-11-28T10:00:00Z"},
         "spec": {"nodeName": node, "containers": [{"name": "nvidia-device-plugin", "image": "busybox:1.36"}]},
         "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "nvidia-device-plugin", "image": "busybox:1.36", "ready": True,
                                           "restartCount": 0, "started": True,
                                           "state": {"running": {"startedAt": "2026-11-28T10:00:05Z"}}}]}}
    )  # fmt: skip
    f.logs[f"{namespace}/{name}/nvidia-device-plugin"] = "".join(
        f"{klog(m)}       1 health.go:185] XidCriticalError: Xid={xid} on Device={uuid}; marking device as unhealthy.\n"
        for m in minutes_ago
    )
    return name


def plugin_xid_line(uuid: str, xid: int, minutes_ago: float) -> str:
    ts = klog(minutes_ago)
    return (
        f"{ts}       1 health.go:159] Processing event {{Device:{{Handle:0x7f7597647848}} EventType:8 "
        f"EventData:{xid} GpuInstanceId:4294967295 ComputeInstanceId:4294967295}}\n"
        f"{ts}       1 health.go:185] XidCriticalError: Xid={xid} on Device={uuid}; marking device as unhealthy.\n"
    )


def previous_plugin_log(f: Fleet, node: str, lines: str) -> None:
    """The log of the device plugin's previous instance (before the node's last reboot)."""
    f.logs[f"{NS}/{f._plugins[node]}/nvidia-device-plugin#previous"] = lines


def xid_count_pulses(
    f: Fleet, node: str, gpu: int, xid: int, minutes_ago: list[float], uuid: str = ""
) -> None:
    """dcgm-exporter's windowed DCGM_EXP_XID_ERRORS_COUNT for one GPU and Xid: 1 for its 5-minute window
    after each Xid, 0 around it, nothing between (the exporter restarts with every reboot)."""
    points: list[list[float]] = []
    for m in sorted(minutes_ago, reverse=True):
        at = -m * 60
        points += [[at - 120, 0], [at - 60, 0], [at, 1], [at + 60, 1], [at + 120, 1], [at + 180, 1],
                   [at + 240, 1], [at + 300, 0], [at + 360, 0]]  # fmt: skip
    labels = {**base_labels(node, gpu), "xid": str(xid)}
    if uuid:
        labels["UUID"] = uuid
    f.series("DCGM_EXP_XID_ERRORS_COUNT", labels, points)


def gpus_present(
    f: Fleet, node: str, uuids: dict[int, str], since_s: float = 7 * 86400, until_s: float = 0
) -> None:
    """DCGM's last-Xid gauge for the node's GPUs (index -> UUID), sampled every 5 minutes from `since_s`
    to `until_s` seconds before now: a series that stops before now is a GPU no longer there."""
    for gpu, uuid in uuids.items():
        pts = [[-t, 0.0] for t in range(int(since_s), int(until_s) - 1, -300)]
        f.series("DCGM_FI_DEV_XID_ERRORS", {**base_labels(node, gpu), "UUID": uuid}, pts)
