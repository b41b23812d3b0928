"""The probe3 digest fleets: what `digest --format json` must list and leave out (the expected tables
are in tests/incidents/test_probe3_incidents.py); each also carries a walk target."""

from __future__ import annotations

from typing import Any

from tests.incidents.fleets import NS, Fleet, _pod, _suffix, mixed_pools, uuid_of
from tests.incidents.probe3.parts import (
    DAY,
    EDGE,
    VAL,
    cordon,
    gpu_labels,
    lose_gpu_with_log,
    mixed_mig,
    unreachable,
)


def digest_fleet() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-digest-34-nodes-gaps-rows-remap-stale-xid-healthy-target",
        "Built on samples 06, 27, 29, 33 and 40 and spec/interfaces.md `digest --format json`: a fleet whose digest "
        "must list lost GPUs (one cordoned, one MIG instance under the mixed strategy), rising rows (Hostname and "
        "the 4.6 `hostname`), a failed row remap with flat rows; and must not list flat non-zero rows, an Xid 13 "
        "alone, a passthrough node, a stale last-Xid 13 relabelled by a new pod; a node that hung is a note. The walked pod's H100 is healthy.",
        a100=10, h100=12, l40s=8,
    )  # fmt: skip
    target = "h100-infer-01"
    f.running_pod("triton-bert-0", "serving", target, 2)
    f.gpu_series(target, "h100", 8)
    f.sick_lost_gpu("a100-train-03", xid=79, gpu=3)
    f.sick_lost_gpu("a100-train-07", xid=48, gpu=0)
    cordon(f, "a100-train-07", "2026-11-29T07:15:00Z")
    mixed_mig(f, "a100-train-05", {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                                    "nvidia.com/mig-3g.40gb": 8})  # fmt: skip
    f.node("a100-train-05")["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = "15"
    f._noise("a100-train-05")
    b = gpu_labels("h100-infer-05", "h100", 5)
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 2], [-43200, 5], [0, 11]])
    f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 0], [-43200, 0], [0, 1]])
    f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", b, [[EDGE, 0], [0, 0]])
    b = gpu_labels("h100-infer-08", "h100", 2)
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 3], [0, 3]])
    f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", b, [[EDGE, 0], [-20000, 1], [0, 1]])
    b = gpu_labels("h100-infer-10", "h100", 6)
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b, [[-2 * DAY, 7], [EDGE, 7], [0, 7]])
    b = gpu_labels("l40s-viz-05", "l40s", 2, "hostname")
    f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 0], [-30000, 1], [0, 2]])
    b = gpu_labels("a100-train-09", "a100", 1)
    f.series("DCGM_EXP_XID_ERRORS_COUNT", {**b, "xid": "13", "window_size_in_ms": "300000"},
             [[EDGE, 0], [-9000, 2], [-8700, 0], [0, 0]])  # fmt: skip
    f.passthrough("h100-infer-11")
    unreachable(f, "h100-infer-12")  # hung: its last status still says 8 of 8
    f._noise("h100-infer-12")
    f.sick_not_advertising("l40s-viz-08")
    # l40s-viz-02 lost a GPU to Xid 79 today; its GPU 0's last Xid 13 is weeks old, relabelled by a new pod.
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    for pod, times in (("blender-0", [-30 * DAY, -88000, -DAY + 600, -14400]), ("blender-1", [-14340, 0])):
        f.series("DCGM_FI_DEV_XID_ERRORS", gpu_labels("l40s-viz-02", "l40s", 0, namespace="viz", pod=pod,
                 container="main"), [[t, 13] for t in times])  # fmt: skip
    for node in ("h100-infer-05", "h100-infer-08", "l40s-viz-05", "a100-train-09", "h100-infer-10"):
        f._noise(node)
    return f, {
        "target": "serving/triton-bert-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L5_OK"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_XID", "L5_REMAPPED_ROWS_RISING", "L4_NO_TELEMETRY"],
    }


