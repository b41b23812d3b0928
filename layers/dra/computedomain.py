"""Layer 2 on a DRA cluster: the ComputeDomain (`resource.nvidia.com`) a claim's IMEX channel belongs
to, and whether all its IMEX daemons have joined (spec/findings.md, DRA: `L2_COMPUTE_DOMAIN_NOT_READY`;
pods using its channel sit in ContainerCreating until they have)."""

from __future__ import annotations

from collections.abc import Sequence

from layers.dra import cannot
from layers.facts import dra
from layers.facts import drareads as reads
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext, component
from layers.facts.deployments import DRA_SELECTOR
from layers.facts.drastart import pod_state
from layers.facts.logs import LogReads
from layers.findings import Finding, finding
from layers.sources import K8sObject, SourceError


def compute_domains(ctx: WalkContext) -> list[Finding]:
    """L2_COMPUTE_DOMAIN_NOT_READY for each ComputeDomain the pod's channel claims use that is not Ready."""
    pod = ctx.pod
    if pod is None or not dra.pod_claims(pod):
        return []
    try:
        states = reads.pod_claims(ctx)
    except SourceError as err:
        return [cannot(2, f"the ResourceClaims of {ctx.target.label}", err)]
    channel = [
        s
        for s in states
        if any(opt.device_class == dra.CHANNEL_CLASS for r in s.requests for opt in r.options())
    ]
    if not channel:
        return []
    try:
        domains = ctx.custom("resource.nvidia.com", "v1beta1", "computedomains")
    except SourceError as err:
        return [cannot(2, "the ComputeDomains (resource.nvidia.com)", err)]
    ns = ctx.target.namespace or ""
    out = []
    for cd in domains:
        if o.namespace(cd) != ns:
            continue
        spec = cd.get("spec") or {}
        template = ((spec.get("channel") or {}).get("resourceClaimTemplate") or {}).get("name")
        uid = str((cd.get("metadata") or {}).get("uid") or "")
        used = [
            s
            for s in channel
            if (template and s.entry.template == template)
            or (s.claim is not None and uid and uid in s.claim.domain_ids)
        ]
        if not used:
            continue
        status = cd.get("status") or {}
        if status.get("status") == "Ready":
            continue
        out.append(domain_not_ready(ctx, cd, used))
    return out


def domain_not_ready(ctx: WalkContext, cd: K8sObject, used: Sequence[reads.PodClaimState]) -> Finding:
    ns, name = o.namespace(cd), o.name(cd)
    spec, status = cd.get("spec") or {}, cd.get("status") or {}
    wanted = spec.get("numNodes")
    joined = [n for n in status.get("nodes") or [] if isinstance(n, dict)]
    ready = [str(n.get("name")) for n in joined if n.get("status", "Ready") == "Ready"]
    not_ready = [str(n.get("name")) for n in joined if n.get("status", "Ready") != "Ready"]
    evidence = [
        f"ComputeDomain {ns}/{name}: status {status.get('status') or '(none yet)'}, numNodes {wanted}",
        f"IMEX daemons joined: {len(joined)}, ready: {len(ready)} ({', '.join(ready) or 'none'})",
    ]
    if not_ready:
        evidence.append(f"not ready: {', '.join(not_ready)}")
    uid = str((cd.get("metadata") or {}).get("uid") or "")
    daemons: list[K8sObject] = []
    if uid:
        try:
            daemons = ctx.cluster.list_pods(label_selector=f"resource.nvidia.com/computeDomain={uid}")
        except SourceError as err:
            evidence.append(f"IMEX daemon pods not read: {err}")
    for p in daemons:
        if not o.pod_ready(p):
            where = o.pod_node(p) or "no node yet"
            evidence.append(f"daemon {o.namespace(p)}/{o.name(p)} on {where}: {pod_state(p)}")
    missing = _missing(wanted, joined)
    evidence += [f"claim: {s.label}" for s in used]
    evidence += _controllers_down(ctx)
    # The kubelet's own words: it cannot prepare the channel until this node's daemon is ready.
    pod = ctx.pod
    if pod is not None:
        try:
            events = ctx.events("Pod", o.namespace(pod), o.name(pod))
        except SourceError as err:
            evidence.append(f"events of the pod not read: {err}")
            events = []
        prepare = [e for e in events if e.get("reason") == "FailedPrepareDynamicResources"]
        evidence += [sig.event_line(e) for e in sorted(prepare, key=sig.event_time)[-2:]]
    return finding(
        "L2_COMPUTE_DOMAIN_NOT_READY",
        f"ComputeDomain {ns}/{name} is not Ready: {len(ready)} of {wanted if wanted is not None else '?'} "
        f"IMEX daemons ready{missing}; pods using its channel stay in ContainerCreating until every daemon joins",
        evidence=evidence,
        commands=[
            f"kubectl get computedomain -n {ns} {name} -o yaml",
            f"kubectl get pods -A -l resource.nvidia.com/computeDomain={uid or '<uid>'} -o wide",
        ],
        node=ctx.bound_node,
    )


def _controllers_down(ctx: WalkContext) -> list[str]:
    """The DRA driver's controller creates each domain's IMEX daemons: is it running?"""
    try:
        pods = ctx.cluster.list_pods(label_selector=DRA_SELECTOR)
    except SourceError as err:
        return [f"DRA driver controller not read: {err}"]
    out = []
    logs = LogReads(ctx, 2)
    for p in pods:
        if component(p) != "dra-controller" or o.pod_ready(p):
            continue
        out.append(f"DRA controller {o.namespace(p)}/{o.name(p)} is not Ready: {pod_state(p)}")
        for c in o.containers(p):
            text = logs.log(p, str(c.get("name")), previous=True)
            out += [f"{c.get('name')} (previous): {line}" for line in sig.tail(text, 2)]
    return out + [u.summary for u in logs.unknowns()]


def _missing(wanted: object, joined: Sequence[dict[str, object]]) -> str:
    if isinstance(wanted, int) and wanted > len(joined):
        return f", {wanted - len(joined)} node(s) never joined"
    return ""
