"""Layer 1 — scheduling: is the GPU resource advertised, and is any left.

Capacity against allocatable is compared first, always: a gap means the
device plugin marked devices unhealthy, which sends the walk to layer 5.
For a bound pod that is all; an unbound pod is explained from its
FailedScheduling messages checked against the nodes themselves.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from layers.admission import admission_rejected
from layers.advertising import node_not_advertising, resource_mismatch, selected_mismatch
from layers.capacity import allocatable_below_capacity, capacity_columns, gpu_exhausted, more_nodes
from layers.dra import pods as dra_pods
from layers.facts import drareads
from layers.facts import objects as o
from layers.facts.candidates import Candidates, not_for_pods
from layers.facts.context import WalkContext
from layers.facts.dra import EXTENDED_PREFIX, extended_dra_requests
from layers.facts.fold import MAX_LISTED, fold, listed
from layers.facts.logsigs import event_line, event_message, event_time
from layers.facts.placement import node_conditions, scheduler_reasons, selector_misses
from layers.facts.schedmsg import SchedulingFailure, parse_failed_scheduling, post_filter_start
from layers.findings import Finding, LayerResult, finding, unknown
from layers.gated import scheduling_gated
from layers.migconfig import mig_config_failed
from layers.registration import redirect_gaps
from layers.sources import K8sObject, SourceError
from layers.spread import topology_spread
from layers.volumes import unread_volumes, volume_affinity

LAYER = 1


def check(ctx: WalkContext) -> LayerResult:
    findings: list[Finding] = []
    pod = ctx.pod
    bound = ctx.bound_node
    nodes: list[K8sObject] | None = None
    try:
        # A bound pod needs its own node only (ctx.node reads it by name): its walk's requests do not
        # grow with the fleet. The check below still fails as before when the node cannot be read.
        nodes = [] if bound else ctx.nodes()
        if bound:
            ctx.node(bound)
    except SourceError as err:
        findings.append(unknown(LAYER, f"could not list nodes to compare capacity with allocatable: {err}"))
        nodes = None

    # A pod that uses DRA GPUs is judged by the DRA table: no nvidia.com/gpu there is normal.
    uses_dra = pod is not None and drareads.uses_dra_gpus(ctx)
    if nodes is not None and not uses_dra:
        if bound:
            node = ctx.node(bound)
            if node is None:
                findings.append(unknown(LAYER, f"node {bound} is not in the cluster's node list", node=bound))
            else:
                findings.extend(redirect_gaps(ctx, allocatable_below_capacity([node])))
        elif pod is not None:
            # Only the pod's candidate nodes decide (spec: Terms, noise elsewhere).
            gaps = redirect_gaps(ctx, allocatable_below_capacity(ctx.candidates().nodes))
            # Past ten, a fleet-wide problem: one finding names the rest (the digest lists every node).
            findings += fold(gaps, keep=MAX_LISTED, into=more_nodes("have allocatable below capacity"))

    if pod is None:  # a node walk: capacity against allocatable only
        return LayerResult.build(LAYER, findings)
    if bound:
        if uses_dra:
            findings.extend(dra_pods.bound_pod(ctx, bound))
        findings.extend(admission_rejected(ctx, pod, bound))
        findings.append(
            finding(
                "L1_POD_SCHEDULED",
                f"{ctx.target.label} is scheduled on {bound}",
                evidence=[f"spec.nodeName={bound}", f"status.phase={o.pod_phase(pod)}"],
                commands=[f"kubectl get pod -n {o.namespace(pod)} {o.name(pod)} -o wide"],
                node=bound,
            )
        )
        return LayerResult.build(LAYER, findings)

    failures, pending = pending_pod(ctx, pod)
    findings.extend(pending)
    if o.scheduling_gates(pod):
        # Held by a queue (Kueue): the scheduler has not tried it, the fleet cannot explain it.
        findings.extend(scheduling_gated(ctx, pod))
        return LayerResult.build(LAYER, findings)
    if uses_dra:
        findings.extend(dra_pods.unbound_pod(ctx, pod, failures))
        if nodes is not None:
            cands = ctx.candidates()
            if failures:
                gpu = drareads.is_dra_gpu_node(ctx)
                findings.extend(placement_reasons(pod, failures, cands, [n for n in nodes if gpu(n)]))
            findings.extend(elsewhere_in_fleet(nodes, cands, drareads.slice_nodes(ctx)))
    elif nodes is not None:
        cands = ctx.candidates()
        findings.extend(unbound_pod(ctx, pod, nodes, cands, failures))
        findings.extend(
            elsewhere_in_fleet(
                nodes, cands, drareads.slice_nodes(ctx) if ctx.some_gpu_node_silent() else frozenset()
            )
        )
    return LayerResult.build(LAYER, findings)


# --- the unbound pod ---------------------------------------------------------------------


def pending_pod(ctx: WalkContext, pod: K8sObject) -> tuple[list[SchedulingFailure], list[Finding]]:
    """L1_POD_PENDING with the scheduler's messages; the parsed messages for the other checks."""
    ns, name = o.namespace(pod), o.name(pod)
    findings: list[Finding] = []
    messages: list[tuple[str, str]] = []  # (evidence line, raw message)
    try:
        events = [
            e for e in ctx.events("Pod", ns, name) if str(e.get("reason", "")).lower() == "failedscheduling"
        ]
        for ev in sorted(events, key=event_time):
            messages.append((event_line(ev), event_message(ev)))
    except SourceError as err:
        findings.append(unknown(LAYER, f"could not read the events of {ns}/{name}: {err}"))
    # The PodScheduled condition repeats the last message; it outlives the events (1 h TTL).
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" and cond.get("message"):
            msg = str(cond["message"])
            if not any(" ".join(msg.split()) == " ".join(raw.split()) for _, raw in messages):
                messages.append((f"condition PodScheduled={cond.get('reason', 'False')}: {msg}", msg))
    requests = o.pod_requests(pod)
    evidence = [f"status.phase={o.pod_phase(pod)}", "spec.nodeName is empty"]
    claims = [
        str(c.get("name")) for c in (pod.get("spec") or {}).get("resourceClaims") or [] if isinstance(c, dict)
    ]
    evidence += [f"requests {r}={q}" for r, q in sorted(requests.items())] + [
        f"requests {EXTENDED_PREFIX}{cls}={q} (a DRA extended resource, served through DeviceClass {cls})"
        for cls, q in sorted(extended_dra_requests(pod).items())
    ] or (
        [f"requests devices through ResourceClaims: {', '.join(claims)}"]
        if claims
        else ["requests no GPU resource"]
    )
    evidence += [line for line, _ in messages[-5:]] or ["no FailedScheduling event recorded (events expire)"]
    findings.append(
        finding(
            "L1_POD_PENDING",
            f"{ns}/{name} is Pending: not scheduled on any node"
            + (f" ({scheduler_gist(messages[-1][1])})" if messages else ""),
            evidence=evidence,
            commands=[
                f"kubectl describe pod -n {ns} {name} | tail -20",
                f"kubectl get events -n {ns} --field-selector involvedObject.name={name},reason=FailedScheduling",
            ],
        )
    )
    return [parse_failed_scheduling(raw) for _, raw in messages], findings


