"""The noise-fleet scenarios, written out as YAML: `python -m tests.incidents.fleets`.

Each recipe fills one production-shaped fleet (8-50 nodes, several GPU models and pools, sick
nodes the target pod could never use), named after its function and described by its docstring,
and returns its expected diagnosis. The committed YAML files are what the tests read; this script
is how they were made, kept so a change to a fleet is a reviewed change to its recipe.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.incidents.fleets import Fleet, Recipe, write_recipes

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parents[2] / "bot" / "scenarios"

GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
PREEMPTION_NOT_HELPFUL = (
    ". preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
)
CONTROL_PLANE = "1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"


def recipe(build: Callable[[Fleet], dict[str, Any]]) -> Recipe:
    """A fleet named after its function and described by its docstring; `build` fills it and returns
    the expected diagnosis."""

    def made() -> tuple[Fleet, dict[str, Any]]:
        fleet = Fleet(build.__name__.replace("_", "-"), " ".join((inspect.getdoc(build) or "").split("\n")))
        return fleet, build(fleet)

    made.__name__ = build.__name__
    return made


def _expect(
    pod: dict[str, Any], verdict: str, codes: list[str], absent: list[str], walk: list[int] | None = None
) -> dict[str, Any]:
    """`x-expect` of a walk of `pod`: the layers walked (layer 1 alone unless said), the verdict, codes
    present and absent."""
    target = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
    return {"target": target, "walk": walk or [1], "verdict": verdict, "codes": codes, "absent": absent}


def _unschedulable(n: int, *reasons: str, then: str = ".") -> str:
    """kube-scheduler's FailedScheduling message over `n` nodes, and what follows the reasons."""
    return f"0/{n} nodes are available: " + ", ".join(reasons) + then


def _mixed_mig(config: str, state: str) -> dict[str, str]:
    """The MIG manager's labels of a node in the mixed strategy."""
    return {
        "nvidia.com/mig.config": config,
        "nvidia.com/mig.config.state": state,
        "nvidia.com/mig.strategy": "mixed",
    }


def _only_candidate(f: Fleet, node: str) -> None:
    """A positive control: `node` is sick, yet not noise: its fault must decide the walk."""
    f.noise.remove(node)
    f.decides = node


# The issue's own example: pending only for a missing toleration, an H100 it could never use lost a GPU.
@recipe
def pending_missing_toleration_xid_elsewhere(f: Fleet) -> dict[str, Any]:
    """Built on samples 04 (untolerated taint message, k8s-device-plugin issue 421) and 06 (Xid 79, 7 of 8
    GPUs): a 10-node fleet where the A100 training pool is tainted nvidia.com/gpu=present:NoSchedule and
    the batch job selects A100s without tolerating the taint. Elsewhere an H100 node lost a GPU to Xid
    79: noise for this pod, which could never run there."""
    f.control_plane()
    for i in (1, 2):
        f.cpu_node(f"cpu-{i:02d}")
    for i in range(1, 5):
        f.gpu_node(f"a100-train-{i:02d}", "a100", pool="train", taints=[GPU_TAINT])
    for i in range(1, 4):
        f.gpu_node(f"h100-infer-{i:02d}", "h100", pool="infer")
    f.sick_lost_gpu("h100-infer-02", xid=79)
    msg = _unschedulable(
        10,
        CONTROL_PLANE,
        "4 node(s) had untolerated taint {nvidia.com/gpu: present}",
        "5 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_NOT_HELPFUL.format(n=10),
    )
    pod = f.pending_pod(
        "batch-embed-7q2xk",
        "batch",
        msg,
        gpus=4,
        selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    )
    return _expect(
        pod,
        "L1_UNTOLERATED_TAINT",
        ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH"],
    )


