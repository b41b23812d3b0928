"""Layer 1: a pending pod's zonal volumes (L1_VOLUME_NODE_AFFINITY).

The volumes are already in the pod's candidates (layers/facts/volumes.py, candidates.py): a node
that fails a bound PersistentVolume's required node affinity is no candidate. Here the scheduler's
`volume node affinity conflict` is checked against the GPU nodes of the requested kind: when none
of them in the volume's zone (or host) exists or has room, the volume is the answer, not the GPU
stack further down.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from layers.capacity import free_gpus
from layers.facts import objects as o
from layers.facts.candidates import Candidates
from layers.facts.context import WalkContext
from layers.facts.fold import listed, shown
from layers.facts.placement import selector_misses
from layers.facts.schedmsg import SchedulingFailure
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 1
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


def zone_of(node: K8sObject) -> str:
    lab = o.labels(node)
    return next((str(lab[k]) for k in ZONE_LABELS if lab.get(k)), "(no zone label)")


def unread_volumes(ctx: WalkContext) -> list[Finding]:
    """A refused PVC/PV read: the volumes could not be placed, said with the rule to grant."""
    return [
        unknown(
            LAYER,
            f"could not read {what} to see where the pod's volumes let it run: {err.message}"
            + (f" ({err.hint()})" if err.hint() else ""),
        )
        for what, err in ctx.volumes().unread
    ]


def by_zone(nodes: Sequence[K8sObject], free: Mapping[str, int], resource: str) -> list[str]:
    """`zone us-east-1b: 6 GPU node(s), 10 free nvidia.com/gpu (a100-03: 4, …)` per zone."""
    zones: dict[str, list[K8sObject]] = defaultdict(list)
    for n in nodes:
        zones[zone_of(n)].append(n)
    lines = []
    for zone, members in sorted(zones.items()):
        room = [f"{o.name(n)}: {free[o.name(n)]}" for n in members if free.get(o.name(n), 0) > 0]
        total = sum(free.get(o.name(n), 0) for n in members)
        lines.append(
            f"zone {zone}: {len(members)} GPU node(s), {total} free {resource}"
            + (f" ({shown(room, limit=4)})" if room else "")
        )
    return lines


def volume_affinity(
    ctx: WalkContext, pod: K8sObject, failures: Sequence[SchedulingFailure], cands: Candidates
) -> list[Finding]:
    """L1_VOLUME_NODE_AFFINITY: the scheduler reports a volume conflict and no GPU node of the
    requested kind that the pod's volumes allow (and its selector, affinity and taints) has room."""
    vols = ctx.volumes()
    if not vols.pinned or not any(f.volume_conflict for f in failures):
        return []
    requests = o.pod_requests(pod)
    if not requests:
        return []
    resource, want = sorted(requests.items())[0]
    # GPU nodes of the requested kind the pod means (its selector and affinity), whatever the volumes.
    kind = [n for n in cands.carrying if not selector_misses(pod, n)] or list(cands.carrying)
    try:
        free = free_gpus(ctx, kind, resource)
    except SourceError as err:
        return [unknown(LAYER, f"could not list pods to count the GPUs in use: {err}")]
    allowed = [n for n in kind if not vols.misses(n)]
    if any(free.get(o.name(n), 0) >= want for n in allowed if o.name(n) in cands):
        return []  # a node the volumes allow has room: the conflict is about other nodes
    ns, name = o.namespace(pod), o.name(pod)
    said = next(f.message for f in reversed(failures) if f.volume_conflict)
    zones = sorted({z for v in vols.pinned for z in _zones_named(v.terms)})
    where = f"zone {', '.join(zones)}" if zones else "the nodes they name"
    gist = (
        f"no GPU node of the kind it requests ({resource}) is in {where}"
        if not allowed
        else f"the {len(allowed)} GPU node(s) there have no room for {resource}={want}"
    )
    return [
        finding(
            "L1_VOLUME_NODE_AFFINITY",
            f"{ns}/{name}'s volumes pin it to {where}, but {gist}: the GPUs are elsewhere, not faulty — "
            "put the volume in the GPUs' zone (restore a snapshot there, or a StorageClass with "
            "volumeBindingMode: WaitForFirstConsumer) or add GPUs in the volume's zone",
            evidence=[
                f"scheduler: {said}",
                *(v.text for v in vols.pinned),
                *listed(by_zone(kind, free, resource)),
                *(
                    [f"GPU nodes the volumes allow: {shown([o.name(n) for n in allowed], limit=5)}"]
                    if allowed
                    else []
                ),
            ],
            commands=[
                f"kubectl get pvc -n {ns} -o wide",
                *(f"kubectl get pv {v.volume} -o jsonpath='{{.spec.nodeAffinity}}'" for v in vols.pinned[:3]),
                "kubectl get nodes -L topology.kubernetes.io/zone,nvidia.com/gpu.product",
            ],
        )
    ]


def _zones_named(terms: Sequence[Mapping[str, object]]) -> list[str]:
    """The zones a PV's terms name (`In` values of a zone label)."""
    out: list[str] = []
    for term in terms:
        for expr in term.get("matchExpressions") or []:  # type: ignore[attr-defined]
            if expr.get("key") in ZONE_LABELS and expr.get("operator") == "In":
                out += [str(v) for v in expr.get("values") or []]
    return out
