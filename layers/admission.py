"""Layer 1 for a bound pod: the kubelet refused it at admission over a GPU resource.

`OutOf<resource>` (its device count disagrees with the scheduler's) and UnexpectedAdmissionError
(the device manager's Allocate failed) are the kubelet's words; the node's capacity and
allocatable now say whether its GPUs came back.
"""

from __future__ import annotations

import re

from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.logsigs import event_line
from layers.findings import Finding, finding
from layers.sources import K8sObject, SourceError

# The kubelet's admission refusals of a bound pod: `OutOf<resource>` (its device count disagrees
# with the scheduler's) and UnexpectedAdmissionError (the device manager's Allocate failed).
_OUT_OF = "OutOf"
_UNEXPECTED_ADMISSION = "UnexpectedAdmissionError"
# k8s-device-plugin's Allocate on shared GPUs: "request for 'nvidia.com/gpu: 2' too large: maximum request
# size for shared resources is 1" (time-slicing), "invalid request: maximum request size for shared
# resources is 1; found 2" (MPS).
_SHARED_LIMIT = re.compile(r"maximum request size for shared resources is 1(?:; found \d+)?", re.IGNORECASE)


def admission_rejected(ctx: WalkContext, pod: K8sObject, node: str) -> list[Finding]:
    """L1_ADMISSION_REJECTED: the kubelet on the pod's node refused it over a GPU resource."""
    status = pod.get("status") or {}
    reason, message = str(status.get("reason") or ""), " ".join(str(status.get("message") or "").split())
    resource = reason.removeprefix(_OUT_OF) if reason.startswith(_OUT_OF) else ""
    if not (o.is_gpu_resource(resource) or (reason == _UNEXPECTED_ADMISSION and "nvidia.com/" in message)):
        return []
    ns, name = o.namespace(pod), o.name(pod)
    evidence = [f"status.phase={o.pod_phase(pod)}", f"status.reason={reason}", f"status.message={message}"]
    try:
        evidence += [
            event_line(e) for e in ctx.events("Pod", ns, name) if str(e.get("reason", "")) == reason
        ][-3:]
    except SourceError as err:
        evidence.append(f"events not read: {err}")
    try:
        obj = ctx.node(node)
    except SourceError:
        obj = None  # the capacity check above already said the node list could not be read
    capacity = o.gpu_resources(obj, "capacity") if obj is not None else {}
    allocatable = o.gpu_resources(obj, "allocatable") if obj is not None else {}
    evidence += [
        f"{node} now: capacity {r}={c}, allocatable {r}={allocatable.get(r, 0)}"
        for r, c in sorted(capacity.items())
    ]
    shared = _SHARED_LIMIT.search(message)
    if shared:
        # The device plugin's Allocate refused it (time-slicing/MPS, failRequestsGreaterThanOne).
        why = (
            f"the device plugin on {node} shares each GPU (time-slicing or MPS) and refuses a request above 1 "
            f"({shared.group(0)}) — ask for 1 per pod, or for a node that does not share its GPUs, and recreate it"
        )
    elif reason == _UNEXPECTED_ADMISSION:
        why = (
            "the device manager could not allocate the devices the scheduler counted on (a GPU marked unhealthy "
            "between scheduling and admission, or the device plugin restarting) — recreate the pod (a Job or "
            f"Deployment does) and check the device plugin on {node}"
        )
    else:
        why = (
            "its count of the node's GPUs disagreed with the scheduler's (a kubelet restart before the device "
            "plugin registered again, or a nodeName set past the scheduler) — recreate the pod (a Job or "
            f"Deployment does) and check the device plugin on {node}"
        )
    return [
        finding(
            "L1_ADMISSION_REJECTED",
            f"the kubelet on {node} refused {ns}/{name} at admission ({reason}): {why}",
            evidence=evidence,
            commands=[
                f"kubectl get pod -n {ns} {name} -o jsonpath='{{.status.reason}}: {{.status.message}}'",
                f"kubectl describe node {node} | sed -n '/Capacity/,/Allocated resources/p'",
                f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} | grep -i device-plugin",
            ],
            node=node,
        )
    ]