GIST_CHARS = 200
_PREEMPTION = re.compile(r"(?:\.|(?<![\s.]))\s+preemption:", re.IGNORECASE)
_CONTROL_PLANE = re.compile(
    r"(?:,\s*|(?<=: ))\d+ node\(s\) had (?:untolerated )?taint \{node-role\.kubernetes\.io/(?:control-plane|master): ?\}"
    r"(?:, that the pod didn't tolerate)?(?=,|$)"
)


def scheduler_gist(message: str) -> str:
    """The scheduler's reasons for a summary: without the PostFilter notes (the full message is in
    the evidence), cut at a word with an ellipsis rather than mid-word."""
    text = " ".join(message.split())
    text = _PREEMPTION.split(text, maxsplit=1)[0].rstrip(". ")
    notes = post_filter_start(text)
    if notes < len(text):  # DRA's PostFilter notes ("no new claims to deallocate") before preemption's
        text = text[:notes].rstrip(". ,")
    if len(text) > GIST_CHARS:
        # The control-plane taint is in every message and never a GPU reason: make room for the rest
        # (a topology-spread or port reason last in the list would be cut off). The evidence keeps it.
        text = _CONTROL_PLANE.sub("", text).replace(": , ", ": ")
    if len(text) <= GIST_CHARS:
        return text
    cut = text[:GIST_CHARS].rsplit(" ", 1)[0].rstrip(",;:")
    return f"{cut}…"