def digest_exporter_podname_gated() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-digest-26-nodes-exporter-podname-shared-mig-rows-gated-target",
        "Built on samples 30, 39 and 40 and gpu-operator's time-slicing docs (renameByDefault advertises "
        "nvidia.com/gpu.shared): the digest must map rows named by an exporter pod (no NODE_NAME) to its node, "
        "count a MIG GPU's rows once though DCGM repeats them per GPU instance, count a GPU scraped by two jobs "
        "once, count a time-sliced GPU as one GPU, and leave out a weeks-old last Xid. The walked pod is held "
        "by a Kueue scheduling gate.",
        a100=8, h100=8, l40s=7, cpu=2,
    )  # fmt: skip
    exporter = f"nvidia-dcgm-exporter-{_suffix('h100-infer-03', 'dcgm')}"
    f.objects.append(_pod(exporter, NS, "h100-infer-03", {"app": "nvidia-dcgm-exporter"},
                          [("nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04")],
                          [("toolkit-validation", VAL)]))  # fmt: skip
    b = {**gpu_labels("h100-infer-03", "h100", 4), "Hostname": exporter}
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 1], [-40000, 2], [0, 4]])
    f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 0], [0, 0]])
    # a100-train-02: MIG mixed; DCGM repeats the GPU's device fields for each GPU instance (sample 30).
    mixed_mig(f, "a100-train-02", {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8,
                                    "nvidia.com/mig-3g.40gb": 8})  # fmt: skip
    b = gpu_labels("a100-train-02", "a100", 0)
    for extra in ({}, {"GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "9"}, {"GPU_I_PROFILE": "2g.20gb", "GPU_I_ID": "3"},
                  {"GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "1"}):  # fmt: skip
        f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", {**b, **extra}, [[EDGE, 0], [-20000, 2], [0, 2]])
    # a100-train-08: one GPU scraped twice (the operator's ServiceMonitor and a hand-made job).
    b = gpu_labels("a100-train-08", "a100", 3)
    for job in ("nvidia-dcgm-exporter", "gpu-metrics"):
        f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", {**b, "job": job}, [[EDGE, 4], [-30000, 6], [0, 8]])
    # l40s-viz-06: time-sliced, renamed to nvidia.com/gpu.shared, 4 replicas per GPU; one GPU lost to Xid 94.
    n = f.node("l40s-viz-06")
    n["metadata"]["labels"].update({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                    "nvidia.com/gpu.product": "NVIDIA-L40S"})  # fmt: skip
    for key, count in (("capacity", "16"), ("allocatable", "12")):
        del n["status"][key]["nvidia.com/gpu"]
        n["status"][key]["nvidia.com/gpu.shared"] = count
    uuid = uuid_of("l40s-viz-06", 2)
    f.plugin_log(
        "l40s-viz-06",
        f"I1129 09:21:40.551020       1 health.go:185] XidCriticalError: Xid=94 on Device={uuid}; marking device as unhealthy.\n"
        + "".join(f"I1129 09:21:40.5511{r}0       1 server.go:276] 'nvidia.com/gpu.shared' device marked unhealthy: "
                  f"{uuid}::{r}\n" for r in range(4)),
    )  # fmt: skip
    # a100-train-06: a GPU lost to Xid 48 today; another GPU's last Xid 79 has not changed in 40 days.
    lose_gpu_with_log(f, "a100-train-06", 48, 1)
    f.series(
        "DCGM_FI_DEV_XID_ERRORS",
        gpu_labels("a100-train-06", "a100", 5),
        [[-40 * DAY, 79], [-DAY - 600, 79], [0, 79]],
    )
    # h100-infer-07: flat remapped rows, history only.
    f.series(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", gpu_labels("h100-infer-07", "h100", 1), [[EDGE, 5], [0, 5]]
    )
    for node in (
        "h100-infer-03",
        "a100-train-02",
        "a100-train-08",
        "l40s-viz-06",
        "a100-train-06",
        "h100-infer-07",
    ):
        f._noise(node)
    pod = f.pending_pod("sweep-lr-0042", "research", None, gpus=4, gates=["kueue.x-k8s.io/admission"])
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "research-queue"
    return f, {
        "target": "research/sweep-lr-0042",
        "walk": [1],
        "verdict": "L1_SCHEDULING_GATED",
        "codes": ["L1_SCHEDULING_GATED"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_EXHAUSTED", "L1_GPU_NODE_NOT_ADVERTISING"],
    }
