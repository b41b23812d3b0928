"""Dynamic Resource Allocation rules (spec/findings.md, "Dynamic Resource Allocation (DRA)").

Layer 1 judges a pod that uses DRA GPUs by the DRA table instead of the
extended-resource one: its claims against the inventory the NVIDIA DRA driver
publishes (CEL selectors evaluated for real), device taints, and the devices
other claims hold. Layer 2 asks whether the ComputeDomain a claim's channel
belongs to has all its IMEX daemons. The facts come from layers/facts/dra.py.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from layers.facts import dra
from layers.facts import drareads as reads
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext, component
from layers.facts.deployments import DRA_SELECTOR, dra_plugin_container
from layers.facts.devicecel import compile_selector
from layers.facts.dra import Device, Inventory, Matcher, Request
from layers.facts.placement import (
    MAX_LISTED,
    listed,
    one_node,
)
from layers.facts.schedmsg import SchedulingFailure
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

DAY_S = 24 * 3600
SLICES_CMD = f"kubectl get resourceslices --field-selector spec.driver={dra.DRIVER} -o wide"
DRIVER_PODS_CMD = f"kubectl get pods -A -o wide -l '{DRA_SELECTOR}'"
# What the scheduler's DynamicResources plugin says (pkg/scheduler/framework/plugins/dynamicresources).
SCHEDULER_PHRASES = (
    "cannot allocate all claims",
    "resourceclaim not available on the node",
    "does not exist",
    "resourceclaim",
    "resource claim",
    "device class",
)


def _slice_cmd(node: str) -> str:
    return (
        f"kubectl get resourceslices --field-selector spec.driver={dra.DRIVER},spec.nodeName={node} -o yaml"
    )


def _cannot(layer: int, what: str, err: SourceError) -> Finding:
    return unknown(layer, f"could not read {what}: {err}")


# --- the tainted devices -------------------------------------------------------------------------


def tainted_finding(
    node: str, devices: Sequence[Device], own: frozenset[tuple[str, str, str]] = frozenset()
) -> Finding:
    """L1_DRA_DEVICE_TAINTED for one node: its GPUs with a NoSchedule/NoExecute taint."""
    lines = []
    for d in devices:
        mine = " (allocated to this pod)" if d.ref in own else ""
        for t in d.blocking_taints:
            source = f", from DeviceTaintRule {t.rule}" if t.rule else ""
            added = f", added {t.time_added}" if t.time_added else ""
            lines.append(f"{node} {d.label}: taint {t.text}{added}{source}{mine}")
    keys = sorted({t.key for d in devices for t in d.blocking_taints})
    return finding(
        "L1_DRA_DEVICE_TAINTED",
        f"{node} publishes {len(devices)} GPU(s) tainted {', '.join(keys)}: the DRA driver took them out "
        "of service, look at the card",
        evidence=listed(lines),
        commands=[_slice_cmd(node), "kubectl get devicetaintrules -o wide"],
        node=node,
    )


def tainted_on(inventory: Inventory, nodes: Iterable[str]) -> dict[str, list[Device]]:
    out: dict[str, list[Device]] = {}
    for n in nodes:
        hit = [d for d in inventory.on(n) if d.blocking_taints]
        if hit:
            out[n] = hit
    return out


# --- layer 1 -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Need:
    """One request of an unallocated claim, with the claim it belongs to."""

    claim: str
    request: Request

    @property
    def count(self) -> int:
        return self.request.count if self.request.mode == "ExactCount" else 1


def _gpu_candidates(ctx: WalkContext) -> list[str]:
    return ctx.candidates().ordered_names()


def bound_pod(ctx: WalkContext, node: str) -> list[Finding]:
    """A scheduled DRA pod: taints on its node's GPUs (its own allocation marked)."""
    try:
        inv = reads.inventory(ctx)
    except SourceError as err:
        return [_cannot(1, f"the ResourceSlices of {node}", err)]
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
        return [_cannot(1, f"the ResourceClaims of {ctx.target.label}", err)]
    try:
        classes = reads.classes(ctx)
    except SourceError as err:
        out.append(_cannot(1, "the DeviceClasses", err))
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
    gpu_needs = [
        n for n in needs if any(dra.is_gpu_class(r.device_class, classes or {}) for r in n.request.options())
    ]
    out.append(claim_pending(ctx, states, needs, failures))
    if classes is not None:
        out += class_missing(needs, classes, failures)
    try:
        inv = reads.inventory(ctx)
    except SourceError as err:
        out.append(_cannot(1, f"the ResourceSlices of driver {dra.DRIVER}", err))
        return out
    try:
        reads.taint_rules(ctx)
    except SourceError as err:
        out.append(_cannot(1, "the DeviceTaintRules (taints they add are not counted)", err))
    out += problems_finding(inv)
    candidates = _gpu_candidates(ctx)
    if not inv.devices:
        out.append(no_devices_anywhere(inv))
        return out
    silent = [n for n in candidates if not inv.on(n)]
    out += [no_devices_on(n) for n in silent[:MAX_LISTED]]
    if len(silent) > MAX_LISTED:
        out.append(
            finding(
                "L1_DRA_NO_DEVICES",
                f"{len(silent) - MAX_LISTED} more GPU nodes publish no ResourceSlice of driver {dra.DRIVER}",
                evidence=listed(silent[MAX_LISTED:]),
                commands=[SLICES_CMD],
            )
        )
    tainted = tainted_on(inv, candidates)
    out += [tainted_finding(n, ds) for n, ds in list(tainted.items())[:MAX_LISTED]]
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
        out.append(selector_broken(broken, m))
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
        out.append(_cannot(1, "the ResourceClaims to count the devices other claims hold", err))
        return out
    exhausted = devices_exhausted(gpu_needs, {n: fitting[n] for n in satisfied}, held, tainted)
    if exhausted:
        out.append(exhausted)
    return out


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
    pending = sorted({n.claim for n in needs})
    claims_cmd = f"kubectl get resourceclaims -n {ns} -o wide"
    return finding(
        "L1_DRA_CLAIM_PENDING",
        f"{ns}/{name} waits for its DRA claim(s) {', '.join(pending) or '(none unallocated)'} to be allocated",
        evidence=evidence,
        commands=[claims_cmd, f"kubectl describe pod -n {ns} {name} | sed -n '/Events/,$p'", SLICES_CMD],
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


def problems_finding(inv: Inventory) -> list[Finding]:
    if not inv.problems:
        return []
    return [
        unknown(
            1,
            f"{len(inv.problems)} part(s) of the published GPU inventory could not be read and were left out",
            evidence=listed(list(inv.problems)),
        )
    ]


def no_devices_anywhere(inv: Inventory) -> Finding:
    why = f"{inv.slices} slice(s) of the driver, none with a current device" if inv.slices else "none exists"
    return finding(
        "L1_DRA_NO_DEVICES",
        f"no ResourceSlice of driver {dra.DRIVER} publishes a GPU: the DRA kubelet plugin is not running anywhere",
        evidence=[f"ResourceSlices of driver {dra.DRIVER}: {why}"],
        commands=[SLICES_CMD, DRIVER_PODS_CMD],
    )


def no_devices_on(node: str) -> Finding:
    return finding(
        "L1_DRA_NO_DEVICES",
        f"{node} is a GPU node but publishes no ResourceSlice of driver {dra.DRIVER}: the DRA kubelet plugin "
        "is not running there",
        evidence=[f"{node}: no ResourceSlice with spec.driver={dra.DRIVER}, spec.nodeName={node}"],
        commands=[
            _slice_cmd(node),
            f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} | grep -i dra",
        ],
        node=node,
    )


