"""The probe6 incidents (layers 1 and 5, the digest), written out as YAML:
`python -m tests.incidents.probe6.build`.

Each recipe is a production-shaped fleet (19-27 nodes, A100/H100/L40S pools, sick nodes the target
never uses) around one real-world variant: a GPU asked for by a sidecar (an init container with
`restartPolicy: Always`) beside a main container that sets limits only; a node whose `nvidia.com/gpu`
dropped to "0" while its plugin kept running; required node affinity by `NotIn` and `Gt` with a
preferred term elsewhere; dcgm-exporter 4.x `DCGM_EXP_XID_ERRORS_COUNT` bursts of Xid 31; remapped-row
gauges that read 0 while a GPU was reset; a pending row remap. Expectations come from
spec/findings.md and spec/interfaces.md, written before gpubot ran on them; the digest table and the
deciding findings' details are in tests/incidents/test_probe6_incidents.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import MODELS, NS, Fleet, Recipe, mixed_pools, uuid_of, write_recipes
from tests.incidents.probe3.parts import CP_TAINT, EDGE, fill, gpu_labels, lose_gpu_with_log, mixed_mig

HERE = Path(__file__).resolve().parent


# --- layer 1 -----------------------------------------------------------------------------------


def sidecar_gpu_on_top_of_main() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-sidecar-gpu-plus-main-limits-only-l40s-exhausted-20-nodes",
        "Built on sample 01 (scheduler text), KEP-753 (sidecar containers), kubernetes-sigs/karpenter issue 479 and kubernetes/website pull "
        "57373: a sidecar (init container with restartPolicy: Always) keeps running beside the main containers, "
        "so its request adds to theirs. The render pod's main container sets only limits (nvidia.com/gpu: 4, "
        "requests default to limits) and its frame-encoder sidecar asks for 1 more: 5 GPUs, while every L40S "
        "node of the viz pool has 4. The pool is empty and healthy; the scheduler says Insufficient.",
        a100=6, h100=6, l40s=5, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("h100-infer-03", xid=79, gpu=6)
    f.sick_rows_rising("a100-train-04", "a100")
    f.sick_not_advertising("a100-train-06")
    msg = (
        f"0/20 nodes are available: {CP_TAINT}, 5 Insufficient nvidia.com/gpu, 14 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/20 nodes are available: 5 No preemption victims found for incoming pod, "
        "15 Preemption is not helpful for scheduling."
    )
    pod = f.pending_pod("render-4k-episode-12", "viz", msg, gpus=4, selector={"pool": "viz"})
    main = pod["spec"]["containers"][0]
    main["resources"] = {"limits": {"nvidia.com/gpu": "4", "memory": "96Gi"}}
    pod["spec"]["initContainers"] = [
        {"name": "fetch-assets", "image": "registry.internal/viz/asset-sync:2.4",
         "resources": {"requests": {"cpu": "2", "memory": "4Gi"}}},
        {"name": "frame-encoder", "image": "nvcr.io/nvidia/deepstream:7.1-triton-multiarch", "restartPolicy": "Always",
         "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}},
    ]  # fmt: skip
    return f, {
        "target": "viz/render-4k-episode-12",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_EXHAUSTED"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH", "L1_GPU_NODE_NOT_ADVERTISING"],
    }


def capacity_zero_after_driver_loss() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-capacity-gpu-zero-plugin-running-a100-candidate-22-nodes",
        "Built on sample 08 (plugin log) and NVIDIA/k8s-device-plugin issues 1228 and 1698: both capacity and allocatable of nvidia.com/gpu "
        "read \"0\" (present, not missing) while the device plugin pod keeps running with its normal start-up "
        "log. The node advertises no GPU (a quantity of 0 is not advertising); the other A100 nodes of the train "
        "pool are full, so the 4-GPU job waits on the one node that lost its GPUs.",
        a100=6, h100=8, l40s=5, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("h100-infer-02", xid=48, gpu=1)
    f.sick_not_advertising("l40s-viz-05")
    f.sick_rows_rising("h100-infer-07", "h100")
    sick = "a100-train-04"
    n = f.node(sick)
    n["status"]["capacity"]["nvidia.com/gpu"] = "0"
    n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    for i in (1, 2, 3, 5, 6):
        fill(f, f"a100-train-{i:02d}", f"pretrain-{i}", "research")
    msg = (
        f"0/22 nodes are available: {CP_TAINT}, 6 Insufficient nvidia.com/gpu, 15 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/22 nodes are available: 6 No preemption victims found for incoming pod, "
        "16 Preemption is not helpful for scheduling."
    )
    f.pending_pod("finetune-llama-4g-0", "research", msg, gpus=4, selector={"pool": "train"})
    f.decides = sick
    return f, {
        "target": "research/finetune-llama-4g-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L1_GPU_NODE_NOT_ADVERTISING",
        # The five full nodes are L1_GPU_EXHAUSTED (info) by the spec's words; the fault decides.
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L1_GPU_EXHAUSTED"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_NO_GPU_ADVERTISED",
                   "L1_SELECTOR_MISMATCH"],
    }  # fmt: skip


def affinity_notin_gt_preferred_elsewhere() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-affinity-notin-a100-gt-memory-preferred-a100-h100-gap-24-nodes",
        "Built on samples 01 and 06 and the Kubernetes node-affinity docs (required terms with NotIn and Gt; preferred terms only rank "
        "nodes) and GFD's nvidia.com/gpu.memory label: the job requires nvidia.com/gpu.memory Gt 50000 and a "
        "product NotIn the A100, and prefers (weight 80) the train pool. Only the H100 nodes qualify; five are "
        "full and h100-infer-04 lost a GPU to Xid 94 (7 of 8). The A100 node with a lost GPU, which the "
        "preferred term names, is no candidate.",
        a100=7, h100=6, l40s=6, cpu=4,
    )  # fmt: skip
    f.sick_lost_gpu("a100-train-02", xid=79, gpu=5)
    f.sick_lost_gpu("l40s-viz-03", xid=48, gpu=2)
    f.sick_not_advertising("l40s-viz-06")
    for i in (1, 2, 3, 5, 6):
        fill(f, f"h100-infer-{i:02d}", f"serve-{i}", "serving")
    lose_gpu_with_log(f, "h100-infer-04", 94, 3)
    f.decides = "h100-infer-04"
    msg = (
        f"0/24 nodes are available: {CP_TAINT}, 6 Insufficient nvidia.com/gpu, 17 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/24 nodes are available: 6 No preemption victims found for incoming pod, "
        "18 Preemption is not helpful for scheduling."
    )
    pod = f.pending_pod("train-moe-x8-3", "research", msg, gpus=8)
    pod["spec"]["affinity"] = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["50000"]},
            {"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": [MODELS["a100"][0]]},
            {"key": "nvidia.com/gpu.deploy.operands", "operator": "DoesNotExist"},
        ]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 80, "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["train"]}]}},
        ],
    }}  # fmt: skip
    return f, {
        "target": "research/train-moe-x8-3",
        "walk": [1, 5],
        "verdict": "L5_DEVICE_UNHEALTHY",
        "codes": ["L1_POD_PENDING", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_ALLOCATABLE_BELOW_CAPACITY",
                  "L5_DEVICE_UNHEALTHY"],
        "absent": ["L1_SELECTOR_MISMATCH", "L1_GPU_NODE_NOT_ADVERTISING"],
    }  # fmt: skip


MIG_CHANGE_LOG = """\
time="2026-11-29T10:08:02Z" level=info msg="Waiting for change to 'nvidia.com/mig.config' label"
time="2026-11-29T10:08:02Z" level=info msg="Updating to MIG config: all-disabled"
time="2026-11-29T10:08:03Z" level=info msg="Asserting that the requested configuration is present in the configuration file"
time="2026-11-29T10:08:03Z" level=info msg="Selected MIG configuration is valid"
time="2026-11-29T10:08:03Z" level=info msg="Getting current value of the 'nvidia.com/gpu.deploy.device-plugin' node label"
time="2026-11-29T10:08:03Z" level=info msg="Current value of 'nvidia.com/gpu.deploy.device-plugin=true'"
time="2026-11-29T10:08:04Z" level=info msg="Changing the 'nvidia.com/mig.config.state' node label to 'pending'"
time="2026-11-29T10:08:04Z" level=info msg="Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels"
time="2026-11-29T10:08:05Z" level=info msg="Waiting for the device-plugin to shutdown"
"""


def plugin_paused_for_mig_change() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-plugin-paused-for-mig-change-all-disabled-a100-candidate-20-nodes",
        "Built on sample 33 (MIG labels) and NVIDIA/mig-parted's reconfigure (maybeSetPaused: the GPU clients' "
        "nvidia.com/gpu.deploy.* labels set to paused-for-mig-change while a layout is applied, then back to "
        "true): four minutes ago an operator asked a100-train-05 for all-disabled; the MIG manager set "
        "mig.config.state=pending and paused the device plugin, whose pod is gone, so nvidia.com/gpu reads 0. "
        "The other train nodes are full. Not failed, not stuck past 15 minutes: the node will advertise again "
        "when the MIG manager finishes; restarting the plugin would fight it.",
        a100=6, h100=6, l40s=5, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("h100-infer-02", xid=79, gpu=4)
    f.sick_rows_rising("l40s-viz-03", "l40s")
    node = "a100-train-05"
    n = f.node(node)
    n["metadata"]["labels"].update({
        "nvidia.com/mig.capable": "true", "nvidia.com/mig.config": "all-disabled",
        "nvidia.com/mig.config.state": "pending", "nvidia.com/gpu.deploy.mig-manager": "true",
        **{f"nvidia.com/gpu.deploy.{c}": "paused-for-mig-change"
           for c in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm")},
    })  # fmt: skip
    n["status"]["capacity"]["nvidia.com/gpu"] = "0"
    n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    plugin = f._plugins.pop(node)
    f.objects = [o for o in f.objects if o["metadata"]["name"] != plugin]
    del f.logs[f"{NS}/{plugin}/nvidia-device-plugin"]
    f.mig_manager(node, MIG_CHANGE_LOG)
    for i in (1, 2, 3, 4, 6):
        fill(f, f"a100-train-{i:02d}", f"pretrain-{i}", "research")
    msg = (
        f"0/20 nodes are available: {CP_TAINT}, 6 Insufficient nvidia.com/gpu, 13 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/20 nodes are available: 6 No preemption victims found for incoming pod, "
        "14 Preemption is not helpful for scheduling."
    )
    f.pending_pod("eval-llama-2g-0", "research", msg, gpus=2, selector={"pool": "train"})
    f.decides = node
    return f, {
        "target": "research/eval-llama-2g-0",
        # The MIG manager's flow is its maintenance, not a fault (spec: "Who else acts on a node"): an info
        # line naming it, no next; the full A100s stop the walk.
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L1_GPU_EXHAUSTED", "L1_NODE_OWNER"],
        "absent": ["L1_MIG_CONFIG_FAILED", "L1_RESOURCE_MISMATCH", "L1_ALLOCATABLE_BELOW_CAPACITY"],
    }


def topology_spread_with_free_gpus() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-sched-1-31-topology-spread-zone-skew-free-h100-22-nodes",
        "Built on sample 01 (scheduler text) and kube-scheduler's PodTopologySpread reason `node(s) didn't match "
        "pod topology spread constraints` (ErrReasonConstraintsNotMatch): the serving replica must spread over two "
        "zones with maxSkew 1 and whenUnsatisfiable DoNotSchedule; zone a already holds one more replica, so the "
        "three zone-a H100 nodes are filtered out although they have free GPUs, and the three zone-b nodes are full. "
        "Not a GPU fault: layer 1 reports the pending pod (its message names the spread) and the walk goes on over "
        "the healthy candidates. Elsewhere an A100 lost a GPU and an L40S's rows rise.",
        a100=6, h100=6, l40s=7, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("a100-train-03", xid=48, gpu=2)
    f.sick_rows_rising("l40s-viz-05", "l40s")
    for i in range(1, 7):
        node = f"h100-infer-{i:02d}"
        zone = "us-east-1a" if i <= 3 else "us-east-1b"
        f.node(node)["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        f.gpu_series(node, "h100", 8)
        if i <= 3:
            f.running_pod(f"vllm-qwen-{i}", "serving", node, 4)
        else:
            fill(f, node, f"batch-{i}", "serving")
    msg = (
        f"0/22 nodes are available: {CP_TAINT}, 3 Insufficient nvidia.com/gpu, 15 node(s) didn't match Pod's node "
        "affinity/selector, 3 node(s) didn't match pod topology spread constraints. preemption: 0/22 nodes are "
        "available: 3 No preemption victims found for incoming pod, 19 Preemption is not helpful for scheduling."
    )
    pod = f.pending_pod("vllm-qwen-7", "serving", msg, gpus=4, selector={"pool": "infer"})
    pod["metadata"]["labels"]["app"] = "vllm-qwen"
    pod["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "vllm-qwen"}}},
    ]  # fmt: skip
    return f, {
        "target": "serving/vllm-qwen-7",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L5_OK"],
        "absent": ["L1_GPU_EXHAUSTED", "L1_SELECTOR_MISMATCH", "L1_ALLOCATABLE_BELOW_CAPACITY", "L1_UNTOLERATED_TAINT",
                   "L5_DEVICE_UNHEALTHY", "L5_REMAPPED_ROWS_RISING"],
    }  # fmt: skip


# --- layer 5 -----------------------------------------------------------------------------------


def xid31_burst_dcgm4() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-dcgm-4-xid31-burst-count-skipped-by-plugin-h100-bound-23-nodes",
        "Built on sample 29, dcgm-exporter pull 239 (DCGM_EXP_XID_ERRORS_COUNT with xid and window_size_in_ms labels), "
        "NVIDIA/NVSentinel issue 271 (Xid 31 MMU faults: CHECK_APP/CUDA when solo) and k8s-device-plugin's "
        "skipped Xids (31 among them): the inference pod's H100 GPU 2 had a burst of Xid 31 (5 in a 5-minute "
        "window) and the plugin logged `Skipping event` for each. Allocatable stays 8 of 8. A neighbour lost a "
        "GPU to Xid 79.",
        a100=6, h100=8, l40s=6, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("h100-infer-06", xid=79, gpu=0)
    f.sick_rows_rising("a100-train-03", "a100")
    f.sick_not_advertising("l40s-viz-02")
    node = "h100-infer-02"
    f.running_pod("vllm-mixtral-0", "serving", node, 8)
    f.gpu_series(node, "h100", 8, fb_used=72000.0)
    f.metrics = [m for m in f.metrics if not (m["metric"]["__name__"] == "DCGM_FI_DEV_XID_ERRORS"
                                              and m["metric"].get("Hostname") == node and m["metric"]["gpu"] == "2")]  # fmt: skip
    base = gpu_labels(node, "h100", 2)
    f.series("DCGM_FI_DEV_XID_ERRORS", base, [[EDGE, 0], [-2700, 0], [-2400, 31], [0, 31]])
    f.series("DCGM_EXP_XID_ERRORS_COUNT", {**base, "window_size_in_ms": "300000", "xid": "31"},
             [[-2400, 3], [-2100, 5], [-1800, 2], [-1500, 0], [0, 0]])  # fmt: skip
    f.plugin_log(node, "".join(
        f"I1129 09:{m:02d}:1{s}.40{s}113       1 health.go:159] Processing event {{Device:{{Handle:0x7f3a2c1e5e80}} "
        "EventType:8 EventData:31 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        f"I1129 09:{m:02d}:1{s}.40{s}207       1 health.go:165] Skipping event {{Device:{{Handle:0x7f3a2c1e5e80}} "
        "EventType:8 EventData:31 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        for m, s in ((32, 1), (33, 4), (37, 2))
    ))  # fmt: skip
    return f, {
        "target": "serving/vllm-mixtral-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_DEVICE_UNHEALTHY", "L5_ALLOCATABLE_BELOW_CAPACITY",
                   "L4_NO_TELEMETRY"],
    }  # fmt: skip


def rows_read_zero_during_reset() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-remapped-rows-read-zero-during-gpu-reset-not-rising-a100-21-nodes",
        "Built on sample 27, the A100 row-remapping docs (remapped rows persist in the InfoROM across resets) and dcgm-exporter "
        "issue 500 (values that only an exporter restart changes): GPU 1 has had 4 correctable remapped rows "
        "for weeks; during a GPU reset an hour ago the exporter read 0 for two scrapes, then 4 again. GPU 6 "
        "read 2 and reads 0 since the reset. No row was remapped today: neither is growth.",
        a100=7, h100=6, l40s=5, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("l40s-viz-01", xid=79, gpu=2)
    f.sick_rows_rising("h100-infer-04", "h100")
    f.sick_not_advertising("h100-infer-06")
    node = "a100-train-05"
    f.running_pod("deepspeed-ft-0", "research", node, 8)
    f.gpu_series(node, "a100", 8, fb_used=50000.0)
    for gpu, values in ((1, [[-3 * 86400, 4], [EDGE, 4], [-3900, 4], [-3600, 0], [-3300, 0], [-3000, 4], [0, 4]]),
                        (6, [[EDGE, 2], [-3900, 2], [-3600, 0], [0, 0]])):  # fmt: skip
        base = gpu_labels(node, "a100", gpu)
        f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", base, values)
        f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", base, [[EDGE, 0], [0, 0]])
        f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, [[EDGE, 0], [0, 0]])
    return f, {
        "target": "research/deepspeed-ft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L5_OK"],
        "absent": [
            "L5_REMAPPED_ROWS_RISING",
            "L5_ROW_REMAP_FAILURE",
            "L5_XID",
            "L1_ALLOCATABLE_BELOW_CAPACITY",
        ],
    }


def remap_pending_uncorrectable() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-uncorrectable-row-remap-pending-h100-bound-19-nodes",
        "Built on sample 27, dcgm-exporter's DCGM_FI_DEV_ROW_REMAP_PENDING and DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS "
        "(default-counters.csv) and the row-remapping docs (a pending remap takes effect at the next GPU reset): "
        "GPU 5 of the bound pod's H100 got an uncorrectable remapped row 0 → 1 six hours ago and the remap is "
        "pending. No remap failed.",
        a100=5, h100=6, l40s=5, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("a100-train-01", xid=79, gpu=4)
    f.sick_not_advertising("l40s-viz-03")
    node = "h100-infer-05"
    f.running_pod("sglang-llama-405b-0", "serving", node, 8)
    f.gpu_series(node, "h100", 8, fb_used=70000.0)
    base = gpu_labels(node, "h100", 5)
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", base, [[EDGE, 0], [0, 0]])
    f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", base, [[EDGE, 0], [-21700, 0], [-21600, 1], [0, 1]])
    f.series("DCGM_FI_DEV_ROW_REMAP_PENDING", base, [[EDGE, 0], [-21700, 0], [-21600, 1], [0, 1]])
    f.series("DCGM_FI_DEV_ROW_REMAP_FAILURE", base, [[EDGE, 0], [0, 0]])
    return f, {
        "target": "serving/sglang-llama-405b-0",
        "walk": [1, 2, 3, 4, 5],
        # spec/findings.md (issue 18): a pending remap is L5_ROW_REMAP_PENDING, listed before the rise.
        "verdict": "L5_ROW_REMAP_PENDING",
        "codes": ["L1_POD_SCHEDULED", "L5_ROW_REMAP_PENDING", "L5_REMAPPED_ROWS_RISING"],
        "absent": ["L5_ROW_REMAP_FAILURE", "L5_XID", "L1_ALLOCATABLE_BELOW_CAPACITY"],
    }


def exporter_totals_since_start() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-dcgm-4-8-xid-and-clock-totals-since-exporter-start-a100-bound-22-nodes",
        "Built on sample 29 and dcgm-exporter 4.8's opt-in DCGM_EXP_XID_ERRORS_TOTAL and DCGM_EXP_CLOCK_EVENTS_TOTAL "
        "(`counter, Total XID errors observed since exporter start`, `… clock events observed since exporter start "
        "(edge-counted)`, the collectors CSV): the exporter started five days ago. GPU 3 counted 3 Xid 13 and GPU 0 "
        "12 hw_slowdown events four days ago, unchanged since; GPU 5 counted Xid 31 from 1 to 4 in the last two "
        "hours. Only the Xid 31 is of the last 24 h.",
        a100=7, h100=7, l40s=5, cpu=2,
    )  # fmt: skip
    f.sick_lost_gpu("h100-infer-05", xid=79, gpu=3)
    f.sick_rows_rising("l40s-viz-02", "l40s")
    f.sick_not_advertising("h100-infer-07")
    node = "a100-train-03"
    f.running_pod("nemo-sft-0", "research", node, 8)
    f.gpu_series(node, "a100", 8, fb_used=52000.0)
    start = -5 * 86400
    f.series("DCGM_EXP_XID_ERRORS_TOTAL", {**gpu_labels(node, "a100", 3), "xid": "13"},
             [[start + 3600, 0], [-4 * 86400, 3], [-86400 - 600, 3], [EDGE, 3], [-3600, 3], [0, 3]])  # fmt: skip
    f.series("DCGM_EXP_CLOCK_EVENTS_TOTAL", {**gpu_labels(node, "a100", 0), "clock_event": "hw_slowdown"},
             [[start + 3600, 0], [-4 * 86400, 12], [-86400 - 600, 12], [EDGE, 12], [-3600, 12], [0, 12]])  # fmt: skip
    f.series("DCGM_EXP_XID_ERRORS_TOTAL", {**gpu_labels(node, "a100", 5), "xid": "31"},
             [[-4 * 86400, 1], [-86400 - 600, 1], [EDGE, 1], [-7200, 1], [-6900, 2], [-3000, 4], [0, 4]])  # fmt: skip
    return f, {
        "target": "research/nemo-sft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L5_XID"],
        "absent": [
            "L5_CLOCK_EVENTS",
            "L5_DEVICE_UNHEALTHY",
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L4_NO_TELEMETRY",
        ],
    }


# --- the digest --------------------------------------------------------------------------------


def digest_time_sliced_mig_single_resets() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe6-digest-27-nodes-time-sliced-mig-single-reset-dips-healthy-target",
        "Built on gpu-operator's time-slicing docs (renameByDefault false: replicas advertised as nvidia.com/gpu, "
        "product -SHARED) and MIG docs (single strategy: MIG devices advertised as nvidia.com/gpu), samples 27 "
        "and 29, k8s-device-plugin issue 1228: the digest must list a time-sliced L40S that lost one GPU "
        "(16 → 12 replicas: 4 GPUs, 3 left), a MIG single-strategy A100 that lost one instance (28 → 27), and "
        "uncorrectable rows that rose; it must leave out rows that read 0 during a reset, rows that dropped, an "
        "Xid 31 burst alone, and a node whose nvidia.com/gpu reads 0 of 0; a since-start Xid counter days old "
        "is no Xid of the day, one that first appeared today is.",
        a100=9, h100=9, l40s=6, cpu=2,
    )  # fmt: skip
    target = "h100-infer-01"
    f.running_pod("triton-whisper-0", "serving", target, 2)
    f.gpu_series(target, "h100", 8)
    # l40s-viz-03: time-sliced, 4 replicas per GPU, not renamed; one GPU (all its replicas) marked unhealthy.
    n = f.node("l40s-viz-03")
    n["metadata"]["labels"].update({"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                    "nvidia.com/gpu.product": "NVIDIA-L40S-SHARED"})  # fmt: skip
    n["status"]["capacity"]["nvidia.com/gpu"] = "16"
    n["status"]["allocatable"]["nvidia.com/gpu"] = "12"
    uuid = uuid_of("l40s-viz-03", 1)
    f.plugin_log("l40s-viz-03",
        f"I1129 07:41:02.118340       1 health.go:185] XidCriticalError: Xid=79 on Device={uuid}; marking device as unhealthy.\n"
        + "".join(f"I1129 07:41:02.1184{r}1       1 server.go:276] 'nvidia.com/gpu' device marked unhealthy: {uuid}::{r}\n"
                  for r in range(4)))  # fmt: skip
    # a100-train-04: MIG single strategy, 7 x 1g.10gb per GPU advertised as nvidia.com/gpu; one instance lost.
    n = f.node("a100-train-04")
    n["metadata"]["labels"].update({"nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-1g.10gb",
                                    "nvidia.com/mig.config.state": "success", "nvidia.com/mig.capable": "true",
                                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
                                    "nvidia.com/gpu.count": "56"})  # fmt: skip
    n["status"]["capacity"]["nvidia.com/gpu"] = "56"
    n["status"]["allocatable"]["nvidia.com/gpu"] = "55"
    # dcgm-exporter 4.8's since-start Xid counter: l40s-viz-03's Xid 13 is days old (flat, scraped all
    # along), a100-train-04's Xid 31 first appeared two hours ago.
    f.series("DCGM_EXP_XID_ERRORS_TOTAL", {**gpu_labels("l40s-viz-03", "l40s", 0), "xid": "13"},
             [[-3 * 86400, 2], [-86400 - 600, 2], [EDGE, 2], [0, 2]])  # fmt: skip
    f.series("DCGM_EXP_XID_ERRORS_TOTAL", {**gpu_labels("a100-train-04", "a100", 2), "xid": "31"},
             [[-7200, 1], [-3600, 1], [0, 1]])  # fmt: skip
    # a100-train-07: uncorrectable rows rose 1 -> 3 today.
    b = gpu_labels("a100-train-07", "a100", 3)
    f.series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 1], [-30000, 2], [0, 3]])
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 0], [0, 0]])
    # h100-infer-04: rows read 0 for two scrapes during a GPU reset, then 6 again.
    b = gpu_labels("h100-infer-04", "h100", 7)
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b,
             [[EDGE, 6], [-7500, 6], [-7200, 0], [-6900, 0], [-6600, 6], [0, 6]])  # fmt: skip
    # h100-infer-06: rows dropped 3 -> 0 and stayed there.
    b = gpu_labels("h100-infer-06", "h100", 2)
    f.series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", b, [[EDGE, 3], [-9000, 3], [-8700, 0], [0, 0]])
    # a100-train-08: an Xid 31 burst only.
    b = gpu_labels("a100-train-08", "a100", 0)
    f.series("DCGM_EXP_XID_ERRORS_COUNT", {**b, "window_size_in_ms": "300000", "xid": "31"},
             [[EDGE, 0], [-5000, 4], [-4700, 1], [-4400, 0], [0, 0]])  # fmt: skip
    # h100-infer-09: nvidia.com/gpu reads "0" of "0" (k8s-device-plugin issue 1228).
    n = f.node("h100-infer-09")
    n["status"]["capacity"]["nvidia.com/gpu"] = "0"
    n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    mixed_mig(f, "a100-train-09", {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-3g.40gb": 8})
    for node in ("l40s-viz-03", "a100-train-04", "a100-train-07", "h100-infer-04", "h100-infer-06",
                 "a100-train-08", "h100-infer-09", "a100-train-09"):  # fmt: skip
        f._noise(node)
    return f, {
        "target": "serving/triton-whisper-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": None,
        "codes": ["L1_POD_SCHEDULED", "L5_OK"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L5_XID", "L5_REMAPPED_ROWS_RISING", "L4_NO_TELEMETRY"],
    }


RECIPES: list[Recipe] = [
    sidecar_gpu_on_top_of_main,
    capacity_zero_after_driver_loss,
    affinity_notin_gt_preferred_elsewhere,
    plugin_paused_for_mig_change,
    topology_spread_with_free_gpus,
    xid31_burst_dcgm4,
    rows_read_zero_during_reset,
    remap_pending_uncorrectable,
    exporter_totals_since_start,
    digest_time_sliced_mig_single_resets,
]


def main() -> None:
    write_recipes(RECIPES, HERE)


if __name__ == "__main__":
    main()
