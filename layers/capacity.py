"""Layer 1's capacity checks: capacity against allocatable (GPUs marked unhealthy), and GPUs free.

A gap means the device plugin marked devices unhealthy, which sends the walk to layer 5; on a
time-sliced node the numbers count replicas and the summary says GPUs. "Exhausted" is allocatable
minus what running pods request, on every candidate node that advertises the request.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence

from layers.facts import objects as o
from layers.facts.context import PER_NODE_READS, WalkContext
from layers.facts.fold import listed
from layers.facts.placement import one_node
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 1


def _res_column(resource: str) -> str:
    return resource.replace(".", "\\.")


def capacity_columns(resource: str) -> str:
    col = _res_column(resource)
    return (
        "kubectl get nodes -o custom-columns="
        f"'NODE:.metadata.name,CAP:.status.capacity.{col},ALLOC:.status.allocatable.{col}'"
    )


def allocatable_below_capacity(nodes: Iterable[K8sObject]) -> list[Finding]:
    out = []
    for node in nodes:
        gaps = o.allocatable_gaps(node)
        if not gaps:
            continue
        name = o.name(node)
        evidence, parts = [], []
        lost = mig = 0  # GPUs, and MIG devices where the resource counts those
        for resource, (cap, alloc) in sorted(gaps.items()):
            evidence += [f"capacity {resource}={cap}", f"allocatable {resource}={alloc}"]
            if o.counts_mig_devices(node, resource):
                mig += cap - alloc
            else:
                lost += o.gpus_of(node, resource, cap - alloc)
            note = o.sliced_note(node, resource, cap, alloc)
            if note:
                # Time-sliced: the numbers count replicas; the person needs GPUs.
                evidence.append(note)
                parts.append(f"{cap} {resource} replicas but only {alloc} allocatable")
            else:
                parts.append(f"{cap} {resource} but only {alloc} allocatable")
        out.append(
            finding(
                "L1_ALLOCATABLE_BELOW_CAPACITY",
                f"{name} advertises {'; '.join(parts)}: "
                + " and ".join(
                    [*([f"{lost} GPU(s)"] if lost else []), *([f"{mig} MIG device(s)"] if mig else [])]
                )
                + " marked unhealthy, look at the card",
                evidence=evidence,
                commands=[
                    f"kubectl describe node {name} | sed -n '/Capacity/,/Allocated resources/p'",
                    *(capacity_columns(r) for r in sorted(gaps)),
                ],
                node=name,
            )
        )
    return out


def more_nodes(what: str) -> Callable[[Sequence[Finding]], Finding]:
    """How `fold` says the nodes past MAX_LISTED: a fleet-wide problem the digest lists in full."""

    def one(rest: Sequence[Finding]) -> Finding:
        return finding(
            rest[0].code,
            f"{len(rest)} more GPU nodes {what}",
            evidence=listed([f.node or "" for f in rest]),
            commands=[capacity_columns(o.GPU_RESOURCE)],
        )

    return one


def gpu_exhausted(
    ctx: WalkContext, pod: K8sObject, requests: Mapping[str, int], nodes: list[K8sObject]
) -> list[Finding]:
    """Allocatable minus what the node's non-terminated pods request, against the pod's request."""
    lines: list[str] = []
    for i, node in enumerate(nodes):
        name = o.name(node)
        try:
            in_use = requested_on(ctx, name, one_by_one=i < PER_NODE_READS)
        except SourceError as err:
            return [unknown(LAYER, f"could not list pods to count the GPUs in use: {err}")]
        alloc = o.gpu_resources(node, "allocatable")
        short = [(r, want, alloc.get(r, 0) - in_use.get(r, 0)) for r, want in sorted(requests.items())]
        short = [s for s in short if s[2] < s[1]]
        if not short:
            return []  # one node fits: not a capacity question
        r, want, free = short[0]
        lines.append(
            f"{name}: allocatable {r}={alloc.get(r, 0)}, requested by pods={in_use.get(r, 0)}, "
            f"free={max(free, 0)} < {want}"
        )
    wanted = ", ".join(f"{r}={q}" for r, q in sorted(requests.items()))
    first = o.name(nodes[0])
    return [
        finding(
            "L1_GPU_EXHAUSTED",
            f"all {len(nodes)} node(s) the pod can use that advertise {', '.join(sorted(requests))} are fully allocated; "
            f"no room for {wanted}: a capacity question, not a fault",
            evidence=listed(lines),
            commands=[
                capacity_columns(sorted(requests)[0]),
                f"kubectl describe node {first} | sed -n '/Allocated resources/,/Events/p'",
                f"kubectl get pods -A -o wide --field-selector spec.nodeName={first},"
                "status.phase!=Succeeded,status.phase!=Failed",
            ],
            node=one_node([o.name(n) for n in nodes]),
        )
    ]


def requested_on(ctx: WalkContext, node: str, *, one_by_one: bool) -> dict[str, int]:
    """GPU resource -> requested by the node's non-terminated pods.

    The first nodes are read one by one (`spec.nodeName=`): usually one of them fits
    and the walk is done without listing the fleet's pods. Past those, one list of
    every non-terminated pod is cheaper than thousands of per-node lists.
    """
    if not one_by_one:
        return requested_by_node(ctx).get(node, {})
    return _requested(ctx.pods_on(node)).get(node, {})


def _requested(pods: Iterable[K8sObject]) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = defaultdict(dict)
    for p in pods:
        node = o.pod_node(p)
        # Terminating pods still hold their devices; only finished ones free them.
        if not node or o.pod_phase(p) in ("Succeeded", "Failed"):
            continue
        for r, q in o.pod_requests(p).items():
            used[node][r] = used[node].get(r, 0) + q
    return dict(used)


def requested_by_node(ctx: WalkContext) -> dict[str, dict[str, int]]:
    """node -> GPU resource -> requested by its non-terminated pods; one pods list per walk."""
    return ctx.cached(
        "gpu_requested_by_node",
        lambda: _requested(
            ctx.cluster.list_pods(field_selector="status.phase!=Succeeded,status.phase!=Failed")
        ),
    )


def free_gpus(ctx: WalkContext, nodes: Sequence[K8sObject], resource: str) -> dict[str, int]:
    """node -> allocatable minus what its non-terminated pods request of `resource` (never below 0)."""
    out: dict[str, int] = {}
    for i, node in enumerate(nodes):
        name = o.name(node)
        in_use = requested_on(ctx, name, one_by_one=i < PER_NODE_READS)
        out[name] = max(o.gpu_resources(node, "allocatable").get(resource, 0) - in_use.get(resource, 0), 0)
    return out