def selector_broken(expressions: Sequence[str], m: Matcher) -> Finding:
    lines = [f"{e}: {m.errors[e]}" for e in expressions]
    return finding(
        "L1_DRA_SELECTOR_UNSATISFIED",
        f"a CEL selector of the claim cannot be evaluated ({m.errors[expressions[0]]}): "
        "the scheduler cannot allocate it on any node; fix the expression",
        evidence=lines,
        commands=[
            "kubectl get resourceclaims -A -o yaml | grep -A3 'cel:'",
            "kubectl get deviceclasses -o yaml",
        ],
    )


def _published_values(expressions: Sequence[str], devices: Iterable[tuple[str, Device]]) -> list[str]:
    """The values nodes publish for the attributes and capacities the expressions name."""
    names: set[str] = set()
    for e in expressions:
        sel = compile_selector(e)
        names |= set(sel.names or ())
    seen: Counter[tuple[str, str]] = Counter()
    nodes_of: dict[tuple[str, str], set[str]] = defaultdict(set)
    for node, d in devices:
        for qualified in (*d.facts.attributes, *d.facts.capacity):
            ident = qualified.rpartition("/")[2]
            if ident in names and ident not in ("uuid",):
                value = d.attribute(qualified) or d.facts.capacity.get(qualified, "")
                seen[(qualified, value)] += 1
                nodes_of[(qualified, value)].add(node)
    return [
        f"published {k}={v!r} on {seen[(k, v)]} device(s) of {len(nodes_of[(k, v)])} node(s)"
        for k, v in sorted(seen)
    ][:MAX_LISTED]


