"""Layer 1 for a pod a queue holds: its scheduling gates, and for Kueue its Workload's condition.

Kueue gates the pods of a workload it has not admitted (`kueue.x-k8s.io/admission`, or the
workload's Job is suspended); the Workload's `QuotaReserved` / `Admitted` condition says why in
Kueue's own words, e.g. `couldn't assign flavors to pod set main: insufficient quota for
nvidia.com/gpu in flavor a100, request > maximum capacity (8 > 0)` (a ClusterQueue with no GPU
quota) — the message the person needs, not the nodes.
"""

from __future__ import annotations

from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 1
POD_GROUP = "kueue.x-k8s.io/pod-group-name"
CONDITIONS = ("QuotaReserved", "Admitted")


def workload_of(pod: K8sObject, workloads: list[K8sObject]) -> K8sObject | None:
    """The pod's Workload: owned by the pod (Kueue's pod integration) or by the pod's owner (a Job,
    a JobSet …), or named after its pod group; in the pod's namespace."""
    ns = o.namespace(pod)
    owners = {("Pod", o.name(pod))} | {
        (str(r.get("kind")), str(r.get("name")))
        for r in (pod.get("metadata") or {}).get("ownerReferences") or []
    }
    group = o.labels(pod).get(POD_GROUP)
    for wl in workloads:
        if o.namespace(wl) != ns:
            continue
        refs = {
            (str(r.get("kind")), str(r.get("name")))
            for r in (wl.get("metadata") or {}).get("ownerReferences") or []
        }
        if refs & owners or (group and o.name(wl) == group):
            return wl
    return None


def _conditions(wl: K8sObject) -> list[str]:
    out = []
    for cond in (wl.get("status") or {}).get("conditions") or []:
        if cond.get("type") in CONDITIONS:
            why = f" ({cond['reason']})" if cond.get("reason") else ""
            msg = " ".join(str(cond.get("message") or "").split())
            out.append(
                f"Workload {o.name(wl)}: {cond.get('type')}={cond.get('status')}{why}"
                + (f": {msg}" if msg else "")
            )
    return out


def _quota_message(wl: K8sObject) -> str:
    """The message of a False QuotaReserved (else Admitted) condition: which quota is short."""
    conds = {str(c.get("type")): c for c in (wl.get("status") or {}).get("conditions") or []}
    for kind in CONDITIONS:
        c = conds.get(kind)
        if c is not None and c.get("status") == "False" and c.get("message"):
            return " ".join(str(c["message"]).split())
    return ""


def scheduling_gated(ctx: WalkContext, pod: K8sObject) -> list[Finding]:
    ns, name = o.namespace(pod), o.name(pod)
    gates = o.scheduling_gates(pod)
    queue = o.labels(pod).get("kueue.x-k8s.io/queue-name")
    kueue = any(g.startswith("kueue.x-k8s.io/") for g in gates) or queue is not None
    out: list[Finding] = []
    wl: K8sObject | None = None
    if kueue:
        try:
            wl = workload_of(pod, ctx.custom("kueue.x-k8s.io", "v1beta1", "workloads"))
        except SourceError as err:
            out.append(
                unknown(
                    LAYER,
                    f"could not read Kueue's Workloads to say why {ns}/{name} is not admitted: {err.message}"
                    + (f" ({err.hint()})" if err.hint() else ""),
                )
            )
    quota = _quota_message(wl) if wl is not None else ""
    out.insert(
        0,
        finding(
            "L1_SCHEDULING_GATED",
            f"{ns}/{name} is held by scheduling gate(s) {', '.join(gates)}: the scheduler has not tried it yet"
            + (
                f" — Kueue has not admitted its workload: {quota}"
                if quota
                else " — Kueue admits it when its queue has quota for the whole workload"
                if kueue
                else ""
            )
            + "; no node is at fault",
            evidence=[
                *(f"spec.schedulingGates: {g}" for g in gates),
                *([f"kueue.x-k8s.io/queue-name={queue}"] if queue else []),
                *(_conditions(wl) if wl is not None else []),
            ],
            commands=[
                f"kubectl get pod -n {ns} {name} -o jsonpath='{{.spec.schedulingGates}}'",
                *(
                    [
                        f"kubectl describe workload -n {ns} {o.name(wl)}"
                        if wl is not None
                        else f"kubectl get workloads -n {ns}",
                        "kubectl get clusterqueues,localqueues -A",
                    ]
                    if kueue
                    else []
                ),
            ],
        ),
    )
    return out