def unbound_pod(
    ctx: WalkContext,
    pod: K8sObject,
    nodes: list[K8sObject],
    cands: Candidates,
    failures: list[SchedulingFailure],
) -> list[Finding]:
    out: list[Finding] = []
    requests = o.pod_requests(pod)
    gpu_nodes = ctx.gpu_nodes()  # the same nodes, in the same order, found once per walk
    advertised = {o.name(n): o.advertised(n) for n in gpu_nodes}
    labels_cmd = "kubectl get nodes -L nvidia.com/gpu.count,nvidia.com/gpu.product,nvidia.com/mig.strategy"

    # Nodes that publish their GPUs through DRA advertise no extended resource by design.
    via_dra = drareads.slice_nodes(ctx) if not all(advertised.values()) else frozenset()
    if not any(advertised.values()):
        out.append(
            finding(
                "L1_NO_GPU_ADVERTISED",
                "no node advertises a GPU resource: the device plugin is not registering GPUs anywhere",
                evidence=[
                    f"{len(nodes)} node(s), {len(gpu_nodes)} labelled as GPU nodes, none with "
                    "nvidia.com/gpu, nvidia.com/mig-* or nvidia.com/gpu.shared in capacity",
                    *(
                        [
                            f"{len(via_dra)} node(s) publish GPUs through DRA (ResourceSlices of driver "
                            "gpu.nvidia.com): request them with a ResourceClaim of DeviceClass gpu.nvidia.com"
                        ]
                        if via_dra
                        else []
                    ),
                ],
                commands=[capacity_columns(o.GPU_RESOURCE), labels_cmd],
            )
        )
    silent = [node_not_advertising(n) for n in cands.nodes if not o.advertises(n)]
    out += fold(silent, keep=MAX_LISTED, into=more_nodes("advertise no GPU resource"))
    if not any(o.has_nvidia_labels(n) for n in nodes):
        out.append(
            finding(
                "L1_NO_GPU_LABELS",
                "no node carries any nvidia.com/* label: GPU Feature Discovery / Node Feature Discovery "
                "are not running",
                evidence=[f"{len(nodes)} node(s), none labelled nvidia.com/*"],
                commands=[labels_cmd, "kubectl get pods -A -l app=gpu-feature-discovery -o wide"],
            )
        )

    mig_failed, explained = mig_config_failed(ctx, cands.nodes, requests)
    out.extend(mig_failed)

    offered: dict[str, list[str]] = defaultdict(list)  # resource -> nodes advertising it
    for name, res in advertised.items():
        for r in res:
            offered[r].append(name)
    # A failed MIG reconfiguration explains a MIG resource nobody advertises: the user asked right.
    missing = sorted(r for r in requests if r not in offered and r not in explained)
    if missing and offered:
        out.append(resource_mismatch(missing, requests, offered, nodes, labels_cmd))
    else:
        out += selected_mismatch(pod, cands, gpu_nodes, requests, explained, labels_cmd)

    if failures:
        # The selected nodes' resource is the answer then, not the selector that keeps the pod off the others.
        keep_selector = not any(f.code == "L1_RESOURCE_MISMATCH" for f in out)
        out.extend(placement_reasons(pod, failures, cands, gpu_nodes, selector=keep_selector))
    # The pod's own placement rules beside free GPUs: its zonal volumes, its spread constraints.
    out += unread_volumes(ctx) + volume_affinity(ctx, pod, failures, cands)
    spread = topology_spread(ctx, pod, failures, cands)
    out += spread
    fitting = [n for n in cands.nodes if set(requests) <= set(o.advertised(n))]
    if requests and fitting and not spread:
        out.extend(gpu_exhausted(ctx, pod, requests, fitting))
    return out


def placement_reasons(
    pod: K8sObject,
    failures: list[SchedulingFailure],
    cands: Candidates,
    gpu_nodes: list[K8sObject],
    *,
    selector: bool = True,
) -> list[Finding]:
    """The scheduler's taint, selector and cordon reasons, as far as they explain this pod.

    A taint or a selector is the answer only when it leaves the pod no candidate; with candidates
    left it merely keeps the pod off nodes it was never meant for. When nodes match the selector but
    all are tainted, the taint is the answer: the selector says where the pod is meant to run.
    """
    if cands.nodes:
        return scheduler_reasons(pod, failures, taint_nodes=[], selector_nodes=[], candidates=cands.nodes)
    carrying = list(cands.carrying) or [n for n in gpu_nodes if not not_for_pods(n)]
    # A node the pod's volumes rule out is not one its taint or selector keeps it from.
    carrying = [n for n in carrying if o.name(n) not in cands.off_volumes]
    selected = [n for n in carrying if not selector_misses(pod, n)]
    # A taint explains the wait only on a node the pod could use but for it: one that carries the
    # resource it asks for and matches its selector. With none carrying it, the resource is why; with
    # none selected, the selector is (another pool's or a sick node's taint is not the pod's answer).
    return scheduler_reasons(
        pod,
        failures,
        taint_nodes=selected if cands.carrying else [],
        selector_nodes=[] if selected or not selector else carrying,
        candidates=[],
    )


def elsewhere_in_fleet(
    nodes: Sequence[K8sObject], cands: Candidates, via_dra: frozenset[str] = frozenset()
) -> list[Finding]:
    """One info line for faults on GPU nodes the pod could not use: noise here, news for the digest.
    Nodes that publish their GPUs through DRA (`via_dra`) advertise nothing by design."""
    lines: list[str] = []
    for node in nodes:
        name = o.name(node)
        if name in cands or name not in cands.excluded or not_for_pods(node):
            continue  # a node meant for VMs or no operands advertises nothing by design
        sick = [
            f"{r} capacity {c}, allocatable {a}" for r, (c, a) in sorted(o.allocatable_gaps(node).items())
        ]
        if not o.advertised(node) and name not in via_dra:
            sick.append("advertises no GPU resource")
        sick += [
            c for c in node_conditions(node) if c.startswith("condition Ready=") and "Ready=True" not in c
        ]
        if sick:
            lines.append(f"{name}: {'; '.join(sick)} (not a candidate: {cands.excluded[name]})")
    if not lines:
        return []
    return [
        finding(
            "L1_ELSEWHERE_IN_FLEET",
            f"elsewhere in the fleet: {len(lines)} GPU node(s) this pod could not use have lost or unadvertised "
            "GPUs or are not Ready; they do not explain this pod (the daily digest lists the lost GPUs)",
            evidence=listed(lines),
            commands=[capacity_columns(o.GPU_RESOURCE)],
        )
    ]
