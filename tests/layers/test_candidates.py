"""Candidate nodes (spec/findings.md, Terms): which GPU nodes an unbound pod could run on."""

from __future__ import annotations

from typing import Any

from layers import scheduling
from layers.facts import candidates as c
from layers.findings import LayerResult, Severity
from layers.sources import K8sObject, NoTelemetry
from tests.layers.builders import NOW, codes, ctx, event, gpu_node, node, pod

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def pending(**kw: Any) -> K8sObject:
    kw.setdefault("requests", {"nvidia.com/gpu": 1})
    return pod("ml", "trainer-0", **kw)


def names(p: K8sObject, nodes: list[K8sObject]) -> list[str]:
    return c.candidate_nodes(p, nodes, c.carries_requested(p)).ordered_names()


def test_selector_affinity_and_taints_remove_candidates() -> None:
    nodes = [
        gpu_node("a100-1", labels={"pool": "train"}),
        gpu_node("a100-2", labels={"pool": "train"}, taints=[GPU_TAINT]),
        gpu_node("h100-1", labels={"pool": "infer"}),
        node("cpu-1"),
    ]
    got = c.candidate_nodes(pending(node_selector={"pool": "train"}), nodes, c.carries_requested(pending()))
    assert got.ordered_names() == ["a100-1"]
    assert got.excluded["a100-2"] == "untolerated taint nvidia.com/gpu=present:NoSchedule"
    assert "nodeSelector pool=train, node has pool=infer" in got.excluded["h100-1"]
    assert "cpu-1" not in got.excluded  # not a GPU node at all
    tolerant = pending(
        node_selector={"pool": "train"}, tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}]
    )
    assert names(tolerant, nodes) == ["a100-1", "a100-2"]


def test_required_affinity_is_a_selector_too() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["50000"]}
                        ]
                    }
                ]
            }
        }
    }
    nodes = [
        gpu_node("big", labels={"nvidia.com/gpu.memory": "81920"}),
        gpu_node("small", labels={"nvidia.com/gpu.memory": "23034"}),
    ]
    assert names(pending(affinity=affinity), nodes) == ["big"]


def test_cordons_and_allocation_do_not_remove_candidates() -> None:
    nodes = [gpu_node("cordoned", unschedulable=True, taints=[CORDON]), gpu_node("full", allocatable=0)]
    assert names(pending(), nodes) == ["cordoned", "full"]


def test_nodes_not_meant_for_pods_are_never_candidates() -> None:
    nodes = [
        gpu_node("kubevirt-1", labels={"nvidia.com/gpu.workload.config": "vm-passthrough"}),
        gpu_node("vgpu-1", labels={"nvidia.com/gpu.workload.config": "vm-vgpu"}),
        gpu_node("off-1", labels={"nvidia.com/gpu.deploy.operands": "false"}),
        gpu_node("container-1", labels={"nvidia.com/gpu.workload.config": "container"}),
    ]
    got = c.candidate_nodes(pending(), nodes, c.carries_requested(pending()))
    assert got.ordered_names() == ["container-1"]
    assert got.excluded["kubevirt-1"] == "not meant for pods (nvidia.com/gpu.workload.config=vm-passthrough)"
    assert got.excluded["off-1"] == "not meant for pods (nvidia.com/gpu.deploy.operands=false)"


def test_yaml_booleans_in_labels_read_as_the_api_stores_them() -> None:
    off = gpu_node("off-1")
    off["metadata"]["labels"]["nvidia.com/gpu.deploy.operands"] = False  # an unquoted YAML false
    assert names(pending(), [off]) == []


