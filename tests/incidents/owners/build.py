"""Incidents of nodes with another owner: `python -m tests.incidents.owners.build`.

One incident per owner of spec/findings.md, "Who else acts on a node", each on a production-shaped
fleet (A100 `train`, H100 `infer`, L40S `viz` pools beside CPU nodes and a control plane, with a lost
GPU, rising rows and an unregistered plugin elsewhere), around the owners' own marks (README.md beside
this file names the sources). Each `x-expect` follows the spec and was written before gpubot ran on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.incidents.fleets import Fleet, mixed_pools, noise_in_viz_and_infer, uuid_of, write_recipes
from tests.incidents.probe2.build import _bound_pod, _operand, _validator

HERE = Path(__file__).resolve().parent
Expect = dict[str, Any]
VAL = "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.3.2"
DRIVER = "nvcr.io/nvidia/driver:570.158.01-ubuntu22.04"
MANAGER = "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.8.0"
OWNED = "a100-train-04"  # the pending pods' owned candidate
BOUND = "h100-infer-03"  # the bound pods' node
# 22 nodes: the control plane, 2 CPU, 6 A100, 7 H100, 5 L40S. A `train` pod fits A100s only.
_PENDING = (
    "0/22 nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, "
    "{rest}, 14 node(s) didn't match Pod's node affinity/selector. "
    "preemption: 0/22 nodes are available: 22 Preemption is not helpful for scheduling."
)
NO_FAULTS_FROM_OWNERS = [
    "L1_UNTOLERATED_TAINT",
    "L2_WAITING_FOR_DRIVER",
    "L5_ALLOCATABLE_BELOW_CAPACITY",
    "L5_DEVICE_UNHEALTHY",
    "L5_REMAPPED_ROWS_RISING",
]


def _fleet(name: str, description: str) -> Fleet:
    # The owners' marks are not in tests/fixtures/samples: their own code and docs are the sample.
    description += (
        " Built on the owners as the sample: the owner's own code, docs and issue threads (owners/README.md)."
    )
    f = mixed_pools(name, description, a100=6, h100=7, l40s=5, cpu=2)
    noise_in_viz_and_infer(f)
    return f


def _train_pending(f: Fleet, owned: str, gpus: int = 8) -> dict[str, Any]:
    """The A100s other than the owned one are full; a `train` pod of 8 GPUs waits."""
    for i in range(1, 7):
        node = f"a100-train-{i:02d}"
        if node != OWNED:
            f.running_pod(f"sft-run-{i}-0", "research", node, 8)
    return f.pending_pod("llama-70b-sft-0", "research", _PENDING.format(rest=owned), gpus=gpus,
                         selector={"pool": "train"})  # fmt: skip


def _cordon(node: dict[str, Any], manager: str, when: str) -> None:
    node["spec"]["unschedulable"] = True
    node["spec"].setdefault("taints", []).append(
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": when}
    )
    node["metadata"]["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-29T10:11:23Z",
         "fieldsType": "FieldsV1", "subresource": "status",
         "fieldsV1": {"f:status": {"f:conditions": {}}}},
        {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": when,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:unschedulable": {}}}},
    ]  # fmt: skip


def _running(f: Fleet, node: str, name: str = "llama-70b-sft-0") -> dict[str, Any]:
    return _bound_pod(f, name, "research", node, "nvcr.io/nvidia/pytorch:25.01-py3",
                      {"state": {"running": {"startedAt": "2026-11-29T09:00:05Z"}}}, gpus=8)  # fmt: skip


def _condition(node: dict[str, Any], ctype: str, status: str, reason: str, message: str, since: str) -> None:
    node["status"]["conditions"].append(
        {"type": ctype, "status": status, "reason": reason, "message": message,
         "lastHeartbeatTime": "2026-11-29T10:11:00Z", "lastTransitionTime": since}
    )  # fmt: skip


def _syslog_xid79(gpu: int = 3) -> str:
    uuid = uuid_of(BOUND, gpu)
    return (
        f"ErrorCode:79 PCI:0000:9b:00 GPU_UUID:{uuid} kernel:[ 8214.518411] NVRM: Xid (PCI:0000:9b:00): 79, "
        "pid='<unknown>', name=<unknown>, GPU has fallen off the bus. Recommended Action=RESTART_BM;"
    )


# --- NVSentinel ----------------------------------------------------------------------------------


def _nvsentinel(node: dict[str, Any], state: str, reason: str) -> None:
    node["metadata"]["labels"].update({
        "dgxc.nvidia.com/nvsentinel-state": state,
        "k8saas.nvidia.com/cordon-by": "NVSentinel",
        "k8saas.nvidia.com/cordon-reason": reason,
        "k8saas.nvidia.com/cordon-timestamp": "2026-11-29T09-58-14Z",
    })  # fmt: skip
    node["metadata"]["annotations"] = {
        "quarantineHealthEvent": '[{"agent":"syslog-health-monitor","checkName":"SysLogsXIDError",'
        '"componentClass":"GPU","isFatal":true,"errorCode":["79"],"recommendedAction":"RESTART_BM"}]',
        "quarantineHealthEventIsCordoned": "True",
    }
    _cordon(node, "fault-quarantine", "2026-11-29T09:58:14Z")


def nvsentinel_quarantined_xid79() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-nvsentinel-quarantined-syslog-xid79-h100-bound-22-nodes",
        "NVSentinel's syslog health monitor saw Xid 79 on an H100 node: its platform connector set "
        "SysLogsXIDError=True (reason SysLogsXIDErrorIsNotHealthy, message `ErrorCode:79 PCI:… GPU_UUID:… "
        "Recommended Action=RESTART_BM;`) and fault-quarantine cordoned it (state label quarantined, "
        "k8saas.nvidia.com/cordon-by=NVSentinel). DCGM never reported the Xid. The training pod on it hangs.",
    )  # fmt: skip
    _nvsentinel(f.node(BOUND), "quarantined", "Syslog-fatal-error-ruleset")
    _condition(f.node(BOUND), "SysLogsXIDError", "True", "SysLogsXIDErrorIsNotHealthy", _syslog_xid79(),
               "2026-11-29T09:58:10Z")  # fmt: skip
    _running(f, BOUND)
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION", "L5_XID"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def nvsentinel_drain_failed_contact_support() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-nvsentinel-drain-failed-gpumemwatch-contact-support-h100-22-nodes",
        "NVSentinel's GPU health monitor reported a DCGM memory failure (GpuMemWatch=True, message `ErrorCode:"
        "DCGM_FR_FAULTY_MEMORY … Recommended Action=CONTACT_SUPPORT;`); fault-quarantine cordoned the node and "
        "the node drainer gave up on a pod held by its PodDisruptionBudget (state drain-failed): no automation "
        "acts any further and nobody is told (NVSentinel issue 1702).",
    )  # fmt: skip
    _nvsentinel(f.node(BOUND), "drain-failed", "GPU-fatal-error-ruleset")
    _condition(f.node(BOUND), "GpuMemWatch", "True", "GpuMemWatchIsNotHealthy",
               f"ErrorCode:DCGM_FR_FAULTY_MEMORY GPU_ID:2 GPU_UUID:{uuid_of(BOUND, 2)} Faulty memory detected on "
               "GPU 2 Recommended Action=CONTACT_SUPPORT;", "2026-11-29T09:31:40Z")  # fmt: skip
    _running(f, BOUND, "vllm-llama-3-70b-0")
    return f, {
        "target": "research/vllm-llama-3-70b-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_HEALTH_AGENT_CONDITION",
        "codes": ["L1_POD_SCHEDULED", "L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


# --- the GPU Operator ----------------------------------------------------------------------------


def _driver_pod(f: Fleet, node: str, *, ready: bool, eviction: str | None = None) -> None:
    env = [{"name": "ENABLE_GPU_POD_EVICTION", "value": eviction}] if eviction is not None else []
    failing = None if ready else {"nvidia-driver-ctr": {"state": {"waiting": {"reason": "PodInitializing"}}}}
    pod = _operand(f, f"nvidia-driver-daemonset-{node[-2:]}x7q", node, {"app": "nvidia-driver-daemonset"},
                   [("nvidia-driver-ctr", DRIVER)], [("k8s-driver-manager", MANAGER)], failing=failing)  # fmt: skip
    pod["spec"]["initContainers"][0]["env"] = [{"name": "NODE_NAME", "value": node}, *env]


def upgrade_drain_required() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-driver-upgrade-drain-required-a100-pending-22-nodes",
        "A GPU Operator v25.3.2 rolling driver upgrade (k8s-operator-libs upgrade controller) holds an A100 "
        "node in drain-required: label nvidia.com/gpu-driver-upgrade-state=drain-required, annotation "
        "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable, cordoned by the operator, its GPUs "
        "not allocatable while the driver is swapped, the validator back in driver-validation and the "
        "toolkit waiting for the driver. The other A100s are full; a training pod waits.",
    )  # fmt: skip
    n = f.node(OWNED)
    n["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] = "drain-required"
    n["metadata"]["annotations"] = {"nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable": "false"}
    n["status"]["allocatable"]["nvidia.com/gpu"] = "0"
    _cordon(n, "gpu-operator", "2026-11-29T09:52:30Z")
    f.event_for_node(OWNED, "GPUDriverUpgrade", "Successfully updated node state label to drain-required",
                     "2026-11-29T09:52:31Z", "gpu-operator")  # fmt: skip
    _driver_pod(f, OWNED, ready=False)
    _validator(f, OWNED, "v25.3.2", "driver-validation", "up4kd")
    _operand(f, f"nvidia-container-toolkit-daemonset-{OWNED[-2:]}k2", OWNED,
             {"app": "nvidia-container-toolkit-daemonset"},
             [("nvidia-container-toolkit-ctr", "nvcr.io/nvidia/k8s/container-toolkit:v1.17.8-ubuntu20.04")],
             [("driver-validation", VAL)],
             failing={"driver-validation": {"state": {"running": {"startedAt": "2026-11-29T09:53:02Z"}}}})  # fmt: skip
    _train_pending(f, "1 node(s) were unschedulable, 5 Insufficient nvidia.com/gpu")
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_NODES_UNSCHEDULABLE",
        "codes": [
            "L1_POD_PENDING",
            "L1_ALLOCATABLE_BELOW_CAPACITY",
            "L1_NODES_UNSCHEDULABLE",
            "L1_NODE_OWNER",
        ],
        "all_codes": ["L2_VALIDATOR_STUCK", "L5_ALLOCATABLE_BELOW_CAPACITY"],
        "absent": ["L1_UNTOLERATED_TAINT", "L5_XID"],
    }


def _paused(n: dict[str, Any], value: str) -> None:
    for operand in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "operator-validator"):
        n["metadata"]["labels"][f"nvidia.com/gpu.deploy.{operand}"] = value
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu", None)


def driver_manager_paused() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-driver-manager-paused-for-driver-upgrade-a100-pending-22-nodes",
        "The driver pod restarted on an A100 node and its k8s-driver-manager init container evicts the GPU "
        "operands before reloading the driver: it labels them nvidia.com/gpu.deploy.<operand>="
        "paused-for-driver-upgrade, so the device plugin is gone and the node advertises no GPU for a while "
        "(NVIDIA/k8s-driver-manager cmd/driver-manager). The other A100s are full; a training pod waits.",
    )  # fmt: skip
    _paused(f.node(OWNED), "paused-for-driver-upgrade")
    _driver_pod(f, OWNED, ready=False, eviction="true")
    _train_pending(f, "6 Insufficient nvidia.com/gpu")
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L1_GPU_EXHAUSTED", "L1_NODE_OWNER"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def mig_manager_pending() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-mig-manager-paused-for-mig-change-a100-pending-22-nodes",
        "An operator set nvidia.com/mig.config=all-3g.40gb on an A100 node: the MIG manager pauses the GPU "
        "operands (nvidia.com/gpu.deploy.<operand>=paused-for-mig-change), sets nvidia.com/mig.config.state="
        "pending while it repartitions, and the node advertises no GPU until the device plugin returns. The "
        "other A100s are full; a training pod waits.",
    )  # fmt: skip
    n = f.node(OWNED)
    _paused(n, "paused-for-mig-change")
    n["metadata"]["labels"].update(
        {"nvidia.com/mig.config": "all-3g.40gb", "nvidia.com/mig.config.state": "pending"}
    )
    _train_pending(f, "6 Insufficient nvidia.com/gpu")
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_NODE_NOT_ADVERTISING", "L1_GPU_EXHAUSTED", "L1_NODE_OWNER"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def main() -> None:
    from tests.incidents.owners import platforms  # the platform owners' recipes build on these helpers

    write_recipes(
        [
            nvsentinel_quarantined_xid79,
            nvsentinel_drain_failed_contact_support,
            upgrade_drain_required,
            driver_manager_paused,
            mig_manager_pending,
            platforms.cluster_autoscaler_deleting,
            platforms.karpenter_disrupted,
            platforms.eks_accelerated_hardware_not_ready,
            platforms.gke_autopilot_xid_critical,
            platforms.aks_remediator,
            platforms.hyperpod_unschedulable,
            platforms.person_kubectl_cordon,
        ],
        HERE,
    )
    write_recipes([platforms.bundled_eks_health_agent], HERE.parents[2] / "bot" / "scenarios")


if __name__ == "__main__":
    main()
