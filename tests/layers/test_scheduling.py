"""Layer 1 — scheduling, on scheduler messages and node status from the samples."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from bot.sources.snapshot import SnapshotCluster
from layers import scheduling
from layers.facts import objects as o
from layers.facts import placement
from layers.facts.context import PER_NODE_READS
from layers.facts.schedmsg import SchedulerReason, parse_failed_scheduling
from layers.findings import STOP, LayerResult, Severity
from layers.sources import K8sObject
from tests import fixtures
from tests.layers.builders import codes, ctx, event, forbidden, gpu_node, node, one, pod

SAMPLES = fixtures.SAMPLES

# Verbatim kube-scheduler messages, samples 01–04.
MSG_SELECTOR_INSUFFICIENT = (
    "0/6 nodes are available: 3 node(s) didn't match node selector, 6 Insufficient nvidia.com/gpu."
)
MSG_UNSCHEDULABLE = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) were unschedulable."
MSG_PREEMPTION = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
    "1 No preemption victims found for incoming pod.."
)
MSG_TAINT = (
    "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: }. preemption: 0/1 nodes are "
    "available: 1 Preemption is not helpful for scheduling.."
)


def pending(name: str = "trainer-0", gpus: int = 1, **kw: Any) -> K8sObject:
    return pod("ml", name, requests={"nvidia.com/gpu": gpus}, **kw)


def failed_scheduling(
    message: str, name: str = "trainer-0", count: int = 5, last: str = "2026-11-18T10:00:00Z"
) -> K8sObject:
    return event(
        ("ml", "Pod", name), "FailedScheduling", message, source="default-scheduler", count=count, last=last
    )


def cordoned_gpu_node(name: str) -> K8sObject:
    """A one-GPU node cordoned by kubectl: spec.unschedulable and the taint the node controller adds."""
    return gpu_node(
        name,
        1,
        unschedulable=True,
        taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}],
    )


def run(objects: list[K8sObject], **kw: Any) -> LayerResult:
    return scheduling.check(ctx(objects, **kw))


# --- the scheduler's message ------------------------------------------------------------


def test_parse_counts_reasons_and_preemption_suffix() -> None:
    f = parse_failed_scheduling(MSG_SELECTOR_INSUFFICIENT)
    assert SchedulerReason(6, "Insufficient nvidia.com/gpu") in f.reasons
    assert f.selector_mismatch and not f.unschedulable and not f.untolerated_taint

    p = parse_failed_scheduling(MSG_PREEMPTION)
    assert SchedulerReason(1, "Insufficient nvidia.com/gpu") in p.reasons
    assert "No preemption victims" in p.message
    # The preemption part is not a reason of the filter phase.
    assert [r.text for r in p.reasons] == ["Insufficient nvidia.com/gpu"]


def test_parse_taints_old_and_new_format() -> None:
    assert any("{gpu: }" in r.text for r in parse_failed_scheduling(MSG_TAINT).reasons)
    old = parse_failed_scheduling(
        "0/3 nodes are available: 1 node(s) had taint {node-role.kubernetes.io/master: }, that the pod "
        "didn't tolerate, 2 Insufficient nvidia.com/gpu."
    )
    assert old.untolerated_taint and SchedulerReason(2, "Insufficient nvidia.com/gpu") in old.reasons
    assert any("{node-role.kubernetes.io/master: }" in r.text for r in old.reasons)


def test_parse_unschedulable_and_affinity_variants_any_case() -> None:
    assert parse_failed_scheduling(MSG_UNSCHEDULABLE).unschedulable
    aff = parse_failed_scheduling(
        "0/4 nodes are available:  4 node(s) DIDN'T match Pod's node affinity/selector. preemption: x"
    )
    assert aff.selector_mismatch and [r.count for r in aff.reasons] == [4]


# --- capacity against allocatable ---------------------------------------------------------


def test_bound_pod_with_a_lost_gpu_jumps_to_layer_5() -> None:
    objs = [gpu_node("gpu-7", 8, allocatable=7), gpu_node("gpu-8", 8, allocatable=6), pending(node="gpu-7")]
    result = run(objs, pod=("ml", "trainer-0"))
    gap = one(result, "L1_ALLOCATABLE_BELOW_CAPACITY")
    assert gap.node == "gpu-7"  # only the pod's node, not gpu-8
    assert gap.evidence == ("capacity nvidia.com/gpu=8", "allocatable nvidia.com/gpu=7")
    assert any("kubectl describe node gpu-7" in c for c in gap.commands)
    assert one(result, "L1_POD_SCHEDULED").node == "gpu-7"
    assert result.status == Severity.FAULT and result.next == 5


def test_bound_pod_on_a_whole_node_goes_to_layer_2() -> None:
    result = run(
        [gpu_node("gpu-1", 8), gpu_node("gpu-2", 8, allocatable=7), pending(node="gpu-1")],
        pod=("ml", "trainer-0"),
    )
    assert codes(result) == ["L1_POD_SCHEDULED"]
    assert result.status == Severity.OK and result.next == 2


def sample_05_node() -> K8sObject:
    text = "\n".join(
        ln
        for ln in (SAMPLES / "05_node_capacity16_allocatable0.yaml").read_text().splitlines()
        if not ln.lstrip().startswith("#")
    )
    status = yaml.safe_load(text)["status"]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ocio-gpu01", "labels": {}},
        "status": status,
    }


def test_unbound_pod_sees_the_gap_on_any_gpu_node_from_sample_05() -> None:
    objs = [sample_05_node(), gpu_node("gpu-2", 4), pending()]
    result = run(objs, pod=("ml", "trainer-0"))
    gap = one(result, "L1_ALLOCATABLE_BELOW_CAPACITY")
    assert gap.node == "ocio-gpu01"
    assert "capacity nvidia.com/gpu=16" in gap.evidence and "allocatable nvidia.com/gpu=0" in gap.evidence
    assert result.next == 5


def test_node_walk_compares_only_that_node() -> None:
    objs = [gpu_node("gpu-7", 8, allocatable=7), gpu_node("gpu-8", 8, allocatable=6)]
    result = run(objs, node="gpu-8")
    assert [(f.code, f.node) for f in result.findings] == [("L1_ALLOCATABLE_BELOW_CAPACITY", "gpu-8")]
    healthy = run([gpu_node("gpu-1", 8), gpu_node("gpu-7", 8, allocatable=7)], node="gpu-1")
    assert healthy.findings == () and healthy.next == 2


def test_mig_resource_gap_is_reported_too() -> None:
    n = node(
        "a100-1",
        labels={"nvidia.com/mig.strategy": "mixed"},
        capacity={"nvidia.com/mig-1g.10gb": 7},
        allocatable={"nvidia.com/mig-1g.10gb": 6},
    )
    result = run([n, pending(node="a100-1")], pod=("ml", "trainer-0"))
    gap = one(result, "L1_ALLOCATABLE_BELOW_CAPACITY")
    assert "capacity nvidia.com/mig-1g.10gb=7" in gap.evidence


# --- the unbound pod -------------------------------------------------------------------------


def busy(node_name: str, gpus: int, name: str, phase: str = "Running") -> K8sObject:
    return pod("other", name, node=node_name, phase=phase, requests={"nvidia.com/gpu": gpus})


def test_all_gpus_taken_is_a_capacity_question_from_sample_01() -> None:
    sel = {"openshift.com/gpu-accelerator": "true"}
    objs = [
        *(node(f"cpu-{i}") for i in range(3)),
        *(gpu_node(f"gpu-{i}", 2, labels=sel) for i in range(3)),
        *(busy(f"gpu-{i}", 2, f"job-{i}") for i in range(3)),
        busy("gpu-0", 2, "finished", phase="Succeeded"),  # finished pods free their GPUs
        pending(node_selector=sel),
        failed_scheduling(MSG_SELECTOR_INSUFFICIENT),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    pend = one(result, "L1_POD_PENDING")
    assert any(MSG_SELECTOR_INSUFFICIENT in e for e in pend.evidence)
    assert "requests nvidia.com/gpu=1" in pend.evidence
    full = one(result, "L1_GPU_EXHAUSTED")
    assert full.severity == Severity.INFO
    assert "gpu-0: allocatable nvidia.com/gpu=2, requested by pods=2, free=0 < 1" in full.evidence
    # The GPU nodes match the selector: the non-GPU nodes that did not are no finding.
    assert "L1_SELECTOR_MISMATCH" not in codes(result)
    assert result.status == Severity.WARN and result.next == STOP and result.next_layer is None


def test_one_free_gpu_anywhere_is_not_exhaustion() -> None:
    objs = [
        gpu_node("gpu-0", 2),
        gpu_node("gpu-1", 2),
        busy("gpu-0", 2, "a"),
        busy("gpu-1", 1, "b"),
        pending(),
        failed_scheduling(MSG_PREEMPTION),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    assert "L1_GPU_EXHAUSTED" not in codes(result)
    assert codes(result) == ["L1_POD_PENDING"] and result.next == 2


class _Counting(SnapshotCluster):
    def __init__(self, objects: list[K8sObject], calls: list[str | None]) -> None:
        super().__init__(objects)
        self.calls = calls

    def list_pods(
        self,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[K8sObject]:
        self.calls.append(field_selector)
        return super().list_pods(namespace, label_selector, field_selector)


def test_exhaustion_reads_nodes_one_by_one_then_the_fleet_once() -> None:
    calls: list[str | None] = []

    objs: list[K8sObject] = [pending(), failed_scheduling(MSG_PREEMPTION)]
    for i in range(300):
        objs += [gpu_node(f"gpu-{i}", 1), busy(f"gpu-{i}", 1, f"job-{i}")]
    c = ctx(objs, pod=("ml", "trainer-0"))
    c.cluster = _Counting(objs, calls)
    result = scheduling.check(c)
    assert one(result, "L1_GPU_EXHAUSTED").evidence[-1] == "… and 290 more"
    # Every node full: the first 50 are read one by one, then all pods once, never 300 lists.
    per_node = [f"spec.nodeName={o.name(n)}" for n in c.gpu_nodes()[:PER_NODE_READS]]
    assert calls == [*per_node, "status.phase!=Succeeded,status.phase!=Failed"]


def test_a_node_with_room_ends_the_count_without_listing_the_fleet() -> None:
    calls: list[str | None] = []
    objs: list[K8sObject] = [pending(), failed_scheduling(MSG_PREEMPTION)]
    for i in range(300):
        objs += [gpu_node(f"gpu-{i:03d}", 1)]
        if i != 2:
            objs.append(busy(f"gpu-{i:03d}", 1, f"job-{i}"))
    c = ctx(objs, pod=("ml", "trainer-0"))
    c.cluster = _Counting(objs, calls)
    result = scheduling.check(c)
    assert "L1_GPU_EXHAUSTED" not in codes(result)
    assert calls == ["spec.nodeName=gpu-000", "spec.nodeName=gpu-001", "spec.nodeName=gpu-002"]


def test_selector_mismatch_names_the_gpu_nodes_and_the_label() -> None:
    objs = [
        gpu_node("gpu-0", 2, labels={"gpu-type": "a100"}),
        gpu_node("gpu-1", 2),
        pending(node_selector={"gpu-type": "h100"}),
        failed_scheduling(MSG_SELECTOR_INSUFFICIENT),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    f = one(result, "L1_SELECTOR_MISMATCH")
    assert "gpu-0: nodeSelector gpu-type=h100, node has gpu-type=a100" in f.evidence
    assert "gpu-1: nodeSelector gpu-type=h100, node lacks gpu-type" in f.evidence
    assert f.next == STOP and result.next == STOP


def test_required_node_affinity_is_evaluated() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": "nvidia.com/gpu.product",
                                "operator": "In",
                                "values": ["NVIDIA-A100-SXM4-80GB"],
                            }
                        ]
                    }
                ]
            }
        }
    }
    msg = "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
    result = run(
        [gpu_node("gpu-0", 8), gpu_node("gpu-1", 8), pending(affinity=affinity), failed_scheduling(msg)],
        pod=("ml", "trainer-0"),
    )
    assert "required node affinity" in one(result, "L1_SELECTOR_MISMATCH").evidence[-1]
    matching = gpu_node("gpu-2", 8, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"})
    result = run([matching, pending(affinity=affinity), failed_scheduling(msg)], pod=("ml", "trainer-0"))
    assert "L1_SELECTOR_MISMATCH" not in codes(result)


def test_untolerated_gpu_taint_from_sample_04() -> None:
    taint = {"key": "gpu", "value": "", "effect": "NoSchedule"}
    later = failed_scheduling(MSG_PREEMPTION, last="2026-11-18T10:05:00Z")
    objs = [gpu_node("gpu-0", 1, taints=[taint]), pending(), later, failed_scheduling(MSG_TAINT)]
    result = run(objs, pod=("ml", "trainer-0"))
    f = one(result, "L1_UNTOLERATED_TAINT")
    assert f.node == "gpu-0" and "gpu-0: taint gpu:NoSchedule" in f.evidence
    assert f"scheduler: {MSG_TAINT}" in f.evidence  # the message that named the taint, not the latest
    assert one(result, "L1_POD_PENDING").evidence[-1].endswith(MSG_PREEMPTION)  # events in time order
    assert f.severity == Severity.WARN and result.next == STOP

    tolerated = pending(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    result = run(
        [gpu_node("gpu-0", 1, taints=[taint]), tolerated, failed_scheduling(MSG_TAINT)],
        pod=("ml", "trainer-0"),
    )
    assert "L1_UNTOLERATED_TAINT" not in codes(result)


def test_control_plane_taint_does_not_count() -> None:
    msg = (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }."
    )
    cp = node("cp-0", taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    result = run(
        [cp, gpu_node("gpu-0", 1), busy("gpu-0", 1, "a"), pending(), failed_scheduling(msg)],
        pod=("ml", "trainer-0"),
    )
    assert "L1_UNTOLERATED_TAINT" not in codes(result)
    assert "L1_GPU_EXHAUSTED" in codes(result)


def test_cordon_taint_and_prefer_no_schedule_are_not_untolerated_taints() -> None:
    msg = (
        "0/3 nodes are available: 1 node(s) were unschedulable, 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 1 Insufficient nvidia.com/gpu."
    )
    cordoned = cordoned_gpu_node("gpu-0")
    soft = gpu_node(
        "gpu-1", 1, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "PreferNoSchedule"}]
    )
    result = run(
        [cordoned, soft, busy("gpu-1", 1, "a"), pending(), failed_scheduling(msg)], pod=("ml", "trainer-0")
    )
    assert "L1_UNTOLERATED_TAINT" not in codes(result)
    assert one(result, "L1_NODES_UNSCHEDULABLE").node == "gpu-0"


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (
            {"key": "nvidia.com/gpu", "operator": "Exists"},
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            True,
        ),
        (
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"},
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
            False,
        ),
        (
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
            False,
        ),
        ({"operator": "Exists"}, {"key": "anything", "value": "x", "effect": "NoExecute"}, True),
        ({"key": "other", "operator": "Exists"}, {"key": "nvidia.com/gpu", "effect": "NoSchedule"}, False),
    ],
)
def test_toleration_matching(toleration: dict[str, str], taint: dict[str, str], tolerated: bool) -> None:
    assert placement.tolerates([toleration], taint) is tolerated


def test_cordoned_gpu_nodes_from_sample_02() -> None:
    objs = [
        gpu_node("gpu-0", 1, unschedulable=True),
        gpu_node("gpu-1", 1),
        busy("gpu-1", 1, "a"),
        pending(),
        failed_scheduling(MSG_UNSCHEDULABLE),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    f = one(result, "L1_NODES_UNSCHEDULABLE")
    assert f.node == "gpu-0" and "gpu-0: spec.unschedulable=true" in f.evidence
    assert result.next == STOP


def test_cordoned_node_without_gpus_does_not_count() -> None:
    objs = [
        node("cpu-0", unschedulable=True),
        gpu_node("gpu-1", 1),
        busy("gpu-1", 1, "a"),
        pending(),
        failed_scheduling(MSG_UNSCHEDULABLE),
    ]
    assert "L1_NODES_UNSCHEDULABLE" not in codes(run(objs, pod=("ml", "trainer-0")))


def test_whole_gpu_requested_where_only_mig_is_advertised() -> None:
    mig = node(
        "a100-0",
        labels={"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.present": "true"},
        capacity={"nvidia.com/mig-1g.10gb": 7},
    )
    result = run([mig, pending()], pod=("ml", "trainer-0"))
    f = one(result, "L1_RESOURCE_MISMATCH")
    assert "pod requests nvidia.com/gpu=1; no node advertises it" in f.evidence
    assert "nvidia.com/mig.strategy=mixed" in f.evidence
    assert result.status == Severity.FAULT and result.next == STOP


def test_shared_gpu_requested_as_whole_gpu_and_vice_versa() -> None:
    shared = node(
        "gpu-0",
        labels={
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
            "nvidia.com/gpu.product": "NVIDIA-A10G-SHARED",
        },
        capacity={"nvidia.com/gpu.shared": 4},
    )
    assert "L1_RESOURCE_MISMATCH" in codes(run([shared, pending()], pod=("ml", "trainer-0")))
    wants_shared = pod("ml", "s", requests={"nvidia.com/gpu.shared": 1})
    assert "L1_RESOURCE_MISMATCH" in codes(run([gpu_node("gpu-1", 8), wants_shared], pod=("ml", "s")))


def test_no_node_advertises_and_labelled_gpu_node_silent() -> None:
    labelled = node(
        "gpu-new",
        labels={"feature.node.kubernetes.io/pci-10de.present": "true", "nvidia.com/gpu.present": "true"},
    )
    result = run([node("cpu-0"), labelled, pending()], pod=("ml", "trainer-0"))
    assert one(result, "L1_NO_GPU_ADVERTISED").severity == Severity.FAULT
    silent = one(result, "L1_GPU_NODE_NOT_ADVERTISING")
    assert silent.node == "gpu-new" and "feature.node.kubernetes.io/pci-10de.present=true" in silent.evidence
    assert "L1_NO_GPU_LABELS" not in codes(result)
    assert result.next == 2


def test_one_silent_gpu_node_among_advertising_ones() -> None:
    result = run(
        [gpu_node("gpu-0", 8), node("gpu-9", labels={"nvidia.com/gpu.count": "8"}), pending()],
        pod=("ml", "trainer-0"),
    )
    assert one(result, "L1_GPU_NODE_NOT_ADVERTISING").node == "gpu-9"
    assert "L1_NO_GPU_ADVERTISED" not in codes(result) and result.next == 2


def test_no_nvidia_labels_anywhere() -> None:
    result = run([node("n-0"), node("n-1"), pending()], pod=("ml", "trainer-0"))
    assert {"L1_NO_GPU_LABELS", "L1_NO_GPU_ADVERTISED"} <= set(codes(result))
    assert result.next == 2


def test_condition_message_stands_in_for_expired_events() -> None:
    cond = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": MSG_TAINT}]
    objs = [gpu_node("gpu-0", 1, taints=[{"key": "gpu", "effect": "NoSchedule"}]), pending(conditions=cond)]
    result = run(objs, pod=("ml", "trainer-0"))
    assert "L1_UNTOLERATED_TAINT" in codes(result)


# --- what could not be read ---------------------------------------------------------------


def test_nodes_forbidden_is_unknown_with_the_rbac_hint() -> None:
    objs = [gpu_node("gpu-0", 1), pending(), failed_scheduling(MSG_PREEMPTION)]
    result = run(objs, pod=("ml", "trainer-0"), fail={"list_nodes": forbidden("list", "nodes")})
    unk = one(result, "L1_UNKNOWN")
    assert "could not list nodes" in unk.summary
    assert "grant the bot's ServiceAccount 'list' on 'nodes' cluster-wide" in unk.summary
    assert "L1_POD_PENDING" in codes(result)


def test_bound_pod_with_nodes_forbidden_still_reports_scheduled() -> None:
    # A bound pod reads its own node by name (a 65,000-node list is not its business): a refused
    # GET of it is the unknown; a refused node list does not touch its walk.
    result = run(
        [gpu_node("gpu-0", 1), pending(node="gpu-0")],
        pod=("ml", "trainer-0"),
        fail={"get_node": forbidden("get", "nodes")},
    )
    assert codes(result) == ["L1_UNKNOWN", "L1_POD_SCHEDULED"]
    assert result.status == Severity.UNKNOWN and result.next == 2
    listed = run(
        [gpu_node("gpu-0", 1), pending(node="gpu-0")],
        pod=("ml", "trainer-0"),
        fail={"list_nodes": forbidden("list", "nodes")},
    )
    assert codes(listed) == ["L1_POD_SCHEDULED"]


def test_events_forbidden_is_unknown() -> None:
    result = run(
        [gpu_node("gpu-0", 1), pending()],
        pod=("ml", "trainer-0"),
        fail={"list_events": forbidden("list", "events", "ml")},
    )
    unk = one(result, "L1_UNKNOWN")
    assert "events of ml/trainer-0" in unk.summary and "'list' on 'events' in namespace ml" in unk.summary


def test_pods_forbidden_makes_exhaustion_unknown() -> None:
    objs = [gpu_node("gpu-0", 1), pending(), failed_scheduling(MSG_PREEMPTION)]
    result = run(objs, pod=("ml", "trainer-0"), fail={"list_pods": forbidden("list", "pods")})
    unk = one(result, "L1_UNKNOWN")
    assert "count the GPUs in use" in unk.summary and "'list' on 'pods'" in unk.summary
    assert "L1_GPU_EXHAUSTED" not in codes(result)


def test_fleet_wide_gaps_are_listed_not_one_finding_each() -> None:
    objs = [*(gpu_node(f"gpu-{i:02d}", 8, allocatable=7) for i in range(14)), pending()]
    result = run(objs, pod=("ml", "trainer-0"))
    gaps = [f for f in result.findings if f.code == "L1_ALLOCATABLE_BELOW_CAPACITY"]
    assert [f.node for f in gaps[:10]] == [f"gpu-{i:02d}" for i in range(10)]
    assert gaps[10].node is None and gaps[10].evidence == ("gpu-10", "gpu-11", "gpu-12", "gpu-13")
    assert result.next == 5


# --- variants from the field: other scheduler versions, event shapes, object spellings --------------

# kube-scheduler ≥ 1.27 with a control-plane node, MIG mixed strategy (gpu-operator#693 asks for
# nvidia.com/mig-1g.10gb on an A100 under `mig.config=all-1g.10gb`).
MSG_MIG_CONTROL_PLANE = (
    "0/2 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb, 1 node(s) had untolerated taint "
    "{node-role.kubernetes.io/control-plane: }. preemption: 0/2 nodes are available: 1 No preemption "
    "victims found for incoming pod, 1 Preemption is not helpful for scheduling.."
)
# kube-scheduler ≥ 1.29 no longer names the taint.
MSG_TAINTS_UNNAMED = (
    "0/3 nodes are available: 3 node(s) had untolerated taint(s). preemption: 0/3 nodes are available: "
    "3 Preemption is not helpful for scheduling."
)
MSG_PLUGIN_NODE_AFFINITY = "0/4 nodes are available: 2 node(s) didn't satisfy plugin(s) [NodeAffinity], 2 Insufficient nvidia.com/gpu."
# A pod-affinity rule and a volume conflict are not a node selector problem (devpod-provider-kubernetes#63).
MSG_POD_AFFINITY_VOLUME = (
    "0/4 nodes are available: 1 node(s) didn't match pod affinity rules, 1 node(s) had volume node "
    "affinity conflict, 2 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 2 No "
    "preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
)


def mig_node(name: str, slices: Any = "7", **labels: str) -> K8sObject:
    """An A100 under the mixed MIG strategy, its quantities written as YAML gives them (int or str)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.present": "true", **labels},
        },
        "spec": {},
        # No nodeInfo, no conditions: a trimmed paste must still be read.
        "status": {
            "capacity": {"nvidia.com/mig-1g.10gb": slices},
            "allocatable": {"nvidia.com/mig-1g.10gb": slices},
        },
    }


