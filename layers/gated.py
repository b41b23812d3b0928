"""Layer 1 for a pod a queue holds: its scheduling gates (Kueue's among them)."""

from __future__ import annotations

from layers.facts import objects as o
from layers.findings import Finding, finding
from layers.sources import K8sObject


def scheduling_gated(pod: K8sObject) -> Finding:
    ns, name = o.namespace(pod), o.name(pod)
    gates = o.scheduling_gates(pod)
    queue = o.labels(pod).get("kueue.x-k8s.io/queue-name")
    kueue = any(g.startswith("kueue.x-k8s.io/") for g in gates) or queue is not None
    return finding(
        "L1_SCHEDULING_GATED",
        f"{ns}/{name} is held by scheduling gate(s) {', '.join(gates)}: the scheduler has not tried it yet"
        + (" — Kueue admits it when its queue has quota for the whole workload" if kueue else "")
        + "; no node is at fault",
        evidence=[
            *(f"spec.schedulingGates: {g}" for g in gates),
            *([f"kueue.x-k8s.io/queue-name={queue}"] if queue else []),
        ],
        commands=[
            f"kubectl get pod -n {ns} {name} -o jsonpath='{{.spec.schedulingGates}}'",
            *(
                [f"kubectl get workloads -n {ns}", "kubectl get clusterqueues,localqueues -A"]
                if kueue
                else []
            ),
        ],
    )
