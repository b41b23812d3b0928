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
from tests.incidents.probe3.parts import (
    CP_TAINT,
    DAY,
    EDGE,
    VAL,
    cordon,
    fill,
    gpu_labels,
    lose_gpu_with_log,
    unreachable,
)

HERE = Path(__file__).resolve().parent


# --- layer 1 -----------------------------------------------------------------------------------


def cordoned_half_pool() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-sched-1-30-two-cordoned-four-full-a100-32-nodes",
        "Built on samples 01-03 and kube-scheduler 1.30's message with four reasons at once (framework/types.go: "
        "counted reasons sorted and comma-joined, then the preemption sentence): `2 node(s) were unschedulable`, "
        "`4 Insufficient nvidia.com/gpu`. Two A100s of the train pool were cordoned for maintenance, the other "
        "four are full; elsewhere a cordoned H100 lost a GPU, an L40S lost one, an H100's rows rise.",
        a100=6, h100=12, l40s=10,
    )  # fmt: skip
    noise_in_viz_and_infer(f)
    for node in ("a100-train-01", "a100-train-02"):
        cordon(f, node)
    for i in range(3, 7):
        fill(f, f"a100-train-{i:02d}", f"pretrain-shard-{i}", "research")
    f.sick_lost_gpu("h100-infer-09", xid=48, gpu=6)
    cordon(f, "h100-infer-09", "2026-11-29T08:02:41Z")
    msg = (
        f"0/32 nodes are available: {CP_TAINT}, 2 node(s) were unschedulable, 25 node(s) didn't match Pod's node "
        "affinity/selector, 4 Insufficient nvidia.com/gpu. preemption: 0/32 nodes are available: 4 No preemption "
        "victims found for incoming pod, 28 Preemption is not helpful for scheduling."
    )
    f.pending_pod("pretrain-shard-7", "research", msg, gpus=4, selector={"pool": "train"})
    return f, {
        "target": "research/pretrain-shard-7",
        "walk": [1],
        "verdict": "L1_NODES_UNSCHEDULABLE",
        "codes": ["L1_POD_PENDING", "L1_NODES_UNSCHEDULABLE"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_EXHAUSTED", "L1_SELECTOR_MISMATCH",
                   "L1_UNTOLERATED_TAINT"],
    }  # fmt: skip