def mig_user(name: str, slices: Any) -> K8sObject:
    p = pod("other", name, node="a100-0", requests={"nvidia.com/mig-1g.10gb": 1})
    p["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.10gb": slices}}  # limits only
    return p


def test_mig_slices_all_taken_with_a_control_plane_taint_is_exhaustion() -> None:
    cp = node("cp-0", taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])
    wants = pod("ml", "trainer-0", requests={"nvidia.com/mig-1g.10gb": 1})
    objs = [
        cp,
        mig_node("a100-0", 7),  # int, as in a hand-written YAML
        mig_user("a", 4),
        mig_user("b", "3"),
        wants,
        failed_scheduling(MSG_MIG_CONTROL_PLANE),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    full = one(result, "L1_GPU_EXHAUSTED")
    assert full.node == "a100-0" and full.severity == Severity.INFO
    assert "a100-0: allocatable nvidia.com/mig-1g.10gb=7, requested by pods=7, free=0 < 1" in full.evidence
    assert "L1_UNTOLERATED_TAINT" not in codes(result)  # the control-plane node is no GPU node
    assert "L1_RESOURCE_MISMATCH" not in codes(result)
    assert any(MSG_MIG_CONTROL_PLANE in e for e in one(result, "L1_POD_PENDING").evidence)
    assert result.next == STOP


def test_unnamed_untolerated_taints_are_found_on_the_gpu_nodes() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    objs = [
        *(gpu_node(f"gpu-{i}", 8, taints=[taint]) for i in range(3)),
        pending(),
        failed_scheduling(MSG_TAINTS_UNNAMED),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    f = one(result, "L1_UNTOLERATED_TAINT")
    assert "taint nvidia.com/gpu=present:NoSchedule" in f.summary and f.node is None
    assert [e for e in f.evidence if e.startswith("gpu-")] == [
        f"gpu-{i}: taint nvidia.com/gpu=present:NoSchedule" for i in range(3)
    ]
    assert f"scheduler: {MSG_TAINTS_UNNAMED}" in f.evidence
    assert result.status == Severity.WARN and result.next == STOP


def test_no_execute_taint_is_untolerated_and_not_ready_taint_tolerated_by_default() -> None:
    # Every pod gets `not-ready`/`unreachable` NoExecute tolerations from the API server.
    defaults = [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    taints = [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "dedicated", "value": "training", "effect": "NoExecute"},
    ]
    msg = "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: training}."
    result = run(
        [gpu_node("gpu-0", 8, taints=taints), pending(tolerations=defaults), failed_scheduling(msg)],
        pod=("ml", "trainer-0"),
    )
    f = one(result, "L1_UNTOLERATED_TAINT")
    assert "dedicated=training:NoExecute" in f.summary and f.node == "gpu-0"


def test_node_affinity_plugin_wording_is_a_selector_mismatch() -> None:
    objs = [
        gpu_node("gpu-0", 8, labels={"nvidia.com/gpu.product": "NVIDIA-A10G"}),
        gpu_node("gpu-1", 8, labels={"nvidia.com/gpu.product": "NVIDIA-A10G"}),
        node("cpu-0"),
        node("cpu-1"),
        pending(node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        failed_scheduling(MSG_PLUGIN_NODE_AFFINITY),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    f = one(result, "L1_SELECTOR_MISMATCH")
    assert (
        "gpu-0: nodeSelector nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, node has "
        "nvidia.com/gpu.product=NVIDIA-A10G" in f.evidence
    )
    assert result.next == STOP


def test_pod_affinity_and_volume_conflicts_are_not_selector_mismatches() -> None:
    # The nodes match the pod's selector (candidates must); only pod affinity and volumes are said.
    linux = {"kubernetes.io/os": "linux"}
    objs = [
        gpu_node("gpu-0", 1, labels=linux),
        gpu_node("gpu-1", 1, labels=linux),
        busy("gpu-0", 1, "a"),
        busy("gpu-1", 1, "b"),
        pending(node_selector=linux),
        failed_scheduling(MSG_POD_AFFINITY_VOLUME),
    ]
    result = run(objs, pod=("ml", "trainer-0"))
    assert "L1_SELECTOR_MISMATCH" not in codes(result)
    assert "L1_GPU_EXHAUSTED" in codes(result)
    # Nodes that lack the label are no candidates, yet the scheduler did not say "selector": no finding.
    for n in objs[:2]:
        del n["metadata"]["labels"]["kubernetes.io/os"]
    assert "L1_SELECTOR_MISMATCH" not in codes(run(objs, pod=("ml", "trainer-0")))


def test_yaml_booleans_and_numbers_in_selectors_and_labels() -> None:
    n = gpu_node("gpu-0", 8)
    n["metadata"]["labels"] |= {"gpu-pool": True, "nvidia.com/gpu.memory": 81559}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": [40000]}
                        ]
                    }
                ]
            }
        }
    }
    wants = pending(affinity=affinity)
    wants["spec"]["nodeSelector"] = {"gpu-pool": True}
    msg = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    assert "L1_SELECTOR_MISMATCH" not in codes(
        run([n, wants, failed_scheduling(msg)], pod=("ml", "trainer-0"))
    )
    wants["spec"]["nodeSelector"] = {"gpu-pool": False}
    f = one(run([n, wants, failed_scheduling(msg)], pod=("ml", "trainer-0")), "L1_SELECTOR_MISMATCH")
    assert "gpu-0: nodeSelector gpu-pool=false, node has gpu-pool=true" in f.evidence


