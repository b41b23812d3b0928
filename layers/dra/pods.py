"""Layer 1 for a pod that uses DRA GPUs (spec/findings.md, DRA: "DRA pods are judged by the DRA
table"): a bound pod's devices, an unbound pod's claims, their DeviceClasses, and what the inventory
says about them (layers/dra/devices.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from layers.dra import DRIVER_PODS_CMD, SLICES_CMD, cannot
from layers.dra.devices import (
    Need,
    devices_exhausted,
    no_devices_anywhere,
    no_devices_on,
    problems_finding,
    selector_broken,
    selector_unsatisfied,
    tainted_finding,
    tainted_on,
)
from layers.facts import dra, draslices
from layers.facts import drareads as reads
from layers.facts import objects as o
from layers.facts.candidates import untolerated_taints
from layers.facts.context import WalkContext
from layers.facts.dra import Matcher, Request
from layers.facts.draslices import Device
from layers.facts.drastart import pod_state
from layers.facts.fold import fold, shown
from layers.facts.logsigs import event_line
from layers.facts.placement import selector_misses
from layers.facts.schedmsg import SchedulingFailure
from layers.findings import Finding, finding
from layers.sources import K8sObject, SourceError

# What the scheduler's DynamicResources plugin says (pkg/scheduler/framework/plugins/dynamicresources).
SCHEDULER_PHRASES = (
    "cannot allocate all claims",
    "resourceclaim not available on the node",
    "does not exist",
    "resourceclaim",
    "resource claim",
    "device class",
)


def _gpu_candidates(ctx: WalkContext) -> list[str]:
    return ctx.candidates().ordered_names()


def bound_pod(ctx: WalkContext, node: str) -> list[Finding]:
    """A scheduled DRA pod: taints on its node's GPUs (its own allocation marked)."""
    try:
        inv = reads.inventory(ctx)
    except SourceError as err:
        return [cannot(1, f"the ResourceSlices of {node}", err)]
    own: set[tuple[str, str, str]] = set()
    try:
        for st in reads.pod_claims(ctx):
            if st.claim is not None:
                own |= {a.ref for a in st.claim.allocated or ()}
    except SourceError:
        pass  # the taints stand without knowing which device is the pod's
    hit = tainted_on(inv, [node]).get(node)
    return [tainted_finding(node, hit, frozenset(own))] if hit else []


def unbound_pod(ctx: WalkContext, pod: K8sObject, failures: Sequence[SchedulingFailure]) -> list[Finding]:
    out: list[Finding] = []
    try:
        states = reads.pod_claims(ctx)
    except SourceError as err:
        return [cannot(1, f"the ResourceClaims of {ctx.target.label}", err)]
    try:
        classes = reads.classes(ctx)
    except SourceError as err:
        out.append(cannot(1, "the DeviceClasses", err))
        classes = None
    needs = [
        Need(s.claim.key if s.claim else s.entry.name, r)
        for s in states
        if s.claim is None or s.claim.allocated is None
        for r in s.requests
    ]
    for cls, want in sorted(dra.extended_dra_requests(pod).items()):
        needs.append(
            Need(f"extended resource {dra.EXTENDED_PREFIX}{cls}", Request("extended", cls, count=want))
        )
    # A request whose DeviceClass does not exist is L1_DRA_DEVICECLASS_MISSING's: no selector of it is
    # judged (no device can be in a class that is not there; its selector is not the fault).
    gpu_needs = [
        n
        for n in needs
        if any(
            r.device_class in (classes or {}) and dra.is_gpu_class(r.device_class, classes or {})
            for r in n.request.options()
        )
    ]
    out.append(claim_pending(ctx, states, needs, failures))
    # Only where DRA is served (some DeviceClass exists): without resource.k8s.io every named object
    # reads as missing, and L1_DRA_NO_DEVICES says what is (the template is not the fix).
    if classes and any(s.template_missing for s in states):
        out.append(template_missing(ctx, states))
    if classes is not None:
        out += class_missing(needs, classes, failures)
    try:
        inv = reads.inventory(ctx)
    except SourceError as err:
        out.append(cannot(1, f"the ResourceSlices of driver {draslices.DRIVER}", err))
        return out
    try:
        reads.taint_rules(ctx)
    except SourceError as err:
        out.append(cannot(1, "the DeviceTaintRules (taints they add are not counted)", err))
    out += problems_finding(inv)
    candidates = _gpu_candidates(ctx)
    if not inv.devices:
        out.append(no_devices_anywhere(inv))
        return out
    # One finding per silent or tainted candidate, folded past MAX_LISTED nodes (layers/facts/fold.py).
    out += fold([no_devices_on(n, n in inv.empty, _plugin_on(ctx, n)) for n in candidates if not inv.on(n)])
    tainted = tainted_on(inv, candidates)
    out += fold([tainted_finding(n, ds) for n, ds in tainted.items()])
    if not gpu_needs or classes is None:
        return out
    # No candidate publishes the class: judge the class's and the claim's selectors where GPUs are.
    judged = [n for n in candidates if inv.on(n)] or reads.placeable_with_slices(ctx)
    if not judged:
        return out  # no node publishing GPUs admits the pod: the scheduler's reasons say why
    m = reads.matcher(ctx)
    fitting = {n: _fits(m, inv.on(n), gpu_needs) for n in judged}
    broken = [e for e in _expressions(gpu_needs, classes) if e in m.errors]
    if broken:
        out += selector_broken(broken, m)
    satisfied = [
        n for n, per in fitting.items() if all(len(per[i]) >= need.count for i, need in enumerate(gpu_needs))
    ]
    if not satisfied:
        if not broken:
            out.append(selector_unsatisfied(gpu_needs, fitting, inv, m))
        return out
    try:
        held = reads.held_devices(ctx)
    except SourceError as err:
        out.append(cannot(1, "the ResourceClaims to count the devices other claims hold", err))
        return out
    exhausted = devices_exhausted(gpu_needs, {n: fitting[n] for n in satisfied}, held, tainted)
    if exhausted:
        out.append(exhausted)
    return out