# The MIG manager's log of a failed reconfiguration: its start-up and step lines (gpu-operator
# issues 322 and 646), the failure lines of NVIDIA's OpenShift MIG guide ("In use by another
# client", "all orderings failed") and the state label set to 'failed'.
MIG_MANAGER_FAILED = """\
WITH_SHUTDOWN_HOST_GPU_CLIENTS=false
DRIVER_ROOT=/run/nvidia/driver
DRIVER_ROOT_CTR_PATH=/run/nvidia/driver
Starting nvidia-mig-manager
W1123 10:12:40.074295   43392 client_config.go:615] Neither --kubeconfig nor --master was specified.  Using the inClusterConfig.  This might not work.
time="2026-11-23T10:12:40Z" level=info msg="Waiting for change to 'nvidia.com/mig.config' label"
time="2026-11-29T09:31:42Z" level=info msg="Updating to MIG config: all-1g.10gb"
Getting current value of the 'nvidia.com/gpu.deploy.device-plugin' node label
Current value of 'nvidia.com/gpu.deploy.device-plugin=true'
Getting current value of the 'nvidia.com/gpu.deploy.gpu-feature-discovery' node label
Current value of 'nvidia.com/gpu.deploy.gpu-feature-discovery=true'
Getting current value of the 'nvidia.com/gpu.deploy.dcgm-exporter' node label
Current value of 'nvidia.com/gpu.deploy.dcgm-exporter=true'
Asserting that the requested configuration is present in the configuration file
Selected MIG configuration is valid
Getting current value of the 'nvidia.com/mig.config.state' node label
Current value of 'nvidia.com/mig.config.state=success'
Checking if the selected MIG config is currently applied or not
time="2026-11-29T09:31:43Z" level=fatal msg="Assertion failure: selected configuration not currently applied"
Changing the 'nvidia.com/mig.config.state' node label to 'pending'
node/{node} labeled
Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels
node/{node} labeled
Waiting for the device-plugin to shutdown
pod/nvidia-device-plugin-daemonset-x2kqd condition met
Applying the selected MIG config to the node
time="2026-11-29T09:32:17Z" level=error msg="error destroying Compute instance for profile '(0, 0)': In use by another client"
time="2026-11-29T09:32:17Z" level=error msg="Error clearing MIG config on GPU 0, erroneous devices may persist"
time="2026-11-29T09:32:18Z" level=error msg="Error setting MIGConfig: error attempting multiple config orderings: all orderings failed"
Restarting all GPU clients previously shutdown by reenabling their component-specific nodeSelector labels
node/{node} labeled
Changing the 'nvidia.com/mig.config.state' node label to 'failed'
node/{node} labeled
time="2026-11-29T09:32:19Z" level=info msg="Waiting for change to 'nvidia.com/mig.config' label"
"""


