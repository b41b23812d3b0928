"""The platform owners' incidents (autoscalers, cloud health agents and repair, a person's cordon):
recipes for build.py, on the same fleets."""

from __future__ import annotations

from tests.incidents.fleets import Fleet, mixed_pools
from tests.incidents.owners.build import (
    BOUND,
    NO_FAULTS_FROM_OWNERS,
    OWNED,
    Expect,
    _condition,
    _cordon,
    _fleet,
    _running,
    _train_pending,
)

# cluster-autoscaler's taint value: Unix seconds (2026-11-29T09:50:00Z).
CA_SINCE = "1795945800"


def cluster_autoscaler_deleting() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-cluster-autoscaler-to-be-deleted-a100-pending-22-nodes",
        "cluster-autoscaler scales the A100 pool down: it tainted an A100 node ToBeDeletedByClusterAutoscaler="
        "<Unix seconds>:NoSchedule (kubernetes/autoscaler, utils/taints) before draining and deleting it; the "
        "scheduler says `had untolerated taint {ToBeDeletedByClusterAutoscaler: …}`. The other A100s are full. "
        "The taint is the autoscaler at work, not a toleration to add.",
    )  # fmt: skip
    f.node(OWNED)["spec"]["taints"] = [{"key": "ToBeDeletedByClusterAutoscaler", "value": CA_SINCE,
                                         "effect": "NoSchedule"}]  # fmt: skip
    _train_pending(f, f"1 node(s) had untolerated taint {{ToBeDeletedByClusterAutoscaler: {CA_SINCE}}}, "
                      "5 Insufficient nvidia.com/gpu")  # fmt: skip
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_EXHAUSTED", "L1_NODE_OWNER"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def karpenter_disrupted() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-karpenter-disrupted-a100-pending-22-nodes",
        "Karpenter consolidates the A100 NodePool: it tainted an A100 node karpenter.sh/disrupted:NoSchedule "
        "(kubernetes-sigs/karpenter, pkg/apis/v1 DisruptedNoScheduleTaint) before it terminates it. The other "
        "A100s are full; a training pod waits. Not a toleration to add.",
    )  # fmt: skip
    n = f.node(OWNED)
    n["metadata"]["labels"]["karpenter.sh/nodepool"] = "gpu-train"
    n["spec"]["taints"] = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    _train_pending(
        f, "1 node(s) had untolerated taint {karpenter.sh/disrupted: }, 5 Insufficient nvidia.com/gpu"
    )
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_EXHAUSTED", "L1_NODE_OWNER"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def eks_accelerated_hardware_not_ready() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-eks-accelerated-hardware-ready-false-xid79-h100-bound-22-nodes",
        "The EKS node monitoring agent set AcceleratedHardwareReady=False with reason NvidiaXID79Error on an "
        "H100 node (EKS user guide, node health: AcceleratedHardware conditions); node auto repair acts after "
        "10 minutes. DCGM reported nothing (it cannot see Xid 79). The training pod on it hangs.",
    )  # fmt: skip
    _condition(f.node(BOUND), "AcceleratedHardwareReady", "False", "NvidiaXID79Error",
               "NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
               "2026-11-29T10:01:12Z")  # fmt: skip
    _running(f, BOUND)
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION", "L5_XID"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def gke_autopilot_xid_critical() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-gke-autopilot-xidcriticalerror-xid48-h100-bound-22-nodes",
        "On GKE Autopilot (nodes gk3-…), GKE's device plugin set XidCriticalError=True with reason "
        '{"48":true} on an H100 node (a double-bit ECC error). Autopilot re-creates a node cordoned for ~10 '
        "minutes (node auto-repair): a cordon without a must-gather first erases the evidence.",
    )  # fmt: skip
    n = f.node(BOUND)
    n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "nap-h100-80gb"
    n["metadata"]["name"] = "gk3-prod-eu-nap-h100-80gb-3b1f2c9a-x7kq"
    for obj in f.objects:
        if obj.get("kind") == "Pod" and obj["spec"].get("nodeName") == BOUND:
            obj["spec"]["nodeName"] = n["metadata"]["name"]
    _condition(n, "XidCriticalError", "True", '{"48":true}', "5c1d9f0e-7a2b-4c61-9e3d-2b8f4a6c1e07",
               "2026-11-29T09:47:51Z")  # fmt: skip
    _running(f, n["metadata"]["name"])
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION", "L5_XID"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def aks_remediator() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-aks-npd-xiderrors-remediator-taint-a100-pending-22-nodes",
        "On AKS, the node problem detector's GPU checks set XIDErrors=True on an A100 node and AKS's "
        "remediator tainted it remediator.aks.microsoft.com/unschedulable:NoSchedule while it repairs it. The "
        "other A100s are full; a training pod waits. Not a toleration to add.",
    )  # fmt: skip
    n = f.node(OWNED)
    n["spec"]["taints"] = [{"key": "remediator.aks.microsoft.com/unschedulable", "effect": "NoSchedule"}]
    _condition(n, "XIDErrors", "True", "XIDErrorsDetected", "XID 79 detected on GPU 0000:00:0A.0 (GPU has fallen "
               "off the bus)", "2026-11-29T09:44:02Z")  # fmt: skip
    _train_pending(f, "1 node(s) had untolerated taint {remediator.aks.microsoft.com/unschedulable: }, "
                      "5 Insufficient nvidia.com/gpu")  # fmt: skip
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_POD_PENDING",
        "codes": ["L1_POD_PENDING", "L1_GPU_EXHAUSTED", "L1_NODE_OWNER"],
        "absent": NO_FAULTS_FROM_OWNERS,
    }