def _plugin_on(ctx: WalkContext, node: str) -> str:
    """The node's DRA kubelet plugin pod and its state (Ready, CrashLoopBackOff, Init:0/1 …), or that none runs."""
    try:
        pods = ctx.operator_pods_on(node, "dra-kubelet-plugin")
    except SourceError:
        return ""  # layer 2 reads the node's operator pods and says what it could not
    if not pods:
        return "no DRA kubelet plugin pod runs on the node (its DaemonSet's node selector or tolerations, or a failed create)"
    return "; ".join(f"kubelet plugin {o.namespace(p)}/{o.name(p)}: {pod_state(p)}" for p in pods)


def _expressions(needs: Sequence[Need], classes: dict[str, dra.DeviceClass]) -> list[str]:
    seen: dict[str, None] = {}
    for n in needs:
        for r in n.request.options():
            cls = classes.get(r.device_class)
            for e in (*(cls.selectors if cls else ()), *r.selectors):
                seen[e] = None
    return list(seen)


def _fits(m: Matcher, devices: Sequence[Device], needs: Sequence[Need]) -> list[list[Device]]:
    """Per need: the node's devices that satisfy it (any alternative), ignoring taints and allocation."""
    out = []
    for need in needs:
        best: list[Device] = []
        for option in need.request.options():
            hits = [d for d in devices if m.fits(option, d)]
            if len(hits) >= need.count:
                best = hits
                break
            best = best or hits
        out.append(best)
    return out


def claim_pending(
    ctx: WalkContext,
    states: Sequence[reads.PodClaimState],
    needs: Sequence[Need],
    failures: Sequence[SchedulingFailure],
) -> Finding:
    ns, name = ctx.target.namespace, ctx.target.pod
    evidence: list[str] = []
    for s in states:
        state = "allocated" if s.claim and s.claim.allocated is not None else (s.missing or "not allocated")
        evidence.append(f"{s.label}: {state}")
        for r in s.requests:
            for opt in r.options():
                evidence.append(f"  {opt.text}")
                evidence += [f"  selector: {e}" for e in opt.selectors]
    for n in needs:
        if n.request.name == "extended":
            evidence.append(f"{n.claim}={n.request.count}")
    said = [
        f"scheduler: {f.message}" for f in failures if any(p in f.message.lower() for p in SCHEDULER_PHRASES)
    ]
    evidence += said[-3:] or ["no FailedScheduling message names a claim (events expire)"]
    # A claim not created yet is pending whatever it requests (none, when its template is missing).
    pending = sorted({n.claim for n in needs} | {s.entry.name for s in states if s.claim is None})
    claims_cmd = f"kubectl get resourceclaims -n {ns} -o wide"
    # A claim that does not exist yet waits to be created, not allocated.
    uncreated = {s.entry.name for s in states if s.claim is None}
    wait = "to be created" if pending and set(pending) <= uncreated else "to be allocated"
    summary = f"{ns}/{name} waits for its DRA claim(s) {', '.join(pending)} {wait}"
    if not pending:
        summary, more = _allocated_elsewhere(ctx)
        evidence += more
    return finding(
        "L1_DRA_CLAIM_PENDING",
        summary,
        evidence=evidence,
        commands=[claims_cmd, f"kubectl describe pod -n {ns} {name} | sed -n '/Events/,$p'", SLICES_CMD],
    )