def test_a_node_advertising_by_labels_only_is_a_candidate() -> None:
    silent = node("new-1", labels={"nvidia.com/gpu.present": "true", "nvidia.com/gpu.count": "8"})
    other = node("l4-1", labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/gpu.shared": 4})
    assert names(pending(), [silent, other]) == ["new-1"]


def test_mig_request_counts_nodes_whose_layout_names_the_profile() -> None:
    mig = {"nvidia.com/mig-1g.10gb": 1}
    asked = gpu_node("a100-asked", labels={"nvidia.com/mig.config": "all-1g.10gb"})  # still whole GPUs
    done = node(
        "a100-done", labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/mig-1g.10gb": 7}
    )
    other = gpu_node("a100-other", labels={"nvidia.com/mig.config": "all-1g.20gb"})
    balanced = gpu_node("a100-bal", labels={"nvidia.com/mig.config": "all-balanced"})
    assert names(pending(requests=mig), [asked, done, other, balanced]) == ["a100-asked", "a100-done"]
    assert not c.mig_layout_offers(asked, "nvidia.com/gpu")


def test_a_pod_requesting_no_gpu_is_carried_by_every_gpu_node() -> None:
    assert names(pending(requests={}), [gpu_node("g1"), node("cpu-1")]) == ["g1"]


def test_candidates_are_computed_once_per_walk() -> None:
    nodes = [gpu_node("g1"), gpu_node("g2", taints=[GPU_TAINT])]
    w = ctx([*nodes, pending()], pod=("ml", "trainer-0"))
    first = w.candidates()
    assert first is w.candidates() and first.ordered_names() == ["g1"]
    assert w.examined_nodes() == ["g1"]


def test_bound_pod_and_node_walk_have_no_candidates() -> None:
    bound = pod("ml", "trainer-0", node="g1", requests={"nvidia.com/gpu": 1})
    w = ctx([gpu_node("g1"), gpu_node("g2", allocatable=7), bound], pod=("ml", "trainer-0"))
    assert w.candidates().nodes == () and w.examined_nodes() == ["g1"]


def test_a_lost_gpu_on_a_non_candidate_is_one_info_line() -> None:
    nodes = [
        gpu_node("a100-1", labels={"pool": "train"}, taints=[GPU_TAINT]),
        gpu_node("h100-1", labels={"pool": "infer"}, allocatable=7),
        node("new-2", labels={"nvidia.com/gpu.present": "true", "pool": "infer"}),
        gpu_node("kv-1", labels={"nvidia.com/gpu.workload.config": "vm-passthrough"}, allocatable=0),
    ]
    p = pending(node_selector={"pool": "train"})
    msg = "0/4 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 3 node(s) didn't match Pod's node affinity/selector."
    w = ctx([*nodes, p, _failed(msg)], pod=("ml", "trainer-0"))
    result = scheduling.check(w)
    assert "L1_ALLOCATABLE_BELOW_CAPACITY" not in codes(result)
    assert "L1_GPU_NODE_NOT_ADVERTISING" not in codes(result)
    assert result.next == "stop"
    [noise] = [f for f in result.findings if f.code == "L1_ELSEWHERE_IN_FLEET"]
    assert noise.severity == Severity.INFO and noise.next is None and noise.node is None
    shown = " ".join(noise.evidence)
    assert (
        "h100-1: nvidia.com/gpu capacity 8, allocatable 7" in shown
        and "new-2: advertises no GPU resource" in shown
    )
    assert "kv-1" not in shown  # a passthrough node advertises nothing to pods by design
    assert all(f.node not in ("h100-1", "new-2") for f in result.findings if f.severity >= Severity.WARN)


def test_the_sick_candidate_still_decides() -> None:
    nodes = [
        gpu_node("a100-1", labels={"pool": "train"}, allocatable=7),
        gpu_node("h100-1", labels={"pool": "infer"}, allocatable=6),
    ]
    p = pending(requests={"nvidia.com/gpu": 8}, node_selector={"pool": "train"})
    w = ctx([*nodes, p], pod=("ml", "trainer-0"))
    result = scheduling.check(w)
    [gap] = [f for f in result.findings if f.code == "L1_ALLOCATABLE_BELOW_CAPACITY"]
    assert gap.node == "a100-1" and result.next == 5
    assert w.examined_nodes() == ["a100-1"]


def test_selected_nodes_all_tainted_is_the_taint_not_the_selector() -> None:
    nodes = [
        gpu_node("a100-1", labels={"pool": "train"}, taints=[GPU_TAINT]),
        gpu_node("h100-1", labels={"pool": "infer"}),
    ]
    msg = "0/2 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, 1 node(s) didn't match Pod's node affinity/selector."
    p = pending(node_selector={"pool": "train"})
    w = ctx([*nodes, p, _failed(msg)], pod=("ml", "trainer-0"))
    found = codes(scheduling.check(w))
    assert "L1_UNTOLERATED_TAINT" in found and "L1_SELECTOR_MISMATCH" not in found


def test_with_candidates_left_a_selector_elsewhere_is_not_the_cause() -> None:
    nodes = [
        gpu_node("a100-1", labels={"pool": "train"}, allocatable=8),
        gpu_node("h100-1", labels={"pool": "infer"}),
    ]
    busy = pod("ml", "other-0", node="a100-1", requests={"nvidia.com/gpu": 8})
    msg = "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector."
    p = pending(node_selector={"pool": "train"})
    w = ctx([*nodes, p, busy, _failed(msg)], pod=("ml", "trainer-0"))
    found = codes(scheduling.check(w))
    assert "L1_GPU_EXHAUSTED" in found and "L1_SELECTOR_MISMATCH" not in found


def _failed(message: str) -> K8sObject:
    return event(("ml", "Pod", "trainer-0"), "FailedScheduling", message, source="default-scheduler")


# --- L1_MIG_CONFIG_FAILED and L1_SCHEDULING_GATED ------------------------------------------

MIG_LOG_PENDING = """\
time="2026-11-18T09:20:11Z" level=info msg="Waiting for change to 'nvidia.com/mig.config' label"
time="2026-11-18T09:31:42Z" level=info msg="Updating to MIG config: all-1g.10gb"
Getting current value of the 'nvidia.com/mig.config.state' node label
Current value of 'nvidia.com/mig.config.state=success'
time="2026-11-18T09:31:43Z" level=fatal msg="Assertion failure: selected configuration not currently applied"
Changing the 'nvidia.com/mig.config.state' node label to 'pending'
Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels
Waiting for the device-plugin to shutdown
"""


def _mig_walk(state: str, log: str | None = None, now: float = NOW) -> LayerResult:
    from tests.layers.builders import logs_for, operand

    a100 = gpu_node(
        "dgx-a100-03", labels={"nvidia.com/mig.config": "all-1g.10gb", "nvidia.com/mig.config.state": state}
    )
    other = node(
        "dgx-a100-01", labels={"nvidia.com/gpu.present": "true"}, capacity={"nvidia.com/mig-3g.40gb": 2}
    )
    p = pending(requests={"nvidia.com/mig-1g.10gb": 1})
    objs: list[K8sObject] = [a100, other, p]
    logs: dict[str, str] = {}
    if log is not None:
        mgr = operand("nvidia-mig-manager", "dgx-a100-03")
        objs.append(mgr)
        logs = logs_for(mgr, "nvidia-mig-manager", log)
    return scheduling.check(ctx(objs, logs=logs, pod=("ml", "trainer-0"), telemetry=NoTelemetry(now)))


def test_a_failed_mig_reconfiguration_outranks_the_resource_mismatch() -> None:
    result = _mig_walk("failed")
    found = codes(result)
    assert "L1_MIG_CONFIG_FAILED" in found and "L1_RESOURCE_MISMATCH" not in found
    assert result.next == 2
    [f] = [f for f in result.findings if f.code == "L1_MIG_CONFIG_FAILED"]
    assert f.node == "dgx-a100-03" and "nvidia.com/gpu=8" in f.summary and "request is right" in f.summary


def test_pending_over_fifteen_minutes_by_the_manager_log_is_a_failure() -> None:
    from datetime import UTC, datetime

    t = datetime(2026, 11, 18, 9, 31, 42, tzinfo=UTC).timestamp()
    assert "L1_MIG_CONFIG_FAILED" not in codes(_mig_walk("pending", MIG_LOG_PENDING, now=t + 10 * 60))
    late = _mig_walk("pending", MIG_LOG_PENDING, now=t + 20 * 60)
    [f] = [f for f in late.findings if f.code == "L1_MIG_CONFIG_FAILED"]
    assert "pending for 20 min" in f.summary
    assert not any("Assertion failure" in e for e in f.evidence)  # routine step, not the error


def test_pending_without_any_clock_is_not_called_stuck() -> None:
    result = _mig_walk("pending")
    assert "L1_MIG_CONFIG_FAILED" not in codes(result) and "L1_RESOURCE_MISMATCH" in codes(result)


def test_pending_by_node_events() -> None:
    from layers.facts import migstate

    def changed_to(state: str, last: str) -> K8sObject:
        message = f"nvidia.com/mig.config.state changed to {state}"
        return event((None, "Node", "dgx-a100-03"), "MigConfigChanged", message, type="Normal", last=last)

    ev = changed_to("pending", "2026-11-18T09:00:00Z")
    assert migstate.pending_since_events([ev]) is not None
    done = changed_to("success", "2026-11-18T09:05:00Z")
    assert migstate.pending_since_events([ev, done]) is None


def test_a_gated_pod_is_held_by_its_queue_and_no_node_is_examined() -> None:
    p = pending()
    p["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    nodes = [gpu_node("h100-1", allocatable=7), node("new-1", labels={"nvidia.com/gpu.present": "true"})]
    w = ctx([*nodes, p], pod=("ml", "trainer-0"))
    result = scheduling.check(w)
    assert set(codes(result)) == {"L1_POD_PENDING", "L1_SCHEDULING_GATED"}
    assert result.next == "stop" and w.examined_nodes() == []
    [f] = [f for f in result.findings if f.code == "L1_SCHEDULING_GATED"]
    assert "spec.schedulingGates: kueue.x-k8s.io/admission" in f.evidence and f.severity == Severity.WARN


def test_a_node_that_advertises_nothing_carries_a_mig_profile_only_by_its_labels() -> None:
    def unregistered(name: str, **labels: str) -> K8sObject:
        return node(name, labels={"nvidia.com/gpu.present": "true", **labels})

    nodes = [
        unregistered("l40s-1", **{"nvidia.com/gpu.product": "NVIDIA-L40S"}),
        unregistered(
            "a100-mixed", **{"nvidia.com/mig.strategy": "mixed", "nvidia.com/mig-2g.20gb.count": "3"}
        ),
        unregistered("a100-layout", **{"nvidia.com/mig.config": "all-2g.20gb"}),
        unregistered(
            "a100-other", **{"nvidia.com/mig-1g.10gb.count": "7", "nvidia.com/mig-2g.20gb.count": "0"}
        ),
    ]
    assert names(pending(requests={"nvidia.com/mig-2g.20gb": 1}), nodes) == ["a100-mixed", "a100-layout"]
    # The whole-GPU resource is carried by every GPU node by its labels, as before.
    assert sorted(names(pending(), nodes)) == sorted(o["metadata"]["name"] for o in nodes)