def selector_unsatisfied(
    needs: Sequence[Need], fitting: dict[str, list[list[Device]]], inv: Inventory, m: Matcher
) -> Finding:
    lines = []
    for i, need in enumerate(needs):
        for node, per in fitting.items():
            lines.append(
                f"{node}: {len(per[i])} of {len(inv.on(node))} GPU(s) match {need.claim} "
                f"request {need.request.name}, {need.count} needed"
            )
    expressions = [e for n in needs for r in n.request.options() for e in (*m_class(m, r), *r.selectors)]
    exprs = list(dict.fromkeys(expressions))
    devices = [(n, d) for n in fitting for d in inv.on(n)]
    return finding(
        "L1_DRA_SELECTOR_UNSATISFIED",
        f"no candidate node publishes GPUs that satisfy the selectors and count of {needs[0].claim}: "
        "change the selector or add such GPUs",
        evidence=[*(f"selector: {e}" for e in exprs), *listed(lines), *_published_values(exprs, devices)],
        commands=[SLICES_CMD.replace("-o wide", "-o yaml"), "kubectl get deviceclasses -o yaml"],
        node=one_node(list(fitting)),
    )


def m_class(m: Matcher, r: Request) -> tuple[str, ...]:
    cls = m.classes.get(r.device_class)
    return cls.selectors if cls else ()


def devices_exhausted(
    needs: Sequence[Need],
    fitting: dict[str, list[list[Device]]],
    held: dict[tuple[str, str, str], str],
    tainted: dict[str, list[Device]],
) -> Finding | None:
    """Matching devices exist on some node, but on every such node other claims hold too many of them."""
    lines = []
    for node, per in fitting.items():
        short = False
        for i, need in enumerate(needs):
            usable = [
                d for d in per[i] if not any(not dra.tolerated(need.request, t) for t in d.blocking_taints)
            ]
            free = [d for d in usable if d.ref not in held]
            holders = sorted({held[d.ref] for d in usable if d.ref in held})
            # allocationMode All takes every matching device of the node: one held or tainted is one too many.
            wanted = len(per[i]) if need.request.mode == "All" else need.count
            if len(free) < wanted:
                short = True
                shown = ", ".join(holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3 else "")
                lines.append(
                    f"{node}: {len(per[i])} matching, {len(per[i]) - len(usable)} tainted, "
                    f"{len(usable) - len(free)} taken by {shown or 'no claim'}, {len(free)} free < {wanted}"
                )
        if not short:
            return None  # one node has room: not a capacity question
    if all(not any(d.ref in held for i in range(len(needs)) for d in per[i]) for per in fitting.values()):
        return None  # nothing taken: taints explain it (L1_DRA_DEVICE_TAINTED)
    return finding(
        "L1_DRA_DEVICES_EXHAUSTED",
        f"GPUs matching {needs[0].claim} exist on {len(fitting)} node(s) but other claims hold them all: "
        "a capacity question (DRA claims are not preempted); wait, or free a claim",
        evidence=listed(lines),
        commands=["kubectl get resourceclaims -A -o wide | grep -v pending", SLICES_CMD],
        node=one_node(list(fitting)),
    )