def template_missing(ctx: WalkContext, states: Sequence[reads.PodClaimState]) -> Finding:
    """spec/findings.md, L1_DRA_CLAIM_TEMPLATE_MISSING: the resource claim controller cannot create the
    claim (pkg/controller/resourceclaim: event FailedResourceClaimCreation, `PodResourceClaim <name>:
    resource claim template "<t>": resourceclaimtemplate.resource.k8s.io "<t>" not found`)."""
    ns, name = ctx.target.namespace, ctx.target.pod
    gone = [s for s in states if s.template_missing]
    evidence = [
        f"pod claim {s.entry.name}: ResourceClaimTemplate {ns}/{s.entry.template} does not exist, so no "
        "ResourceClaim is created from it"
        for s in gone
    ]
    try:
        events = [
            e for e in ctx.events("Pod", ns, name or "") if e.get("reason") == "FailedResourceClaimCreation"
        ]
    except SourceError as err:
        events = []
        evidence.append(f"the pod's events could not be read: {err}")
    evidence += [event_line(e) for e in events[-3:]]
    names = ", ".join(sorted({str(s.entry.template) for s in gone}))
    return finding(
        "L1_DRA_CLAIM_TEMPLATE_MISSING",
        f"{ns}/{name} names ResourceClaimTemplate {names}, which does not exist in {ns}: no claim can be "
        "created, so the pod is never scheduled — create the template (or fix the name in the pod spec)",
        evidence=evidence,
        commands=[
            f"kubectl get resourceclaimtemplates -n {ns}",
            f"kubectl get events -n {ns} --field-selector involvedObject.name={name},reason=FailedResourceClaimCreation",
        ],
    )


def _allocated_elsewhere(ctx: WalkContext) -> tuple[str, list[str]]:
    """Every claim is allocated, yet the pod is not bound: an allocated claim (shared with pods already
    placed) pins it to the nodes of its devices, which its own constraints may exclude."""
    ns, name = ctx.target.namespace, ctx.target.pod
    placed = reads.allocated_elsewhere(ctx)
    try:
        nodes = ctx.nodes()
    except SourceError:
        nodes = []
    pod = ctx.pod or {}
    evidence: list[str] = []
    where: list[str] = []
    for claim, selector in placed:
        here = [n for n in nodes if reads.admits(selector, n)]
        where += [o.name(n) for n in here]
        users = ", ".join(claim.reserved_for) or "no pod"
        evidence.append(
            f"claim {claim.key} is allocated on {shown([o.name(n) for n in here]) or 'no node'}, reserved for {users}"
        )
        for n in here:
            why = selector_misses(pod, n) or [f"untolerated taint {t}" for t in untolerated_taints(pod, n)]
            evidence += [f"  {o.name(n)}: {w}" for w in why]
    if not placed:
        return f"{ns}/{name} is not scheduled although its DRA claims are allocated", evidence
    return (
        f"{ns}/{name} is not scheduled although its DRA claim(s) are allocated: they pin it to "
        f"{shown(list(dict.fromkeys(where))) or 'no node'}, where its own node selector, affinity or tolerations "
        "(or that node's room) do not admit it — schedule it with the claim's node, or give it a claim of its own",
        evidence,
    )


def class_missing(
    needs: Sequence[Need], classes: dict[str, dra.DeviceClass], failures: Sequence[SchedulingFailure]
) -> list[Finding]:
    missing: dict[str, list[str]] = defaultdict(list)
    for n in needs:
        for r in n.request.options():
            if r.device_class and r.device_class not in classes:
                missing[r.device_class].append(f"{n.claim} {r.text}")
            elif not r.device_class:
                missing["(none)"].append(f"{n.claim} request {r.name} names no deviceClassName")
    out = []
    for cls, who in sorted(missing.items()):
        said = [
            f"scheduler: {f.message}" for f in failures if "does not exist" in f.message and cls in f.message
        ]
        out.append(
            finding(
                "L1_DRA_DEVICECLASS_MISSING",
                f"DeviceClass {cls} does not exist: the NVIDIA DRA driver is not installed or its classes "
                "were not created",
                evidence=[*who, *said[-1:], f"DeviceClasses present: {', '.join(sorted(classes)) or 'none'}"],
                commands=[
                    "kubectl get deviceclasses",
                    DRIVER_PODS_CMD,
                ],
            )
        )
    return out
