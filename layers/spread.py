"""Layer 1: the pod's own topology spread constraints keep it off GPU nodes with room (L1_TOPOLOGY_SPREAD).

kube-scheduler's PodTopologySpread says `node(s) didn't match pod topology spread constraints`:
with `whenUnsatisfiable: DoNotSchedule`, placing the pod in a domain (a zone, a host) would make
the count of matching pods there exceed the least-loaded domain's by more than `maxSkew`. When the
candidate nodes it names have free GPUs, the constraint, not the GPUs, is the answer.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from layers.capacity import free_gpus
from layers.facts import objects as o
from layers.facts.candidates import Candidates
from layers.facts.context import WalkContext
from layers.facts.fold import listed
from layers.facts.schedmsg import SchedulingFailure
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 1


def constraint_text(c: dict[str, Any]) -> str:
    selector = (c.get("labelSelector") or {}).get("matchLabels") or {}
    sel = ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "(selector expressions)"
    return (
        f"topologySpreadConstraint topologyKey={c.get('topologyKey')} maxSkew={c.get('maxSkew')} "
        f"whenUnsatisfiable={c.get('whenUnsatisfiable') or 'DoNotSchedule'} labelSelector {sel}"
        + (f" minDomains={c['minDomains']}" if c.get("minDomains") else "")
    )


def topology_spread(
    ctx: WalkContext, pod: K8sObject, failures: Sequence[SchedulingFailure], cands: Candidates
) -> list[Finding]:
    if not any(f.topology_spread for f in failures) or not cands.nodes:
        return []
    constraints = [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if isinstance(c, dict) and (c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"
    ]
    requests = o.pod_requests(pod)
    if not requests:
        return []
    resource, want = sorted(requests.items())[0]
    try:
        free = free_gpus(ctx, cands.nodes, resource)
    except SourceError as err:
        return [unknown(LAYER, f"could not list pods to count the GPUs in use: {err}")]
    roomy = [n for n in cands.nodes if free.get(o.name(n), 0) >= want]
    if not roomy:
        return []  # no room anyway: a capacity question (L1_GPU_EXHAUSTED), not the spread rule
    ns, name = o.namespace(pod), o.name(pod)
    said = next(f.message for f in reversed(failures) if f.topology_spread)
    domains: list[str] = []
    for c in constraints:
        key = str(c.get("topologyKey") or "")
        per: dict[str, int] = defaultdict(int)
        for n in cands.nodes:
            per[str(o.labels(n).get(key) or "(no label)")] += free.get(o.name(n), 0)
        domains += [f"{key}={d}: {per[d]} free {resource}" for d in sorted(per)]
    return [
        finding(
            "L1_TOPOLOGY_SPREAD",
            f"{len(roomy)} GPU node(s) the pod can use have room for {resource}={want}, but {ns}/{name}'s own "
            "topology spread constraint keeps it off them: relax maxSkew, use whenUnsatisfiable: "
            "ScheduleAnyway, or add GPUs in the other domains",
            evidence=[
                f"scheduler: {said}",
                *(constraint_text(c) for c in constraints),
                *(
                    ["no DoNotSchedule constraint on the pod (set by a default cluster constraint?)"]
                    if not constraints
                    else []
                ),
                *listed(domains),
            ],
            commands=[
                f"kubectl get pod -n {ns} {name} -o jsonpath='{{.spec.topologySpreadConstraints}}'",
                "kubectl get nodes -L topology.kubernetes.io/zone,nvidia.com/gpu.product",
            ],
        )
    ]