def test_cordon_named_as_a_taint_is_unschedulable() -> None:
    msg = (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint "
        "{node.kubernetes.io/unschedulable: }. preemption: 0/2 nodes are available: 2 Preemption is not "
        "helpful for scheduling."
    )
    cordoned = cordoned_gpu_node("gpu-0")
    objs = [cordoned, gpu_node("gpu-1", 1), busy("gpu-1", 1, "a"), pending(), failed_scheduling(msg)]
    result = run(objs, pod=("ml", "trainer-0"))
    assert one(result, "L1_NODES_UNSCHEDULABLE").node == "gpu-0"
    assert "L1_UNTOLERATED_TAINT" not in codes(result)


def events_k8s_io_style(message: str) -> K8sObject:
    """A core/v1 Event written by a new client: eventTime, series, reportingController, no count."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "trainer-0.17f1", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "trainer-0", "apiVersion": "v1"},
        "reason": "FailedScheduling",
        "message": message,
        "type": "Warning",
        "eventTime": "2026-11-18T09:00:00.000000Z",
        "series": {"count": 42, "lastObservedTime": "2026-11-18T10:30:00.000000Z"},
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-cp-0",
        "action": "Scheduling",
        "firstTimestamp": None,
        "lastTimestamp": None,
    }


def test_event_series_and_reporting_controller_are_shown_like_kubectl() -> None:
    older = failed_scheduling(MSG_PREEMPTION, last="2026-11-18T10:00:00Z")
    objs = [
        gpu_node("gpu-0", 1),
        busy("gpu-0", 1, "a"),
        pending(),
        events_k8s_io_style(MSG_TAINTS_UNNAMED),
        older,
    ]
    pend = one(run(objs, pod=("ml", "trainer-0")), "L1_POD_PENDING")
    # The series' last observation (10:30) is later than the other event (10:00): it is listed last.
    assert pend.evidence[-1] == f"Warning FailedScheduling (x42) default-scheduler: {MSG_TAINTS_UNNAMED}"
    assert "x42" in pend.evidence[-1] and MSG_PREEMPTION in pend.evidence[-2]


def test_aggregated_event_message_is_still_parsed() -> None:
    combined = "(combined from similar events): " + MSG_TAINT
    taint = {"key": "gpu", "effect": "NoSchedule"}
    result = run(
        [gpu_node("gpu-0", 1, taints=[taint]), pending(), failed_scheduling(combined, count=120)],
        pod=("ml", "trainer-0"),
    )
    assert one(result, "L1_UNTOLERATED_TAINT").node == "gpu-0"
    assert any("(x120)" in e for e in one(result, "L1_POD_PENDING").evidence)


def test_pending_pod_with_no_events_and_no_conditions() -> None:
    bare = pending()
    bare["status"] = {"phase": "Pending"}  # just created: no conditions yet
    result = run([gpu_node("gpu-0", 8), bare], pod=("ml", "trainer-0"))
    assert codes(result) == ["L1_POD_PENDING"]
    f = one(result, "L1_POD_PENDING")
    assert "no FailedScheduling event recorded (events expire)" in f.evidence
    assert f.severity == Severity.WARN and result.next == 2


def test_multiline_crlf_message_with_extra_spaces() -> None:
    msg = "0/2 nodes are available:\r\n  2   Insufficient   nvidia.com/gpu.shared .\r\n"
    f = parse_failed_scheduling(msg)
    assert f.reasons == (SchedulerReason(2, "Insufficient nvidia.com/gpu.shared"),)
    shared = node("gpu-0", capacity={"nvidia.com/gpu.shared": "4"}, labels={"nvidia.com/gpu.replicas": "4"})
    user = pod("other", "a", node="gpu-0", requests={"nvidia.com/gpu.shared": 4})
    wants = pod("ml", "trainer-0", requests={"nvidia.com/gpu.shared": 1})
    result = run([shared, user, wants, failed_scheduling(msg)], pod=("ml", "trainer-0"))
    assert (
        "gpu-0: allocatable nvidia.com/gpu.shared=4, requested by pods=4, free=0 < 1"
        in one(result, "L1_GPU_EXHAUSTED").evidence
    )


def test_ephemeral_and_init_containers_count_as_kubernetes_counts_them() -> None:
    wants = pending(gpus=1, init_containers=("fetch",))
    wants["spec"]["initContainers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    wants["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox"}]
    objs = [gpu_node("gpu-0", 2), busy("gpu-0", 1, "a"), wants, failed_scheduling(MSG_PREEMPTION)]
    pend = one(run(objs, pod=("ml", "trainer-0")), "L1_POD_PENDING")
    assert "requests nvidia.com/gpu=2" in pend.evidence  # the largest init container decides
    assert "L1_GPU_EXHAUSTED" in codes(run(objs, pod=("ml", "trainer-0")))


# --- what a person reads (black-box findings, tests/incidents/blackbox/l12) ------------------


def test_pending_summary_drops_the_preemption_suffix_and_never_cuts_a_word() -> None:
    result = run(
        [gpu_node("gpu-0", 1), pending(), failed_scheduling(MSG_PREEMPTION)], pod=("ml", "trainer-0")
    )
    f = one(result, "L1_POD_PENDING")
    assert f.summary.endswith("(0/1 nodes are available: 1 Insufficient nvidia.com/gpu)")
    assert f.evidence[-1].endswith(MSG_PREEMPTION)  # the whole message stays in the evidence
    many = "0/40 nodes are available: " + ", ".join(
        f"1 node(s) had untolerated taint {{team-{i}: }}" for i in range(9)
    )
    gist = scheduling.scheduler_gist(
        many + ". preemption: 0/40 nodes are available: 40 Preemption is not helpful.."
    )
    assert gist.endswith("…") and len(gist) <= scheduling.GIST_CHARS + 1
    # cut where a word ends (only trailing punctuation of that word dropped)
    assert many.startswith(gist[:-1]) and many[len(gist) - 1 :].lstrip(",;:").startswith(" ")


def test_affinity_miss_names_the_expression_and_the_nodes_value() -> None:
    expr = [
        {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["90000"]},
        {"key": "nvidia.com/gpu.family", "operator": "In", "values": ["hopper", "blackwell"]},
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": expr}, {"matchExpressions": expr[1:]}]
            }
        }
    }
    msg = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
    a100 = gpu_node("hgx-1", 8, labels={"nvidia.com/gpu.memory": "81920"})
    result = run([a100, pending(affinity=affinity), failed_scheduling(msg)], pod=("ml", "trainer-0"))
    assert one(result, "L1_SELECTOR_MISMATCH").evidence[-1] == (
        "hgx-1: required node affinity: nvidia.com/gpu.memory Gt 90000, node has nvidia.com/gpu.memory=81920"
        " or nvidia.com/gpu.family In hopper,blackwell, node lacks nvidia.com/gpu.family"
    )


def test_taint_tolerated_with_another_effect_is_said_and_default_tolerations_hidden() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    msg = "0/1 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}."
    tolerations = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    objs = [gpu_node("l40s-a", 4, taints=[taint]), pending(tolerations=tolerations), failed_scheduling(msg)]
    f = one(run(objs, pod=("ml", "trainer-0")), "L1_UNTOLERATED_TAINT")
    assert "(it tolerates nvidia.com/gpu only with effect NoExecute)" in f.summary
    assert "pod tolerations: nvidia.com/gpu:NoExecute (Exists)" in f.evidence
    wrong_value = pending(tolerations=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}])
    objs = [gpu_node("l40s-a", 4, taints=[taint]), wrong_value, failed_scheduling(msg)]
    f = one(run(objs, pod=("ml", "trainer-0")), "L1_UNTOLERATED_TAINT")
    assert (
        "only with value true" in f.summary
        and "pod tolerations: nvidia.com/gpu=true:NoSchedule" in f.evidence
    )
