"""The noise-fleet scenarios, written out as YAML: `python -m tests.incidents.fleets`.

Each function builds one production-shaped fleet (8-50 nodes, several GPU models and pools, sick
nodes the target pod could never use) and returns it with its expected diagnosis. The committed
YAML files are what the tests read; this script is how they were made, kept so a change to a
fleet is a reviewed change to its recipe.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.incidents.fleets import Fleet

HERE = Path(__file__).resolve().parent
BUNDLED = HERE.parents[2] / "bot" / "scenarios"

Recipe = Callable[[], tuple[Fleet, dict[str, Any]]]
GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
PREEMPTION_NOT_HELPFUL = (
    ". preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
)


def pending_missing_toleration_xid_elsewhere() -> tuple[Fleet, dict[str, Any]]:
    """The issue's own example: pending only for a missing toleration, an H100 it could never use lost a GPU."""
    f = Fleet(
        "pending-missing-toleration-xid-elsewhere",
        "Built on samples 04 (untolerated taint message, k8s-device-plugin issue 421) and 06 (Xid 79, "
        "7 of 8 GPUs): a 10-node fleet where the A100 training pool is tainted nvidia.com/gpu=present:NoSchedule "
        "and the batch job selects A100s without tolerating the taint. Elsewhere an H100 node lost a GPU to "
        "Xid 79: noise for this pod, which could never run there.",
    )
    f.control_plane()
    for i in (1, 2):
        f.cpu_node(f"cpu-{i:02d}")
    for i in range(1, 5):
        f.gpu_node(f"a100-train-{i:02d}", "a100", pool="train", taints=[GPU_TAINT])
    for i in range(1, 4):
        f.gpu_node(f"h100-infer-{i:02d}", "h100", pool="infer")
    f.sick_lost_gpu("h100-infer-02", xid=79)
    msg = (
        "0/10 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "4 node(s) had untolerated taint {nvidia.com/gpu: present}, 5 node(s) didn't match Pod's node "
        "affinity/selector" + PREEMPTION_NOT_HELPFUL.format(n=10)
    )
    f.pending_pod(
        "batch-embed-7q2xk",
        "batch",
        msg,
        gpus=4,
        selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    )
    return f, {
        "target": "batch/batch-embed-7q2xk",
        "walk": [1],
        "verdict": "L1_UNTOLERATED_TAINT",
        "codes": ["L1_POD_PENDING", "L1_UNTOLERATED_TAINT", "L1_ELSEWHERE_IN_FLEET"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_SELECTOR_MISMATCH"],
    }


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


def mig_reconfig_failed_gpu_clients_in_use() -> tuple[Fleet, dict[str, Any]]:
    f = Fleet(
        "mig-reconfig-failed-gpu-clients-in-use",
        "Built on sample 33 (MIG mixed labels of an A100) and the MIG manager's failure text (NVIDIA's MIG "
        "guide: 'In use by another client', 'all orderings failed'; gpu-operator issue 281: state 'failed'): "
        "dgx-a100-03 was relabelled nvidia.com/mig.config=all-1g.10gb while a job still held its GPUs, the "
        "reconfiguration failed and the node still advertises 8 whole GPUs. A notebook asking for "
        "nvidia.com/mig-1g.10gb stays Pending: the request is right, the MIG manager is what to fix. "
        "Elsewhere an H100 lost a GPU to Xid 79 (noise).",
    )
    f.control_plane()
    f.cpu_node("cpu-01")
    for i in (1, 2):
        f.gpu_node(f"dgx-a100-0{i}", "a100", pool="research", resource="nvidia.com/mig-3g.40gb", gpus=2,
                   labels={"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": "success",
                           "nvidia.com/mig.strategy": "mixed"})  # fmt: skip
    f.gpu_node("dgx-a100-03", "a100", pool="research", series=True,
               labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": "failed",
                       "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.deploy.mig-manager": "true"})  # fmt: skip
    f.mig_manager("dgx-a100-03", MIG_MANAGER_FAILED.replace("{node}", "dgx-a100-03"))
    for i in (1, 2, 3):
        f.gpu_node(f"h100-infer-0{i}", "h100", pool="infer")
    f.sick_lost_gpu("h100-infer-03", xid=79)
    msg = (
        "0/8 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "7 Insufficient nvidia.com/mig-1g.10gb. preemption: 0/8 nodes are available: 1 Preemption is not "
        "helpful for scheduling, 7 No preemption victims found for incoming pod."
    )
    f.pending_pod("notebook-akim-0", "research", msg, resource="nvidia.com/mig-1g.10gb")
    return f, {
        "target": "research/notebook-akim-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L1_MIG_CONFIG_FAILED",
        "codes": ["L1_POD_PENDING", "L1_MIG_CONFIG_FAILED", "L1_ELSEWHERE_IN_FLEET", "L2_OK", "L5_OK"],
        "absent": ["L1_RESOURCE_MISMATCH", "L1_ALLOCATABLE_BELOW_CAPACITY", "L5_XID", "L5_DEVICE_UNHEALTHY"],
    }


def kueue_gated_job_noisy_fleet() -> tuple[Fleet, dict[str, Any]]:
    f = Fleet(
        "kueue-gated-job-noisy-fleet",
        "Built on the API server's SchedulingGated condition ('Scheduling is blocked due to non-empty "
        "scheduling gates') and Kueue's admission gate kueue.x-k8s.io/admission, with samples 06 (Xid 79) "
        "and 29 (exporter Xid counts) for the noise: a 12-node fleet where a training job's pod waits for its "
        "ClusterQueue's quota while two H100 nodes are sick. The walk says the queue holds it and looks at no node.",
    )
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
    return f, {
        "target": "training/llm-sft-worker-0",
        "walk": [1],
        "verdict": "L1_SCHEDULING_GATED",
        "codes": ["L1_POD_PENDING", "L1_SCHEDULING_GATED"],
        "absent": ["L1_ALLOCATABLE_BELOW_CAPACITY", "L1_ELSEWHERE_IN_FLEET", "L1_GPU_EXHAUSTED"],
    }


BUNDLED_RECIPES: list[Recipe] = [
    pending_missing_toleration_xid_elsewhere,
    mig_reconfig_failed_gpu_clients_in_use,
    kueue_gated_job_noisy_fleet,
]
NOISE_RECIPES: list[Recipe] = []


def main() -> None:
    for recipe in BUNDLED_RECIPES:
        fleet, expect = recipe()
        print(fleet.write(BUNDLED, expect))
    for recipe in NOISE_RECIPES:
        fleet, expect = recipe()
        print(fleet.write(HERE, expect))


if __name__ == "__main__":
    main()
