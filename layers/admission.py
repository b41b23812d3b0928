"""Layer 1 for a bound pod: the kubelet refused it at admission over a GPU resource.

`OutOf<resource>` (its device count disagrees with the scheduler's), UnexpectedAdmissionError
(the device manager's Allocate failed) and TopologyAffinityError (the topology manager's
`single-numa-node` or `restricted` policy found no NUMA node with the GPUs free) are the kubelet's
words; the node's capacity and allocatable now say whether its GPUs came back. None of them is a
card fault.
"""

from __future__ import annotations

import re

from layers.capacity import free_gpus
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.logsigs import event_line
from layers.findings import Finding, Severity, finding
from layers.sources import K8sObject, SourceError

# The kubelet's admission refusals of a bound pod: `OutOf<resource>` (its device count disagrees
# with the scheduler's) and UnexpectedAdmissionError (the device manager's Allocate failed).
_OUT_OF = "OutOf"
_UNEXPECTED_ADMISSION = "UnexpectedAdmissionError"
# The topology manager's refusal: reason TopologyAffinityError, message "Pod was rejected: Resources
# cannot be allocated with Topology locality" (kubelet pkg/kubelet/cm/topologymanager).
_TOPOLOGY = "TopologyAffinityError"
_TOPOLOGY_MESSAGE = re.compile(r"cannot be allocated with Topology locality", re.IGNORECASE)
# NodeResourceTopology (topology-updater of NFD, the NUMA resources operator): the kubelet's policy.
# k8s-device-plugin's Allocate on shared GPUs: "request for 'nvidia.com/gpu: 2' too large: maximum request
# size for shared resources is 1" (time-slicing), "invalid request: maximum request size for shared
# resources is 1; found 2" (MPS).
_SHARED_LIMIT = re.compile(r"maximum request size for shared resources is 1(?:; found \d+)?", re.IGNORECASE)


def admission_rejected(ctx: WalkContext, pod: K8sObject, node: str) -> list[Finding]:
    """L1_ADMISSION_REJECTED: the kubelet on the pod's node refused it over a GPU resource."""
    status = pod.get("status") or {}
    reason, message = str(status.get("reason") or ""), " ".join(str(status.get("message") or "").split())
    resource = reason.removeprefix(_OUT_OF) if reason.startswith(_OUT_OF) else ""
    topology = (reason == _TOPOLOGY or bool(_TOPOLOGY_MESSAGE.search(message))) and bool(o.pod_requests(pod))
    if topology:
        return [_topology_refused(ctx, pod, node, reason or _TOPOLOGY, message)]
    if not (o.is_gpu_resource(resource) or (reason == _UNEXPECTED_ADMISSION and "nvidia.com/" in message)):
        return []
    ns, name = o.namespace(pod), o.name(pod)
    evidence = _refusal_evidence(ctx, pod, reason, message, reason)
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
            # The device plugin's state is the question: the walk goes on to the runtime.
            severity=Severity.WARN,
            next=2,
        )
    ]


def topology_policy(ctx: WalkContext, node: str) -> str | None:
    """The node's topology manager policy and scope where a NodeResourceTopology object says them."""
    try:
        # Spelt out: the chart's RBAC test derives the rules from such calls (tests/test_helm.py).
        objects = ctx.custom("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")
    except SourceError:
        return None
    for obj in objects:
        if o.name(obj) != node:
            continue
        attrs = {
            str(a.get("name")): str(a.get("value"))
            for a in obj.get("attributes") or []
            if isinstance(a, dict)
        }
        policy = attrs.get("topologyManagerPolicy") or ", ".join(
            str(p) for p in obj.get("topologyPolicies") or []
        )
        scope = attrs.get("topologyManagerScope")
        if policy:
            return policy + (f" (scope {scope})" if scope else "")
    return None


def _refusal_evidence(
    ctx: WalkContext, pod: K8sObject, reason: str, message: str, event_reason: str
) -> list[str]:
    """The pod's status as the kubelet left it, and its last three events of that reason."""
    evidence = [f"status.phase={o.pod_phase(pod)}", f"status.reason={reason}", f"status.message={message}"]
    try:
        evidence += [
            event_line(e)
            for e in ctx.events("Pod", o.namespace(pod), o.name(pod))
            if str(e.get("reason", "")) == event_reason
        ][-3:]
    except SourceError as err:
        evidence.append(f"events not read: {err}")
    return evidence


def _topology_refused(ctx: WalkContext, pod: K8sObject, node: str, reason: str, message: str) -> Finding:
    ns, name = o.namespace(pod), o.name(pod)
    requests = o.pod_requests(pod)
    evidence = _refusal_evidence(ctx, pod, reason, message, _TOPOLOGY)
    free: dict[str, int] = {}
    try:
        obj = ctx.node(node)
        if obj is not None:
            for r in sorted(requests):
                free[r] = free_gpus(ctx, [obj], r).get(node, 0)
    except SourceError as err:
        evidence.append(f"free GPUs on {node} not read: {err}")
    evidence += [
        f"{node}: requested {r}={q}, free {r}={free[r]} (allocatable minus what its pods request)"
        for r, q in sorted(requests.items())
        if r in free
    ]
    policy = topology_policy(ctx, node)
    evidence.append(
        f"{node}: topology manager policy {policy}"
        if policy
        else f"{node}: topology manager policy not in the API (no NodeResourceTopology for it); the kubelet's "
        "topologyManagerPolicy single-numa-node or restricted refuses a pod whose GPUs no single NUMA node has free"
    )
    wanted = ", ".join(f"{r}={q}" for r, q in sorted(requests.items()))
    enough = [r for r, q in requests.items() if free.get(r, 0) >= q]
    why = (
        f"the node has the GPUs free ({', '.join(f'{r}={free[r]}' for r in sorted(enough))}) but not on one NUMA node, "
        "and its topology manager policy requires them there"
        if enough
        else "its topology manager found no NUMA placement for the request"
    )
    return finding(
        "L1_ADMISSION_REJECTED",
        f"the kubelet on {node} refused {ns}/{name} at admission ({reason}: resources cannot be allocated with "
        f"topology locality): {why} — not a GPU fault; recreate the pod on a node with {wanted} free on one "
        "socket (fewer GPUs per pod, or keep small pods off the node), or relax the policy (best-effort)",
        evidence=evidence,
        commands=[
            f"kubectl get pod -n {ns} {name} -o jsonpath='{{.status.reason}}: {{.status.message}}'",
            f"kubectl describe node {node} | sed -n '/Allocated resources/,/Events/p'",
            f"kubectl get noderesourcetopologies {node} -o yaml",
            f"kubectl get --raw /api/v1/nodes/{node}/proxy/configz | jq '.kubeletconfig.topologyManagerPolicy'",
        ],
        node=node,
    )