def untolerated_taints_generic_1_34() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-sched-1-34-untolerated-taints-generic-dedicated-h100-27-nodes",
        "Built on sample 04 and kubernetes/kubernetes pull 134740 (1.35, cherry-picked to 1.34): the scheduler no "
        "longer names the taint, `9 node(s) had untolerated taint(s)`. The H100 pool carries "
        "nvidia.com/gpu=present:NoSchedule and dedicated=llm-serving:NoSchedule; the pod tolerates the first only.",
        a100=6, h100=8, l40s=9,
    )  # fmt: skip
    for i in range(1, 9):
        f.node(f"h100-infer-{i:02d}")["spec"]["taints"] = [
            {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"},
            {"effect": "NoSchedule", "key": "dedicated", "value": "llm-serving"},
        ]
    f.sick_lost_gpu("l40s-viz-02", xid=79, gpu=1)
    f.sick_not_advertising("l40s-viz-04")
    f.sick_rows_rising("a100-train-03", "a100")
    msg = (
        "0/27 nodes are available: 9 node(s) had untolerated taint(s), 18 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/27 nodes are available: 27 Preemption is not helpful for scheduling."
    )
    tol = [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
    f.pending_pod("vllm-qwen-72b-0", "serving", msg, gpus=2, selector={"pool": "infer"}, tolerations=tol,
                  image="vllm/vllm-openai:v0.9.2")  # fmt: skip
    return f, {
        "target": "serving/vllm-qwen-72b-0",
        "walk": [1],
        "verdict": "L1_UNTOLERATED_TAINT",
        "codes": ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH", "L1_GPU_NODE_NOT_ADVERTISING"],
    }


def host_port_conflict() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-sched-1-29-host-port-taken-free-gpus-l40s-24-nodes",
        "Built on sample 01 and kube-scheduler's NodePorts reason `node(s) didn't have free ports for the requested "
        "pod ports`: every L40S runs a render gateway on hostPort 8443; the new one asks for the same port and "
        "1 of 4 free GPUs. Not a GPU fault: layer 1 reports the pending pod and the walk goes on over the healthy "
        "candidates. Elsewhere an A100 lost a GPU, an H100's rows rise, another H100 had Xid 48.",
        a100=6, h100=8, l40s=6,
    )  # fmt: skip
    f.sick_lost_gpu("a100-train-02", xid=79, gpu=3)
    f.sick_rows_rising("h100-infer-05", "h100")
    f.sick_xid_series("h100-infer-03", "h100", xid=48)
    port = [{"containerPort": 8443, "hostPort": 8443, "protocol": "TCP", "name": "https"}]
    for i in range(1, 7):
        node = f"l40s-viz-{i:02d}"
        f.gpu_series(node, "l40s", 4)
        f.running_pod(f"render-gateway-{i}", "viz", node, 1)
        f.objects[-1]["spec"]["containers"][0]["ports"] = port
    msg = (
        f"0/24 nodes are available: {CP_TAINT}, 17 node(s) didn't match Pod's node affinity/selector, 6 node(s) "
        "didn't have free ports for the requested pod ports. preemption: 0/24 nodes are available: 24 Preemption "
        "is not helpful for scheduling."
    )
    pod = f.pending_pod("render-gateway-7", "viz", msg, gpus=1, selector={"pool": "viz"})
    pod["spec"]["containers"][0]["ports"] = port
    return f, {
        "target": "viz/render-gateway-7",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L5_OK"],
        "absent": ["L1_GPU_EXHAUSTED", "L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH", "L5_XID",
                   "L5_REMAPPED_ROWS_RISING", "L5_DEVICE_UNHEALTHY"],
    }  # fmt: skip


def mig_single_asks_profile() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-mig-single-strategy-asked-mig-1g-10gb-22-nodes",
        "Built on sample 33 and gpu-operator's MIG docs (single strategy: MIG devices are advertised as "
        "nvidia.com/gpu, GFD sets gpu.product `…-MIG-1g.10gb` and gpu.count to the number of MIG devices): the "
        "A100 pool runs all-1g.10gb under mig.strategy=single; the notebook asks for nvidia.com/mig-1g.10gb, "
        "which only the mixed strategy advertises (`21 Insufficient nvidia.com/mig-1g.10gb`).",
        a100=6, h100=8, l40s=5, cpu=2,
    )  # fmt: skip
    for i in range(1, 7):
        n = f.node(f"a100-train-{i:02d}")
        n["metadata"]["labels"].update({
            "nvidia.com/mig.strategy": "single", "nvidia.com/mig.config": "all-1g.10gb",
            "nvidia.com/mig.config.state": "success", "nvidia.com/mig.capable": "true",
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "nvidia.com/gpu.count": "56",
            "nvidia.com/gpu.memory": "9728", "nvidia.com/gpu.multiprocessors": "14",
            "nvidia.com/gpu.slices.gi": "1", "nvidia.com/gpu.slices.ci": "1",
        })  # fmt: skip
        for key in ("capacity", "allocatable"):
            n["status"][key]["nvidia.com/gpu"] = "56"
    noise_in_viz_and_infer(f)
    msg = (
        f"0/22 nodes are available: {CP_TAINT}, 21 Insufficient nvidia.com/mig-1g.10gb. preemption: 0/22 nodes are "
        "available: 22 Preemption is not helpful for scheduling."
    )
    f.pending_pod("jupyter-chen-0", "notebooks", msg, gpus=1, resource="nvidia.com/mig-1g.10gb")
    return f, {
        "target": "notebooks/jupyter-chen-0",
        "walk": [1],
        "verdict": "L1_RESOURCE_MISMATCH",
        "codes": ["L1_POD_PENDING", "L1_RESOURCE_MISMATCH"],
        "absent": ["L1_GPU_NODE_NOT_ADVERTISING", "L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_EXHAUSTED",
                   "L1_MIG_CONFIG_FAILED", "L1_NO_GPU_ADVERTISED"],
    }  # fmt: skip


def only_candidate_unreachable() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-only-candidate-unreachable-taint-h100-xl-20-nodes",
        "Built on sample 04, hystax/optscale issue 568 (`had untolerated taint {node.kubernetes.io/unreachable: }`) "
        "and kubernetes pull 134740's generic `had untolerated taint(s)`: the one node of the infer-xl pool "
        "stopped posting status (Ready Unknown, `Kubelet stopped posting node status.`); the node controller "
        "tainted it node.kubernetes.io/unreachable NoSchedule and NoExecute. A toleration is not the fix: the "
        "node is down.",
        a100=6, h100=6, l40s=4, cpu=2,
    )  # fmt: skip
    f.gpu_node("h100-xl-01", "h100", pool="infer-xl", operands="plugin")
    unreachable(f, "h100-xl-01")
    noise_in_viz_and_infer(f)
    msg = (
        "0/20 nodes are available: 2 node(s) had untolerated taint(s), 18 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/20 nodes are available: 20 Preemption is not helpful for scheduling."
    )
    f.pending_pod("train-70b-xl-0", "research", msg, gpus=8, selector={"pool": "infer-xl"})
    return f, {
        "target": "research/train-70b-xl-0",
        "walk": [1],
        "verdict": "L1_UNTOLERATED_TAINT",
        "codes": ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH", "L1_GPU_EXHAUSTED"],
    }


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
    healthy_node_sick_neighbours,
    stale_xid_relabelled_by_pod,
    exporter_4_6_lowercase_xid95,
    plugin_mark_older_than_a_day,
    xid63_rows_rising,
    digest_fleet,
    digest_exporter_podname_gated,
]


def main() -> None:
    write_recipes(RECIPES, HERE)


if __name__ == "__main__":
    main()