# --- layer 5: what the driver's device taints say about the card ----------------------------------


@dataclass
class TaintXids:
    """Xid number -> evidence lines, devices, and whether any taint keeps the device from pods."""

    lines: dict[int, list[str]]
    devices: dict[int, set[str]]
    blocking: dict[int, bool]


def card_evidence(ctx: WalkContext, node: str) -> tuple[TaintXids, list[Finding]]:
    """The node's device taints: `gpu.nvidia.com/xid=N` as Xid N, `gpu-lost` as an unhealthy device,
    `unmonitored` as a check that cannot run. Nothing for a node without DRA slices."""
    xids = TaintXids({}, {}, {})
    try:
        devices = reads.inventory(ctx).on(node)
    except SourceError as err:
        if err.kind == "forbidden":
            return xids, [_cannot(5, f"the ResourceSlices of {node} (DRA device taints)", err)]
        return xids, []
    lost: list[str] = []
    unmonitored: list[str] = []
    heard, log_problems = plugin_health_lines(ctx, node) if devices else ({}, [])
    tainted_uuids = {d.attribute("uuid") for d in devices if d.taints}
    for d in devices:
        uuid = d.attribute("uuid") or d.name
        for t in d.taints:
            line = f"[ResourceSlice {d.slice}] {d.label}: taint {t.text}" + (
                f", added {t.time_added}" if t.time_added else ""
            )
            if t.key == dra.TAINT_XID and t.value.isdigit():
                n = int(t.value)
                xids.lines.setdefault(n, []).append(
                    line + ("" if t.blocking else " (effect None: the driver ignores this Xid)")
                )
                xids.devices.setdefault(n, set()).add(uuid)
                xids.blocking[n] = xids.blocking.get(n, False) or t.blocking
            elif t.key == dra.TAINT_GPU_LOST:
                lost.append(f"{uuid}: GPU lost — {line}")
            elif t.key == dra.TAINT_UNMONITORED:
                unmonitored.append(line)
    for number, devs in xids.devices.items():
        for uuid in sorted(devs):
            xids.lines[number] += heard.get(uuid, [])
    out: list[Finding] = list(log_problems)
    unseen = {u: lines for u, lines in heard.items() if u not in tainted_uuids}
    if unseen:
        out.append(
            finding(
                "L5_DEVICE_UNHEALTHY",
                f"the DRA kubelet plugin on {node} received health events for {len(unseen)} GPU(s) its "
                "ResourceSlice does not show tainted (the republish may have failed): drain the node and check them",
                evidence=[line for lines in unseen.values() for line in lines][:MAX_LISTED],
                commands=[_slice_cmd(node)],
                node=node,
            )
        )
    if lost:
        out.append(
            finding(
                "L5_DEVICE_UNHEALTHY",
                f"the DRA driver on {node} tainted {len(lost)} GPU(s) gpu-lost: the GPU fell off the bus or "
                "stopped answering NVML — drain the node, reset or reseat the GPU",
                evidence=lost,
                commands=[_slice_cmd(node), f"kubectl describe node {node}"],
                node=node,
            )
        )
    if unmonitored:
        out.append(
            unknown(
                5,
                f"the DRA driver cannot watch {len(unmonitored)} GPU(s) on {node} for Xids (taint "
                f"{dra.TAINT_UNMONITORED}): their health is not reported by the driver",
                node=node,
                evidence=unmonitored,
            )
        )
    return xids, out


