"""Ledger histories on production-shaped fleets (tests/incidents/fleets.py): the device plugin's
Xid lines in its klog format (samples 06 and 08), DCGM's Xid counter and last-Xid gauge, the
row-remap flags, as dcgm-exporter labels them; sick nodes elsewhere in the fleet as noise.

Times are given as minutes before the fleet's `now` (2026-11-29T10:12:00Z).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.incidents.fleets import MODELS, Fleet, mixed_pools, noise_in_viz_and_infer, uuid_of

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