@recipe
def mig_reconfig_failed_gpu_clients_in_use(f: Fleet) -> dict[str, Any]:
    """Built on sample 33 (MIG mixed labels of an A100) and the MIG manager's failure text (NVIDIA's MIG
    guide: 'In use by another client', 'all orderings failed'; gpu-operator issue 281: state 'failed'):
    dgx-a100-03 was relabelled nvidia.com/mig.config=all-1g.10gb while a job still held its GPUs, the
    reconfiguration failed and the node still advertises 8 whole GPUs. A notebook asking for
    nvidia.com/mig-1g.10gb stays Pending: the request is right, the MIG manager is what to fix.
    Elsewhere an H100 lost a GPU to Xid 79 (noise)."""
    f.control_plane()
    f.cpu_node("cpu-01")
    for i in (1, 2):
        f.gpu_node(
            f"dgx-a100-0{i}",
            "a100",
            pool="research",
            resource="nvidia.com/mig-3g.40gb",
            gpus=2,
            labels=_mixed_mig("all-3g.40gb", "success"),
        )
    f.gpu_node(
        "dgx-a100-03",
        "a100",
        pool="research",
        series=True,
        labels={**_mixed_mig("all-1g.10gb", "failed"), "nvidia.com/gpu.deploy.mig-manager": "true"},
    )
    f.mig_manager("dgx-a100-03", MIG_MANAGER_FAILED.replace("{node}", "dgx-a100-03"))
    for i in (1, 2, 3):
        f.gpu_node(f"h100-infer-0{i}", "h100", pool="infer")
    f.sick_lost_gpu("h100-infer-03", xid=79)
    msg = _unschedulable(
        8,
        CONTROL_PLANE,
        "7 Insufficient nvidia.com/mig-1g.10gb",
        then=". preemption: 0/8 nodes are available: 1 Preemption is not helpful for scheduling, "
        "7 No preemption victims found for incoming pod.",
    )
    pod = f.pending_pod("notebook-akim-0", "research", msg, resource="nvidia.com/mig-1g.10gb")
    return _expect(
        pod,
        "L1_MIG_CONFIG_FAILED",
        ["L1_POD_PENDING", "L1_MIG_CONFIG_FAILED", "L1_ELSEWHERE_IN_FLEET", "L2_OK", "L5_OK"],
        ["L1_RESOURCE_MISMATCH", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_XID", "L5_DEVICE_UNHEALTHY"],
        walk=[1, 2, 3, 4, 5],
    )


@recipe
def kueue_gated_job_noisy_fleet(f: Fleet) -> dict[str, Any]:
    """Built on the API server's SchedulingGated condition ('Scheduling is blocked due to non-empty
    scheduling gates') and Kueue's admission gate kueue.x-k8s.io/admission, with samples 06 (Xid 79) and
    29 (exporter Xid counts) for the noise: a 12-node fleet where a training job's pod waits for its
    ClusterQueue's quota while two H100 nodes are sick. The walk says the queue holds it and looks at no
    node."""
    f.control_plane()
    f.cpu_node("cpu-01")
    for i in range(1, 7):
        f.gpu_node(f"h100-{i:02d}", "h100", pool="train")
    for i in range(1, 5):
        f.gpu_node(f"l40s-{i:02d}", "l40s", gpus=4, pool="infer")
    f.sick_lost_gpu("h100-02", xid=79)
    f.sick_xid_series("h100-05", "h100", xid=48)
    pod = f.pending_pod("llm-sft-worker-0", "training", None, gpus=8, gates=["kueue.x-k8s.io/admission"])
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-llm"
    return _expect(
        pod,
        "L1_SCHEDULING_GATED",
        ["L1_POD_PENDING", "L1_SCHEDULING_GATED"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_ELSEWHERE_IN_FLEET", "L1_GPU_EXHAUSTED"],
    )


BUNDLED_RECIPES: list[Recipe] = [
    pending_missing_toleration_xid_elsewhere,
    mig_reconfig_failed_gpu_clients_in_use,
    kueue_gated_job_noisy_fleet,
]


# --- noise fleets: the target's cause is elsewhere, sick nodes it could never use all around ------

# kube-scheduler's FailedScheduling text over the versions (samples 01-04; k8s 1.17 "had taints that
# the pod didn't tolerate", 1.18-1.23 "had taint {k: v}, that the pod didn't tolerate" and "didn't
# match node selector" / "Pod's node affinity", 1.24+ "untolerated taint", 1.27+ "Pod's node
# affinity/selector" with the preemption suffix).
PREEMPTION_MIXED = (
    ". preemption: 0/{n} nodes are available: {a} No preemption victims found for incoming pod, "
    "{b} Preemption is not helpful for scheduling."
)


def _sick_pools(
    f: Fleet, prefix: str = "h100", count: int = 12, model: str = "h100", pool: str = "infer"
) -> None:
    """A pool with the sickness a large fleet always has: lost GPUs, Xids, rising rows, a silent node."""
    for i in range(1, count + 1):
        f.gpu_node(f"{prefix}-{i:02d}", model, pool=pool, operands="plugin" if i > 4 else True)
    f.sick_lost_gpu(f"{prefix}-02", xid=79)
    f.sick_lost_gpu(f"{prefix}-07", xid=94, gpu=5)
    f.sick_xid_series(f"{prefix}-04", model, xid=48)
    f.sick_rows_rising(f"{prefix}-09", model)
    f.sick_not_advertising(f"{prefix}-{count:02d}")


def _kubevirt(f: Fleet, count: int = 2) -> None:
    for i in range(1, count + 1):
        f.gpu_node(f"kubevirt-h100-{i:02d}", "h100", pool="vms", operands=False)
        f.passthrough(f"kubevirt-h100-{i:02d}")


def _notebook_waits_for_a_mig_slice(
    f: Fleet, n: int, name: str, pool: str, *, without: int
) -> dict[str, Any]:
    """A notebook of namespace and pool `pool` asks for nvidia.com/mig-1g.10gb: `without` nodes of the
    pool lack the slice, the other nodes of the `n` (but the control plane) are of other pools. The
    MIG layout that failed or is stuck must be the answer, not the sick nodes elsewhere."""
    msg = _unschedulable(
        n,
        CONTROL_PLANE,
        f"{without} Insufficient nvidia.com/mig-1g.10gb",
        f"{n - 1 - without} node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_MIXED.format(n=n, a=without, b=n - without),
    )
    pod = f.pending_pod(name, pool, msg, resource="nvidia.com/mig-1g.10gb", selector={"pool": pool})
    return _expect(
        pod,
        "L1_MIG_CONFIG_FAILED",
        ["L1_POD_PENDING", "L1_MIG_CONFIG_FAILED", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_RESOURCE_MISMATCH", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_XID", "L5_DEVICE_UNHEALTHY"],
        walk=[1, 2, 3, 4, 5],
    )


@recipe
def noise_old_scheduler_taint_32_nodes(f: Fleet) -> dict[str, Any]:
    """Built on samples 04 and 06 and the kube-scheduler 1.18-1.23 wording ('had taint {k: v}, that the pod
    didn't tolerate', 'didn't match node selector'): 32 nodes, an A100 training pool tainted
    nvidia.com/gpu=present:NoSchedule that the job selects without a toleration; the H100 pool has lost
    GPUs (Xid 79, 94), a DCGM Xid 48, rising remapped rows and a node whose plugin never registered; two
    KubeVirt passthrough nodes advertise nothing to pods."""
    f.control_plane("k8s-master-01")
    for i in range(1, 4):
        f.cpu_node(f"cpu-{i:02d}")
    for i in range(1, 7):
        f.gpu_node(f"a100-train-{i:02d}", "a100", pool="train", taints=[GPU_TAINT], operands="plugin")
    _sick_pools(f)
    _kubevirt(f)
    for i in range(1, 9):
        f.gpu_node(
            f"l40s-{i:02d}", "l40s", gpus=4, pool="render", operands="plugin", plugin_version="v0.15.0"
        )
    msg = _unschedulable(
        32,
        "1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate",
        "6 node(s) had taint {nvidia.com/gpu: present}, that the pod didn't tolerate",
        "25 node(s) didn't match node selector",
    )
    pod = f.pending_pod("pretrain-7b-worker-0", "train", msg, gpus=8, selector={"pool": "train"})
    return _expect(
        pod,
        "L1_UNTOLERATED_TAINT",
        ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_NODE_NOT_ADVERTISING", "L1_SELECTOR_MISMATCH"],
    )


@recipe
def noise_selector_no_h200_20_nodes(f: Fleet) -> dict[str, Any]:
    """Built on samples 01 (selector and Insufficient message) and 06 (Xid 79) with the 1.27+ wording: a
    job pins nvidia.com/gpu.product=NVIDIA-H200 on a 20-node fleet of H100s and L4s; three H100s are
    sick. The selector matches no GPU node: that is the answer, not the sick H100s."""
    f.control_plane()
    _sick_pools(f, count=12)
    for i in range(1, 8):
        f.gpu_node(f"l4-{i:02d}", "l4", gpus=1, pool="edge", operands="plugin")
    msg = _unschedulable(
        20,
        CONTROL_PLANE,
        "19 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_NOT_HELPFUL.format(n=20),
    )
    pod = f.pending_pod(
        "llama-405b-eval-0", "eval", msg, gpus=8, selector={"nvidia.com/gpu.product": "NVIDIA-H200"}
    )
    return _expect(
        pod,
        "L1_SELECTOR_MISMATCH",
        ["L1_POD_PENDING", "L1_SELECTOR_MISMATCH", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_NODE_NOT_ADVERTISING", "L1_UNTOLERATED_TAINT"],
    )


@recipe
def noise_l40s_pool_exhausted_24_nodes(f: Fleet) -> dict[str, Any]:
    """Built on sample 03 (Insufficient nvidia.com/gpu with the preemption suffix) and sample 06: the
    inference pool's six L40S nodes are fully allocated, so the new replica waits; the H100 training
    pool next to it has lost GPUs and Xids it could never use. A capacity question, not a fault."""
    f.control_plane()
    _sick_pools(f, count=12, pool="train")
    for i in range(1, 7):
        f.gpu_node(f"l40s-infer-{i:02d}", "l40s", gpus=4, pool="infer")
        f.running_pod(f"triton-{i:02d}-5c9d7", "inference", f"l40s-infer-{i:02d}", 4)
    for i in range(1, 6):
        f.cpu_node(f"cpu-{i:02d}")
    msg = _unschedulable(
        24,
        CONTROL_PLANE,
        "6 Insufficient nvidia.com/gpu",
        "17 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_MIXED.format(n=24, a=6, b=18),
    )
    pod = f.pending_pod("triton-07-8f2kq", "inference", msg, gpus=1, selector={"pool": "infer"})
    return _expect(
        pod,
        "L1_POD_PENDING",
        ["L1_POD_PENDING", "L1_GPU_EXHAUSTED", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH", "L1_GPU_NODE_NOT_ADVERTISING"],
    )


@recipe
def noise_kueue_gated_40_nodes(f: Fleet) -> dict[str, Any]:
    """Built on the API server's SchedulingGated condition and Kueue's admission gate, with samples 06 and
    29 for the noise: 40 nodes over three pools and two operator/plugin versions, five of them sick; a
    team's 16-GPU job waits for its ClusterQueue. No node is looked at."""
    f.control_plane()
    _sick_pools(f, count=16, pool="train")
    for i in range(1, 13):
        f.gpu_node(f"a100-{i:02d}", "a100", pool="research", operands="plugin", plugin_version="v0.14.5")
    f.sick_lost_gpu("a100-05", xid=119, gpu=2)
    for i in range(1, 12):
        f.cpu_node(f"cpu-{i:02d}")
    pod = f.pending_pod("sft-70b-worker-1", "team-nlp", None, gpus=8, gates=["kueue.x-k8s.io/admission"])
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "team-nlp"
    return _expect(
        pod,
        "L1_SCHEDULING_GATED",
        ["L1_POD_PENDING", "L1_SCHEDULING_GATED"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_ELSEWHERE_IN_FLEET", "L1_GPU_EXHAUSTED"],
    )


@recipe
def noise_mig_pending_stuck_16_nodes(f: Fleet) -> dict[str, Any]:
    """Built on sample 33 (MIG mixed labels) and the MIG manager's log (gpu-operator issues 322 and 646):
    the A100 slicing node has sat at nvidia.com/mig.config.state=pending for 40 minutes (its log stops
    after 'Waiting for the device-plugin to shutdown'), so nvidia.com/mig-1g.10gb never appears; the
    H100s next to it are sick. The MIG manager is the answer."""
    f.control_plane()
    _sick_pools(f, count=12)
    f.gpu_node(
        "a100-slice-01", "a100", pool="notebooks", series=True, labels=_mixed_mig("all-1g.10gb", "pending")
    )
    stuck = MIG_MANAGER_FAILED.replace("{node}", "a100-slice-01")
    stuck = stuck[: stuck.index("Applying the selected MIG config")]
    stuck = stuck.replace("2026-11-29T09:31", "2026-11-29T09:32")
    f.mig_manager("a100-slice-01", stuck)
    f.cpu_node("cpu-01")
    f.cpu_node("cpu-02")
    return _notebook_waits_for_a_mig_slice(f, 16, "notebook-rlee-0", "notebooks", without=1)


@recipe
def noise_drain_cordons_pool_14_nodes(f: Fleet) -> dict[str, Any]:
    """Built on sample 02 ('were unschedulable') and sample 06: a driver upgrade cordoned all three nodes
    of the A10G pool the job selects, while H100 nodes of another team are sick. Uncordon, not the card."""
    f.control_plane()
    for i in range(1, 4):
        n = f.gpu_node(f"a10g-{i:02d}", "a10g", gpus=4, pool="batch")
        n["spec"]["unschedulable"] = True
        n["spec"]["taints"] = [{"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable",
                                "timeAdded": "2026-11-29T08:40:00Z"}]  # fmt: skip
        n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "wait-for-jobs-required"
    _sick_pools(f, count=10, pool="infer")
    msg = _unschedulable(
        14,
        CONTROL_PLANE,
        "10 node(s) didn't match Pod's node affinity/selector",
        "3 node(s) were unschedulable",
        then=PREEMPTION_NOT_HELPFUL.format(n=14),
    )
    pod = f.pending_pod("nightly-etl-28731940-xk2mz", "batch", msg, gpus=1, selector={"pool": "batch"})
    return _expect(
        pod,
        "L1_NODES_UNSCHEDULABLE",
        ["L1_POD_PENDING", "L1_NODES_UNSCHEDULABLE", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH"],
    )


@recipe
def noise_vm_nodes_and_full_pool_10_nodes(f: Fleet) -> dict[str, Any]:
    """Built on sample 01's oldest wording ('N Insufficient nvidia.com/gpu') and the GPU Operator's
    KubeVirt labels (nvidia.com/gpu.workload.config=vm-passthrough,
    nvidia.com/gpu.deploy.operands=false): of 10 nodes, three hand their GPUs to VMs and one has
    operands turned off, so they advertise nothing to pods by design; the four L40S container nodes are
    full. Not a GPU node failing to advertise."""
    f.control_plane()
    f.cpu_node("cpu-01")
    for i in range(1, 5):
        f.gpu_node(f"l40s-{i:02d}", "l40s", gpus=4, pool="pods")
        f.running_pod(f"train-{i}-0", "ml", f"l40s-{i:02d}", 4)
    _kubevirt(f, 3)
    f.gpu_node("h100-reserved-01", "h100", pool="pods", operands=False)
    f.operands_off("h100-reserved-01")
    msg = _unschedulable(
        10, "1 node(s) had taints that the pod didn't tolerate", "9 Insufficient nvidia.com/gpu"
    )
    pod = f.pending_pod("train-5-0", "ml", msg, gpus=4)
    return _expect(
        pod,
        "L1_POD_PENDING",
        ["L1_POD_PENDING", "L1_GPU_EXHAUSTED"],
        [
            "L1_GPU_NODE_NOT_ADVERTISING",
            "L1_NO_GPU_ADVERTISED",
            "L1_ELSEWHERE_IN_FLEET",
            "L1_ALLOCATABLE_BELOW_CAPACITY",
        ],
    )


@recipe
def noise_toleration_wrong_value_50_nodes(f: Fleet) -> dict[str, Any]:
    """Built on sample 04 and the 1.24+ wording: 50 nodes; the job tolerates nvidia.com/gpu=reserved but
    the H100 pool it selects is tainted nvidia.com/gpu=present, so the toleration does not apply.
    Sixteen other nodes carry lost GPUs, Xids, rising rows, a silent plugin and VM passthrough: all
    noise."""
    f.control_plane()
    for i in range(1, 11):
        f.gpu_node(f"h100-train-{i:02d}", "h100", pool="train", taints=[GPU_TAINT], operands="plugin")
    _sick_pools(f, prefix="h100-infer", count=20, pool="infer")
    f.sick_lost_gpu("h100-infer-15", xid=79, gpu=1)
    f.sick_lost_gpu("h100-infer-18", xid=48, gpu=6)
    _kubevirt(f, 4)
    for i in range(1, 11):
        f.gpu_node(f"a10g-{i:02d}", "a10g", gpus=4, pool="dev", operands="plugin", plugin_version="v0.16.2")
    f.sick_lost_gpu("a10g-03", xid=79, gpu=0)
    for i in range(1, 6):
        f.cpu_node(f"cpu-{i:02d}")
    msg = _unschedulable(
        50,
        CONTROL_PLANE,
        "10 node(s) had untolerated taint {nvidia.com/gpu: present}",
        "39 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_NOT_HELPFUL.format(n=50),
    )
    tol = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "reserved", "effect": "NoSchedule"}]
    pod = f.pending_pod("grpo-actor-0", "rl", msg, gpus=8, selector={"pool": "train"}, tolerations=tol)
    return _expect(
        pod,
        "L1_UNTOLERATED_TAINT",
        ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_NODE_NOT_ADVERTISING", "L1_SELECTOR_MISMATCH"],
    )


@recipe
def noise_affinity_memory_gt_18_nodes(f: Fleet) -> dict[str, Any]:
    """Built on samples 01 and 32 (GFD's nvidia.com/gpu.memory label) and the 1.20-1.21 wording ('didn't
    match Pod's node affinity'): a job requires nvidia.com/gpu.memory Gt 100000 (an H200's 141 GB) on a
    fleet of 80 GB H100s and 46 GB L40S; sick H100s around it are not the reason."""
    f.control_plane("k8s-master-01")
    _sick_pools(f, count=10)
    for i in range(1, 8):
        f.gpu_node(f"l40s-{i:02d}", "l40s", gpus=4, pool="render", operands="plugin")
    msg = _unschedulable(
        18,
        "1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod didn't tolerate",
        "17 node(s) didn't match Pod's node affinity",
    )
    pod = f.pending_pod("mixtral-8x22b-serve-0", "llm", msg, gpus=4)
    pod["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["100000"]}]}]}}}  # fmt: skip
    return _expect(
        pod,
        "L1_SELECTOR_MISMATCH",
        ["L1_POD_PENDING", "L1_SELECTOR_MISMATCH", "L1_ELSEWHERE_IN_FLEET"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_GPU_NODE_NOT_ADVERTISING"],
    )


@recipe
def noise_mig_failed_other_pool_sick_13_nodes(f: Fleet) -> dict[str, Any]:
    """Built on sample 33 and NVIDIA's MIG guide failure text ('In use by another client', 'all orderings
    failed'): the only A100 asked for all-1g.10gb failed its reconfiguration; a second A100 on
    all-3g.40gb has lost a GPU to Xid 79 and the H100s have Xids. The failed layout is the answer."""
    f.control_plane()
    f.gpu_node(
        "dgx-a100-01",
        "a100",
        pool="research",
        resource="nvidia.com/mig-3g.40gb",
        gpus=16,
        labels=_mixed_mig("all-3g.40gb", "success"),
    )
    f.sick_lost_gpu("dgx-a100-01", xid=79)
    f.gpu_node(
        "dgx-a100-02", "a100", pool="research", series=True, labels=_mixed_mig("all-1g.10gb", "failed")
    )
    f.mig_manager("dgx-a100-02", MIG_MANAGER_FAILED.replace("{node}", "dgx-a100-02"))
    _sick_pools(f, count=10)
    return _notebook_waits_for_a_mig_slice(f, 13, "jupyter-mchen-0", "research", without=2)


# --- positive controls: the only candidate is the sick node, and its fault must decide ------------


@recipe
def control_only_candidate_lost_gpu_20_nodes(f: Fleet) -> dict[str, Any]:
    """Positive control built on sample 06 (Xid 79, 7 of 8 allocatable): the job selects the one-node
    'bigmem' pool, whose node lost a GPU to Xid 79; other pools are sick too. The candidate's fault
    decides: layer 1 jumps to 5 on that node only."""
    f.control_plane()
    f.gpu_node("h100-bigmem-01", "h100", pool="bigmem", series=True)
    f.sick_lost_gpu("h100-bigmem-01", xid=79)
    _only_candidate(f, "h100-bigmem-01")
    _sick_pools(f, count=12)
    for i in range(1, 7):
        f.gpu_node(f"l4-{i:02d}", "l4", gpus=1, pool="edge", operands="plugin")
    msg = _unschedulable(
        20,
        "1 Insufficient nvidia.com/gpu",
        CONTROL_PLANE,
        "18 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_MIXED.format(n=20, a=1, b=19),
    )
    pod = f.pending_pod("trainer-0", "ml", msg, gpus=8, selector={"pool": "bigmem"})
    return _expect(
        pod,
        "L5_XID",
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_POD_PENDING", "L5_DEVICE_UNHEALTHY", "L5_XID"],
        ["L1_SELECTOR_MISMATCH"],
        walk=[1, 5],
    )


@recipe
def control_only_candidate_time_sliced_16_nodes(f: Fleet) -> dict[str, Any]:
    """Positive control built on sample 06 and sample 31's sharing labels (nvidia.com/gpu.replicas,
    sharing-strategy): the dev pool's only node shares 4 L4 GPUs 4 ways (capacity 16) and one GPU fell
    off the bus, so allocatable is 12: one GPU, not four. The candidate decides; the sick H100s do not."""
    f.control_plane()
    f.gpu_node("l4-dev-01", "l4", gpus=4, replicas=4, pool="dev", series=True)
    f.sick_lost_gpu("l4-dev-01", xid=79, gpu=2)
    _only_candidate(f, "l4-dev-01")
    _sick_pools(f, count=12)
    f.cpu_node("cpu-01")
    f.cpu_node("cpu-02")
    msg = _unschedulable(
        16,
        "1 Insufficient nvidia.com/gpu",
        CONTROL_PLANE,
        "14 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_MIXED.format(n=16, a=1, b=15),
    )
    pod = f.pending_pod("notebook-dev-0", "dev", msg, gpus=16, selector={"pool": "dev"})
    return _expect(
        pod,
        "L5_XID",
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_POD_PENDING", "L5_XID"],
        ["L1_SELECTOR_MISMATCH"],
        walk=[1, 5],
    )


@recipe
def control_only_candidate_not_advertising_15_nodes(f: Fleet) -> dict[str, Any]:
    """Positive control (control case) built on the new-node pattern of the l12 incidents (labels, no
    nvidia.com/gpu in capacity): the job selects the fresh 'b200' pool whose only node's device plugin
    never registered; the H100 pool's sick nodes are noise. Layer 1 points at the candidate and goes to
    layer 2."""
    f.control_plane()
    f.gpu_node("b200-01", "h100", pool="b200", operands=False,
               labels={"nvidia.com/gpu.product": "NVIDIA-B200"})  # fmt: skip
    f.sick_not_advertising("b200-01")
    _only_candidate(f, "b200-01")
    _sick_pools(f, count=12)
    f.cpu_node("cpu-01")
    msg = _unschedulable(
        15,
        "1 Insufficient nvidia.com/gpu",
        CONTROL_PLANE,
        "13 node(s) didn't match Pod's node affinity/selector",
        then=PREEMPTION_MIXED.format(n=15, a=1, b=14),
    )
    pod = f.pending_pod("b200-burnin-0", "qa", msg, gpus=8, selector={"pool": "b200"})
    return _expect(
        pod,
        "L1_GPU_NODE_NOT_ADVERTISING",
        ["L1_GPU_NODE_NOT_ADVERTISING", "L1_POD_PENDING"],
        ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH"],
        walk=[1, 2, 3, 4, 5],
    )


NOISE_RECIPES: list[Recipe] = [
    noise_old_scheduler_taint_32_nodes,
    noise_selector_no_h200_20_nodes,
    noise_l40s_pool_exhausted_24_nodes,
    noise_kueue_gated_40_nodes,
    noise_mig_pending_stuck_16_nodes,
    noise_drain_cordons_pool_14_nodes,
    noise_vm_nodes_and_full_pool_10_nodes,
    noise_toleration_wrong_value_50_nodes,
    noise_affinity_memory_gt_18_nodes,
    noise_mig_failed_other_pool_sick_13_nodes,
    control_only_candidate_lost_gpu_20_nodes,
    control_only_candidate_time_sliced_16_nodes,
    control_only_candidate_not_advertising_15_nodes,
]


def main() -> None:
    write_recipes(BUNDLED_RECIPES, BUNDLED)
    write_recipes(NOISE_RECIPES, HERE)


if __name__ == "__main__":
    main()