# The kubelet plugin's own words (cmd/gpu-kubelet-plugin/driver.go, device_health.go).
_HEALTH_EVENT = re.compile(
    r"Received (?P<type>[\w-]+) health event for device (?P<uuid>(?:GPU|MIG)-[0-9A-Za-z-]+)"
)
_PUBLISH_FAILED = re.compile(r"Failed to publish resources after taint update")


def plugin_health_lines(ctx: WalkContext, node: str) -> tuple[dict[str, list[str]], list[Finding]]:
    """GPU UUID -> the DRA kubelet plugin's health-event lines of the last 24 h (its GPU container)."""
    try:
        pods = ctx.operator_pods_on(node, "dra-kubelet-plugin")
    except SourceError as err:
        return {}, [_cannot(5, f"the DRA kubelet plugin pod on {node}", err)]
    now = ctx.telemetry.now()
    heard: dict[str, list[str]] = {}
    problems: list[Finding] = []
    for pod in pods:
        ns, name = o.namespace(pod) or "", o.name(pod)
        container = dra_plugin_container(pod, dra.DRIVER)
        if container is None:
            continue  # this plugin pod serves no GPUs (the chart's gpu plugin disabled)
        for previous in (False, True):
            try:
                text = ctx.log(ns, name, container, previous)
            except SourceError as err:
                problems.append(_cannot(5, f"the log of the DRA kubelet plugin {ns}/{name} on {node}", err))
                break
            for line in sig.lines_of(text):
                ts = sig.line_time(line, now)
                if ts is not None and ts < now - DAY_S:
                    continue
                m = _HEALTH_EVENT.search(line)
                where = f"[{name}/{container}{' previous' if previous else ''}] "
                if m:
                    heard.setdefault(m.group("uuid"), []).append(where + sig.clip(line))
                elif _PUBLISH_FAILED.search(line):
                    for lines in heard.values():
                        lines.append(where + sig.clip(line))
    return heard, problems


# --- layer 2: the ComputeDomain a claim's IMEX channel belongs to --------------------------------


def compute_domains(ctx: WalkContext) -> list[Finding]:
    """L2_COMPUTE_DOMAIN_NOT_READY for each ComputeDomain the pod's channel claims use that is not Ready."""
    pod = ctx.pod
    if pod is None or not dra.pod_claims(pod):
        return []
    try:
        states = reads.pod_claims(ctx)
    except SourceError as err:
        return [_cannot(2, f"the ResourceClaims of {ctx.target.label}", err)]
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
        return [_cannot(2, "the ComputeDomains (resource.nvidia.com)", err)]
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
            evidence.append(f"daemon {o.namespace(p)}/{o.name(p)} on {where}: {_pod_state(p)}")
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
    for p in pods:
        if component(p) != "dra-controller" or o.pod_ready(p):
            continue
        out.append(f"DRA controller {o.namespace(p)}/{o.name(p)} is not Ready: {_pod_state(p)}")
        for c in o.containers(p):
            try:
                text = ctx.log(o.namespace(p) or "", o.name(p), str(c.get("name")), previous=True)
            except SourceError as err:
                out.append(f"its log not read: {err}")
                break
            out += [f"{c.get('name')} (previous): {line}" for line in sig.tail(text, 2)]
    return out


def _missing(wanted: object, joined: Sequence[dict[str, object]]) -> str:
    if isinstance(wanted, int) and wanted > len(joined):
        return f", {wanted - len(joined)} node(s) never joined"
    return ""


def _pod_state(pod: K8sObject) -> str:
    for _init, s in o.iter_all_statuses(pod):
        reason = o.waiting_reason(s) or o.last_terminated_reason(s)
        if reason:
            return f"container {s.get('name')} {reason}, restarts {s.get('restartCount') or 0}"
    return f"phase {o.pod_phase(pod)}, not Ready"