def hyperpod_unschedulable() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-sagemaker-hyperpod-unschedulable-pending-reboot-a100-pending-22-nodes",
        "SageMaker HyperPod's health agent marked an A100 node sagemaker.amazonaws.com/node-health-status="
        "UnschedulablePendingReboot and cordoned it; the other A100s are full and a training pod waits. The "
        "cordon is HyperPod's: uncordoning it fights the repair.",
    )  # fmt: skip
    n = f.node(OWNED)
    n["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] = "UnschedulablePendingReboot"
    _cordon(n, "sagemaker-health-agent", "2026-11-29T09:40:12Z")
    _train_pending(f, "1 node(s) were unschedulable, 5 Insufficient nvidia.com/gpu")
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_NODES_UNSCHEDULABLE",
        "codes": ["L1_POD_PENDING", "L1_NODES_UNSCHEDULABLE", "L1_NODE_OWNER"],
        "absent": ["L1_UNTOLERATED_TAINT"],
    }


def person_kubectl_cordon() -> tuple[Fleet, Expect]:
    f = _fleet(
        "owners-person-kubectl-cordon-managed-fields-a100-pending-22-nodes",
        "Someone ran `kubectl cordon` on an A100 node and forgot it: no owner's marks, only managedFields "
        "naming the field manager kubectl-cordon as the writer of spec.unschedulable. The other A100s are "
        "full; a training pod waits.",
    )  # fmt: skip
    _cordon(f.node(OWNED), "kubectl-cordon", "2026-11-28T17:21:40Z")
    _train_pending(f, "1 node(s) were unschedulable, 5 Insufficient nvidia.com/gpu")
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1],
        "verdict": "L1_NODES_UNSCHEDULABLE",
        "codes": ["L1_POD_PENDING", "L1_NODES_UNSCHEDULABLE"],
        "absent": ["L1_NODE_OWNER", "L1_UNTOLERATED_TAINT"],
    }


def bundled_eks_health_agent() -> tuple[Fleet, Expect]:
    """The bundled scenario (bot/scenarios/): a small EKS fleet whose node monitoring agent saw Xid 79."""
    f = mixed_pools(
        "eks-accelerated-hardware-not-ready-xid79",
        "Built on the EKS node monitoring agent's AcceleratedHardwareReady condition as the sample (EKS user "
        "guide, node health): False with reason NvidiaXID79Error on an H100 node, which DCGM cannot report. The "
        "training pod on it hangs; EKS node auto repair acts after 10 minutes. A small fleet: two H100s, an A100, "
        "an L40S and a CPU node.",
        a100=1,
        h100=2,
        l40s=1,
        cpu=1,
    )
    _condition(f.node("h100-infer-02"), "AcceleratedHardwareReady", "False", "NvidiaXID79Error",
               "NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
               "2026-11-29T10:01:12Z")  # fmt: skip
    _running(f, "h100-infer-02")
    return f, {
        "target": "research/llama-70b-sft-0",
        "walk": [1, 2, 3, 4, 5],
        "verdict": "L5_XID",
        "codes": ["L1_POD_SCHEDULED", "L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION", "L5_XID"],
        "absent": ["L5_DEVICE_UNHEALTHY"],
    }
