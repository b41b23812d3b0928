"""The probe3 incidents (layers 1 and 5, the digest), written out as YAML:
`python -m tests.incidents.probe3.build`.

Each recipe is a production-shaped fleet (18-34 nodes, A100/H100/L40S pools, sick nodes the target
could never use, or sick neighbours in the target's own pool) around one real-world variant of
outside text: kube-scheduler messages of releases 1.29-1.34 (several reasons at once, the generic
`had untolerated taint(s)`, free ports), a node the node controller tainted unreachable, the MIG
single strategy, device-plugin marks older than a day, dcgm-exporter 4.6 labels behind a
Prometheus that renames them, DCGM's last-Xid gauge relabelled when the GPU's pod changes.
Expectations come from spec/findings.md, not from what gpubot prints; the digest tables are in
tests/incidents/test_probe3_incidents.py. The committed YAML files are what the tests read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import (
    MODELS,
    NS,
    Fleet,
    Recipe,
    _pod,
    _suffix,
    mixed_pools,
    noise_in_viz_and_infer,
    write_recipes,
)
from tests.incidents.probe3.digests import digest_exporter_podname_gated, digest_fleet
from tests.incidents.probe3.gke import skipping_xid79_on_bound_l4, xid48_device_name_and_unknown_device
from tests.incidents.probe3.layer1 import (
    cordoned_half_pool,
    host_port_conflict,
    mig_single_asks_profile,
    only_candidate_unreachable,
    pool_half_down_half_full,
    selects_shared_pool_asks_gpu,
    untolerated_taints_generic_1_34,
)
from tests.incidents.probe3.parts import (
    CP_TAINT,
    DAY,
    EDGE,
    VAL,
    fill,
    gpu_labels,
    lose_gpu_with_log,
)

HERE = Path(__file__).resolve().parent


# --- layer 5 -----------------------------------------------------------------------------------


def healthy_node_sick_neighbours() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-bound-healthy-a100-sick-neighbours-same-pool-26-nodes",
        "Built on samples 06, 27 and 29: the bound pod's A100 is healthy (DCGM series, quiet plugin log) while its "
        "own pool's neighbours are sick: a failed row remap, a GPU lost to Xid 79, a recent Xid 95 counted by "
        "DCGM_EXP_XID_ERRORS_COUNT, hw_slowdown clock events. None of them is the pod's node.",
        a100=8, h100=8, l40s=6,
    )  # fmt: skip
    node = "a100-train-04"
    f.running_pod("megatron-tp8-0", "research", node, 8)
    f.gpu_series(node, "a100", 8, fb_used=61440.0)
    base = gpu_labels("a100-train-03", "a100", 1)
    f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, [[EDGE, 0], [-7200, 1], [0, 1]])
    f._noise("a100-train-03")
    f.sick_lost_gpu("a100-train-05", xid=79, gpu=2)
    f.sick_xid_series("a100-train-02", "a100", xid=95, gpu=7)
    f.series("DCGM_EXP_CLOCK_EVENTS_COUNT", {**gpu_labels("a100-train-06", "a100", 0), "clock_event": "hw_slowdown",
             "window_size_in_ms": "300000"}, [[EDGE, 0], [-5400, 3], [-5100, 0], [0, 0]])  # fmt: skip
    f._noise("a100-train-06")
    f.sick_not_advertising("l40s-viz-04")
    return f, {
        "target": "research/megatron-tp8-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L5_OK"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY", "L5_ROW_REMAP_FAILURE",
                   "L5_XID", "L5_DEVICE_UNHEALTHY", "L5_CLOCK_EVENTS", "L4_NO_TELEMETRY"],
    }  # fmt: skip


def stale_xid_relabelled_by_pod() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-stale-xid48-gauge-relabelled-new-pod-h100-27-nodes",
        "Built on samples 27 and 39 (dcgm-exporter pod labels) and dcgm-exporter issue 500 (DCGM_FI_DEV_XID_ERRORS "
        "never resets): GPU 2 of the node last had Xid 48 weeks ago. The exporter labels a GPU's series with the "
        "pod using it, so when ray-trainer-0 ended three hours ago and ray-trainer-1 took the GPUs, every series "
        "began again under the new pod labels, still holding 48. Its value never changed: history, not news.",
        a100=8, h100=10, l40s=6,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "h100-infer-03"
    f.running_pod("ray-trainer-1", "ray", node, 8)
    memory = MODELS["h100"][2]
    for gpu in range(8):
        for pod, times in (("ray-trainer-0", [-40 * DAY, -88000, -DAY + 600, -10800]),
                           ("ray-trainer-1", [-10740, -3600, 0])):  # fmt: skip
            labels = gpu_labels(node, "h100", gpu, container="main", namespace="ray", pod=pod)
            used = 70000.0 if pod == "ray-trainer-1" else 52000.0
            for metric, value in (("DCGM_FI_DEV_FB_USED", used), ("DCGM_FI_DEV_FB_FREE", memory - used),
                                  ("DCGM_FI_DEV_XID_ERRORS", 48 if gpu == 2 else 0)):  # fmt: skip
                f.series(metric, labels, [[t, value] for t in times])
    return f, {
        "target": "ray/ray-trainer-1",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",  # info: "last Xid 48 … before the last 24 h"
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY", "L4_NO_TELEMETRY"],
    }


def exporter_4_6_lowercase_xid95() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-dcgm-4-6-hostname-exported-pod-xid95-a100-25-nodes",
        "Built on samples 29 and 40 and dcgm-exporter pull 655 (label `Hostname` renamed `hostname`), scraped by a "
        "ServiceMonitor without honorLabels: Prometheus renames the exporter's pod/namespace/container to "
        "exported_*, and pod/namespace/instance name the exporter itself. The device plugin runs with "
        "DP_DISABLE_HEALTHCHECKS=all, so only DCGM saw Xid 95 (uncontained memory error) on GPU 6.",
        a100=7, h100=8, l40s=6,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "a100-train-05"
    f.running_pod("deepspeed-zero3-0", "research", node, 8)
    exporter = f"nvidia-dcgm-exporter-{_suffix(node, 'dcgm')}"
    f.objects.append(_pod(exporter, NS, node, {"app": "nvidia-dcgm-exporter"},
                          [("nvidia-dcgm-exporter", "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless")],
                          [("toolkit-validation", VAL)]))  # fmt: skip
    plugin = next(o for o in f.objects if o["kind"] == "Pod" and o["spec"].get("nodeName") == node
                  and o["metadata"]["name"].startswith("nvidia-device-plugin"))  # fmt: skip
    plugin["spec"]["containers"][0]["env"] = [{"name": "DP_DISABLE_HEALTHCHECKS", "value": "all"}]
    scrape = {"pod": exporter, "namespace": NS, "container": "nvidia-dcgm-exporter", "instance": "10.244.7.31:9400",
              "job": "nvidia-dcgm-exporter", "endpoint": "gpu-metrics", "service": "nvidia-dcgm-exporter"}  # fmt: skip
    memory = MODELS["a100"][2]
    for gpu in range(8):
        labels = {**gpu_labels(node, "a100", gpu, "hostname"), "exported_container": "main",
                  "exported_namespace": "research", "exported_pod": "deepspeed-zero3-0", **scrape}  # fmt: skip
        f.series("DCGM_FI_DEV_FB_USED", labels, [[-3600, 60000], [0, 60000]])
        f.series("DCGM_FI_DEV_FB_FREE", labels, [[-3600, memory - 60000], [0, memory - 60000]])
        xid = [[EDGE, 0], [-1500, 0], [-1200, 95], [0, 95]] if gpu == 6 else [[EDGE, 0], [0, 0]]
        f.series("DCGM_FI_DEV_XID_ERRORS", labels, xid)
        if gpu == 6:
            f.series("DCGM_EXP_XID_ERRORS_COUNT", {**labels, "xid": "95", "window_size_in_ms": "300000"},
                     [[-1200, 1], [-900, 1], [-600, 0], [0, 0]])  # fmt: skip
    return f, {
        "target": "research/deepspeed-zero3-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY", "L4_NO_TELEMETRY"],
    }


def plugin_mark_older_than_a_day() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-pending-8gpu-xid119-mark-five-days-old-h100-18-nodes",
        "Built on samples 06 and 22 (Xid 119 GSP RPC timeout) and k8s-device-plugin issue 234 (a device never "
        "turns healthy again): the plugin started six days ago and marked a GPU unhealthy on Xid 119 five days "
        "ago; the node still has 7 of 8 allocatable. DCGM cannot report 119. An 8-GPU job selects the full "
        "H100 pool: the candidate's capacity gap decides, the mark stands though older than 24 h, and no Xid "
        "of the last 24 h is claimed.",
        a100=5, h100=6, l40s=4, cpu=2,
    )  # fmt: skip
    f.sick_rows_rising("a100-train-02", "a100")
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    f.sick_not_advertising("l40s-viz-04")
    for i in (1, 2, 3, 5, 6):
        fill(f, f"h100-infer-{i:02d}", f"serve-{i}", "serving")
    lose_gpu_with_log(f, "h100-infer-04", 119, 5, when="I1124 03:12:44.610231")
    msg = (
        f"0/18 nodes are available: {CP_TAINT}, 6 Insufficient nvidia.com/gpu, 11 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/18 nodes are available: 6 No preemption victims found for incoming pod, "
        "12 Preemption is not helpful for scheduling."
    )
    f.pending_pod("train-h100-x8-b", "research", msg, gpus=8, selector={"pool": "infer"})
    return f, {
        "target": "research/train-h100-x8-b",
        "walk": [1, 5],
        "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_POD_PENDING", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY",
                  "L5_DEVICE_UNHEALTHY"],
        "absent": ["L5_XID", "L5_REMAPPED_ROWS_RISING"],
    }  # fmt: skip


def xid63_rows_rising() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-xid63-row-remapper-marked-rows-rising-a100-23-nodes",
        "Built on sample 27 (err_code/err_msg labels) and the Xid catalog (63: row-remapping event, IGNORE): "
        "the A100's GPU 4 remapped two rows two hours ago; DCGM's last Xid is 63 and correctable remapped rows "
        "went 0 → 2. The device plugin, which skips only 13/31/43/45/68/109, marked the GPU unhealthy, so "
        "allocatable is 7 of 8.",
        a100=7, h100=8, l40s=5, cpu=2,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    node = "a100-train-02"
    f.running_pod("llama-sft-0", "research", node, 7)
    f.gpu_series(node, "a100", 8, fb_used=40000.0)
    f.metrics = [m for m in f.metrics if not (m["metric"]["__name__"] == "DCGM_FI_DEV_XID_ERRORS"
                                              and m["metric"].get("Hostname") == node and m["metric"]["gpu"] == "4")]  # fmt: skip
    base = gpu_labels(node, "a100", 4)
    f.series("DCGM_FI_DEV_XID_ERRORS", {**base, "err_code": "63", "err_msg": "ECC page retirement or row remapping "
             "recording event"}, [[EDGE, 0], [-7300, 0], [-7200, 63], [0, 63]])  # fmt: skip
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", base, [[EDGE, 0], [-7300, 0], [-7200, 2], [0, 2]])
    f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", base, [[EDGE, 0], [0, 0]])
    f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, [[EDGE, 0], [0, 0]])
    lose_gpu_with_log(f, node, 63, 4, when="I1129 08:12:03.117804")
    return f, {
        "target": "research/llama-sft-0",
        "walk": [1, 5],
        "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY",
                  "L5_XID", "L5_REMAPPED_ROWS_RISING"],
        "absent": ["L5_ROW_REMAP_FAILURE"],
    }  # fmt: skip


RECIPES: list[Recipe] = [
    cordoned_half_pool,
    untolerated_taints_generic_1_34,
    host_port_conflict,
    mig_single_asks_profile,
    only_candidate_unreachable,
    selects_shared_pool_asks_gpu,
    pool_half_down_half_full,
    healthy_node_sick_neighbours,
    stale_xid_relabelled_by_pod,
    exporter_4_6_lowercase_xid95,
    plugin_mark_older_than_a_day,
    xid63_rows_rising,
    skipping_xid79_on_bound_l4,
    xid48_device_name_and_unknown_device,
    digest_fleet,
    digest_exporter_podname_gated,
]


def main() -> None:
    write_recipes(RECIPES, HERE)


if __name__ == "__main__":
    main()
