"""Candidate nodes of a pod that is not bound (spec/findings.md, Terms: candidate nodes).

The GPU nodes that could run the pod if they were healthy and empty: meant to
serve GPUs to pods, carrying the GPU resource it requests, matching its node
selector and required node affinity, with no NoSchedule/NoExecute taint it does
not tolerate. Cordons and current allocation do not remove a node: layer 1
reports those. Every layer that picks nodes for an unbound pod picks among
these (through `WalkContext.candidates()`, computed once per walk); a fault on
any other node is noise elsewhere in the fleet, never the pod's answer.

How DRA plugs in: `candidate_nodes` knows nothing of extended resources. It
takes two predicates, `carries` ("this node carries what the pod requests")
and `gpu_node` ("this node is a GPU node at all"). `carries_requested(pod)`
is the extended-resource form (capacity, labels of a node whose plugin never
registered, MIG layouts). A pod that uses DRA GPUs passes instead a predicate
over the node's ResourceSlices ("publishes devices of the requested class, or
publishes none and is labelled a GPU node") and a `gpu_node` that also accepts
nodes with slices of driver gpu.nvidia.com; the not-for-pods, selector,
affinity and taint rules below stay the same for both. The choice between the
two is made in one place, `WalkContext.candidates()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property

import msgspec

from layers.facts import objects as o
from layers.facts.placement import (
    BLOCKING_EFFECTS,
    CORDON_TAINT,
    label_value,
    selector_misses,
    taint_text,
    tolerates,
)
from layers.facts.volumes import NONE as NO_VOLUMES
from layers.facts.volumes import PodVolumes
from layers.sources import K8sObject

NodeTest = Callable[[K8sObject], bool]

# nvidia.com/gpu.workload.config values under which a node hands its GPUs to VMs (KubeVirt), not pods.
VM_WORKLOADS = ("vm-passthrough", "vm-vgpu")


def not_for_pods(node: K8sObject) -> str | None:
    """Why a GPU node is not meant to advertise GPUs to pods (the label that says so), or None."""
    lab = o.labels(node)
    if label_value(lab.get("nvidia.com/gpu.deploy.operands")) == "false":
        return "nvidia.com/gpu.deploy.operands=false"
    workload = label_value(lab.get("nvidia.com/gpu.workload.config"))
    if workload in VM_WORKLOADS:
        return f"nvidia.com/gpu.workload.config={workload}"
    return None


def mig_layout_offers(node: K8sObject, resource: str) -> bool:
    """The node's `nvidia.com/mig.config` names a layout of this MIG profile (`all-1g.10gb` for
    `nvidia.com/mig-1g.10gb`): the MIG manager is (or was) asked to create it."""
    if not resource.startswith(o.MIG_PREFIX):
        return False
    profile = resource.removeprefix(o.MIG_PREFIX)
    layout = label_value(o.labels(node).get("nvidia.com/mig.config")) or ""
    return re.search(rf"(?:^|[-_.,]){re.escape(profile)}(?:$|[-_.,])", layout) is not None


def mig_labels_offer(node: K8sObject, resource: str) -> bool:
    """A node whose device plugin never registered offers this MIG profile by its labels."""
    count = label_value(o.labels(node).get(f"{resource}.count")) or ""
    return (count.isdigit() and int(count) > 0) or mig_layout_offers(node, resource)


def carries_requested(pod: K8sObject) -> NodeTest:
    """The extended-resource form of "carries the GPU resource the pod requests": each requested
    resource is in the node's capacity (above 0) or named by its MIG layout; a node that advertises
    no GPU resource at all carries it by its labels (its device plugin never registered: any GPU
    node for `nvidia.com/gpu`, a MIG profile only where the labels offer it). A pod that
    requests no GPU resource is carried by every GPU node."""
    requests = o.pod_requests(pod)

    def carries(node: K8sObject) -> bool:
        offered = o.advertised(node)
        if not offered:
            # By its labels: any GPU node carries `nvidia.com/gpu`, but a MIG profile only a node
            # whose labels offer it (GFD's mixed-strategy `nvidia.com/mig-<P>.count`, or a
            # `nvidia.com/mig.config` layout of it); an unregistered L40S is no MIG candidate.
            return all(not r.startswith(o.MIG_PREFIX) or mig_labels_offer(node, r) for r in requests)
        return all(r in offered or mig_layout_offers(node, r) for r in requests)

    return carries


def untolerated_taints(pod: K8sObject, node: K8sObject) -> list[str]:
    """The node's NoSchedule/NoExecute taints the pod does not tolerate; the cordon's taint is not
    one (a cordon does not remove a candidate)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    return [
        taint_text(t)
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in BLOCKING_EFFECTS
        and t.get("key") != CORDON_TAINT
        and not tolerates(tolerations, t)
    ]


class Candidates(msgspec.Struct, frozen=True, dict=True):  # dict: for its cached_property
    """The pod's candidate nodes, and why every other GPU node is not one."""

    nodes: tuple[K8sObject, ...]
    # GPU nodes meant for pods that carry the requested resource, before selector and taints:
    # what the scheduler's selector and taint reasons are checked against.
    carrying: tuple[K8sObject, ...]
    excluded: Mapping[str, str] = msgspec.field(default_factory=dict)  # GPU node -> why it is not a candidate
    # GPU nodes the pod's pinned volumes rule out, whatever else rules them out: the scheduler's taint
    # or selector reasons on such a node cannot be why the pod is pending (the volume is).
    off_volumes: frozenset[str] = frozenset()

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(o.name(n) for n in self.nodes)

    def __contains__(self, node: object) -> bool:
        return node in self.names

    def ordered_names(self) -> list[str]:
        return [o.name(n) for n in self.nodes]


def candidate_nodes(
    pod: K8sObject,
    nodes: Iterable[K8sObject],
    carries: NodeTest,
    gpu_node: NodeTest = o.is_gpu_node,
    volumes: PodVolumes = NO_VOLUMES,
) -> Candidates:
    """Sort the GPU nodes into the pod's candidates and the rest (with the reason), in node order.
    `volumes`: the pod's bound PersistentVolumes; a node that fails one's node affinity is no candidate."""
    chosen: list[K8sObject] = []
    carrying: list[K8sObject] = []
    excluded: dict[str, str] = {}
    off_volumes: set[str] = set()
    for node in nodes:
        if not gpu_node(node):
            continue
        name = o.name(node)
        why = not_for_pods(node)
        if why:
            excluded[name] = f"not meant for pods ({why})"
            continue
        if not carries(node):
            excluded[name] = "does not carry the requested GPU resource"
            continue
        carrying.append(node)
        if volumes.misses(node):
            off_volumes.add(name)
        misses = selector_misses(pod, node)
        if misses:
            excluded[name] = "; ".join(misses)
            continue
        taints = untolerated_taints(pod, node)
        if taints:
            excluded[name] = "untolerated taint " + ", ".join(taints)
            continue
        pinned = volumes.misses(node)
        if pinned:
            excluded[name] = "; ".join(pinned)
            continue
        chosen.append(node)
    return Candidates(
        nodes=tuple(chosen), carrying=tuple(carrying), excluded=excluded, off_volumes=frozenset(off_volumes)
    )


def pointed_at(candidates: Sequence[K8sObject], sick: NodeTest) -> list[str]:
    """Examined nodes of an unbound pod: the candidates layer 1 points at, else every candidate."""
    pointed = [o.name(n) for n in candidates if sick(n)]
    return pointed or [o.name(n) for n in candidates]
