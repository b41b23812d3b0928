"""The probe3 layer-1 fleets: kube-scheduler messages of 1.29-1.34, cordons, taints Kubernetes
itself sets, host ports, the MIG single strategy, a pool that shares its GPUs under another name."""

from __future__ import annotations

from typing import Any

from tests.incidents.fleets import Fleet, mixed_pools, noise_in_viz_and_infer
from tests.incidents.probe3.parts import CP_TAINT, cordon, fill, unreachable


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


def selects_shared_pool_asks_gpu() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-selects-time-sliced-pool-asks-nvidia-gpu-22-nodes",
        "Built on gpu-operator's time-slicing docs (`renameByDefault: true` advertises nvidia.com/gpu.shared, "
        "GFD sets gpu.replicas and sharing-strategy) and samples 01 and 39: the viz pool shares its L40S GPUs "
        "four ways as nvidia.com/gpu.shared; the notebook selects pool=viz but asks for nvidia.com/gpu, which "
        "the A100 and H100 pools advertise (`6 Insufficient nvidia.com/gpu`, `15 node(s) didn't match Pod's "
        "node affinity/selector`). The selector is right; the resource name is not.",
        a100=6, h100=6, l40s=6,
    )  # fmt: skip
    for i in range(1, 7):
        n = f.node(f"l40s-viz-{i:02d}")
        n["metadata"]["labels"].update(
            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
        )
        for key in ("capacity", "allocatable"):
            del n["status"][key]["nvidia.com/gpu"]
            n["status"][key]["nvidia.com/gpu.shared"] = "16"
    f.sick_lost_gpu("a100-train-02", xid=79, gpu=3)
    f.sick_not_advertising("h100-infer-03")
    f.sick_rows_rising("h100-infer-05", "h100")
    msg = (
        f"0/22 nodes are available: {CP_TAINT}, 6 Insufficient nvidia.com/gpu, 15 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/22 nodes are available: 22 Preemption is not helpful for scheduling."
    )
    f.pending_pod("jupyter-dana-0", "notebooks", msg, gpus=1, selector={"pool": "viz"})
    return f, {
        "target": "notebooks/jupyter-dana-0",
        "walk": [1],
        "verdict": "L1_RESOURCE_MISMATCH",
        "codes": ["L1_POD_PENDING", "L1_RESOURCE_MISMATCH"],
        "absent": ["L1_SELECTOR_MISMATCH", "L1_GPU_EXHAUSTED", "L1_ALLOCATABLE_BELOW_CAPACITY",
                   "L1_GPU_NODE_NOT_ADVERTISING"],
    }  # fmt: skip


def pool_half_down_half_full() -> tuple[Fleet, dict[str, Any]]:
    f = mixed_pools(
        "probe3-xl-pool-one-full-one-unreachable-21-nodes",
        "Built on sample 03 (no preemption victims), kubernetes pull 134740's generic `had untolerated taint(s)` and the node controller's "
        "unreachable taints: the infer-xl pool has two H100s, one full, one that stopped posting status. "
        "The full one is the only candidate: a capacity question (`L1_GPU_EXHAUSTED`); the one that is down "
        "is no candidate, so it is told as one info line beside it, never as the walk's fault.",
        a100=6, h100=6, l40s=4, cpu=2,
    )  # fmt: skip
    for i in (1, 2):
        f.gpu_node(f"h100-xl-{i:02d}", "h100", pool="infer-xl", operands="plugin")
    fill(f, "h100-xl-01", "train-70b-xl", "research")
    unreachable(f, "h100-xl-02")
    noise_in_viz_and_infer(f)
    msg = (
        "0/21 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) had untolerated taint(s), 18 node(s) "
        "didn't match Pod's node affinity/selector. preemption: 0/21 nodes are available: 1 No preemption victims "
        "found for incoming pod, 20 Preemption is not helpful for scheduling."
    )
    f.pending_pod("train-70b-xl-1", "research", msg, gpus=8, selector={"pool": "infer-xl"})
    return f, {
        "target": "research/train-70b-xl-1",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_EXHAUSTED", "L1_ELSEWHERE_IN_FLEET"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_UNTOLERATED_TAINT"],
    }
