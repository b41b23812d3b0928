"""Layer 5 — the card itself: unhealthy devices, Xids, remapped rows, clock events.

Two witnesses: the device plugin's log (it marks devices unhealthy and sees
Xids DCGM cannot report: 79, 119, 120; read and parsed in layers/facts/pluginlog.py)
and DCGM's series. "No Xid" is never concluded from DCGM alone; when telemetry is
down the log is still read.

What each Xid means is said in layers/cardxid.py, DCGM's memory-row and clock counters are
judged in layers/carddcgm.py; this module walks the examined nodes and reads their evidence.
"""

from __future__ import annotations

from msgspec.structs import replace

from layers import carddcgm, cardxid
from layers.dra import devicehealth
from layers.facts import healthagents as ha
from layers.facts import objects as o
from layers.facts import resourcehealth as rh
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.facts.fold import fold, shown
from layers.facts.pluginlog import ALL_DEVICES, LAYER, PluginLog, read_plugin_log
from layers.findings import Finding, LayerResult, finding, unknown
from layers.sources import SourceError


def check(ctx: WalkContext) -> LayerResult:
    got = wf.examined_walk_facts(ctx, LAYER)
    if isinstance(got, LayerResult):
        return got
    nodes, facts = got
    findings: list[Finding] = []
    if facts.error is not None:
        findings.append(
            unknown(
                LAYER,
                "remapped rows, row-remap failures, clock events and DCGM's Xids not checked (the device "
                f"plugin log was read): {facts.error}",
                node=ctx.bound_node,
            )
        )
    read_logs = _nodes_to_read(ctx, nodes, facts)
    for node in nodes:
        findings += check_node(ctx, node, facts, read_log=node in read_logs)
    if len(read_logs) < len(nodes):
        unread = [n for n in nodes if n not in read_logs]
        # Not ok: "no Xid" is never concluded from DCGM alone (79, 119, 120), and these logs were not read.
        findings.append(
            unknown(
                LAYER,
                f"{len(unread)} examined GPU nodes show no capacity gap and no DCGM signal, but their device "
                f"plugin logs were not read (only {LOG_NODE_LIMIT} are, when a pending pod examines the whole "
                "fleet): unhealthy devices and the Xids DCGM cannot report (79, 119, 120) were not checked there "
                "— walk one of them by name to read its log",
                evidence=[
                    f"device plugin logs read on {len(read_logs)} of {len(nodes)} examined nodes",
                    f"not read: {shown(unread)}",
                ],
            )
        )
    return LayerResult.build(LAYER, fold(findings))


# Past this many examined nodes (a pending pod examines every GPU node), the device
# plugin's log is read only where something already points at the card: one log read
# per node of a 5,000-node fleet would take minutes.
LOG_NODE_LIMIT = 50


def _nodes_to_read(ctx: WalkContext, nodes: list[str], facts: wf.WalkFacts) -> set[str]:
    if len(nodes) <= LOG_NODE_LIMIT:
        return set(nodes)
    suspects: list[str] = []
    quiet: list[str] = []
    for node in nodes:
        try:
            obj = ctx.node(node)
        except SourceError:
            obj = None
        gpus = facts.on(node)
        signal = any(
            g.last_xid_recent
            or g.xid_counts_24h
            or g.xid_totals_24h
            or g.rows_rising
            or g.row_remap_failure
            or g.row_remap_pending
            for g in gpus
        )
        (suspects if signal or (obj is not None and o.allocatable_gaps(obj)) else quiet).append(node)
    return set(suspects) | set(quiet[: max(0, LOG_NODE_LIMIT - len(suspects))])


def check_node(ctx: WalkContext, node: str, facts: wf.WalkFacts, *, read_log: bool = True) -> list[Finding]:
    out: list[Finding] = []
    try:
        obj = ctx.node(node)
    except SourceError as err:
        obj = None
        out.append(
            unknown(
                LAYER,
                f"could not read node {node} to compare capacity and allocatable: {err.hint() or err}",
                node=node,
            )
        )
    if obj is not None:
        out += allocatable_below_capacity(node, obj)
    log, problems = read_plugin_log(ctx, node) if read_log else (None, [])
    out += problems
    gpus = facts.on(node)
    if facts.error is None and not gpus:
        out.append(
            unknown(
                LAYER,
                f"no DCGM series for node {node} in {facts.source}: remapped rows, row-remap failures, clock events "
                "and DCGM's Xids not checked — check the node's dcgm-exporter and that it is scraped",
                node=node,
            )
        )
    if log is not None and log.unhealthy:
        out.append(device_unhealthy(node, log, o.node_replicas(obj) if obj is not None else 1))
    reported, unknown_health = kubelet_health(ctx, node)
    out += reported
    taints, dra_findings = devicehealth.card_evidence(ctx, node)
    out += dra_findings
    out += cardxid.xid_findings(
        node, log, gpus, facts.error, taints, ha.gke_xids(obj) if obj is not None else None
    )
    out += carddcgm.row_remaps(node, gpus)
    out += carddcgm.clock_events(node, gpus)
    history = cardxid.old_last_xids(node, gpus, log)
    if not out and not read_log:
        return history  # counted in the layer's one finding for the nodes whose log was not read
    if unknown_health:
        # `Unknown` is the kubelet not knowing, not a fault: evidence on the node's first line.
        out = _with_evidence(out, unknown_health) if out else out
    if not out:
        out.append(
            finding(
                "L5_OK",
                f"node {node}: no unhealthy device, Xid in the last 24 h, remapped-row growth or slowdown clock events "
                "(device plugin log and DCGM both read)",
                evidence=[
                    f"device plugin log read: {', '.join(log.read) if log else 'no'}",
                    f"GPUs with DCGM series: {len(gpus)}",
                    *unknown_health,
                ],
                node=node,
            )
        )
    return [*out, *history]


def _with_evidence(findings: list[Finding], lines: list[str]) -> list[Finding]:
    first = findings[0]
    return [replace(first, evidence=(*first.evidence, *lines)), *findings[1:]]


def kubelet_health(ctx: WalkContext, node: str) -> tuple[list[Finding], list[str]]:
    """The kubelet's allocatedResourcesStatus for the GPUs of the pods walked on this node: the target
    pod on its node, every pod on the node in a node walk. (L5_DEVICE_UNHEALTHY findings, the
    `Unknown` lines as evidence.)"""
    if ctx.pod is not None:
        pods = [ctx.pod] if node == ctx.bound_node else []
    else:
        try:
            pods = ctx.pods_on(node)
        except SourceError:
            pods = []  # the node's other checks say what could not be read
    reports = [h for p in pods for h in rh.device_health(p) if rh.is_gpu(h)]
    bad = [h for h in reports if h.health == "Unhealthy"]
    unsure = [
        f"{h.line} (the kubelet cannot tell: evidence, not a fault)" for h in reports if h.health == "Unknown"
    ]
    if not bad:
        return [], unsure
    ids = list(dict.fromkeys(h.resource_id for h in bad))
    pods_named = list(dict.fromkeys(f"{h.pod[0]}/{h.pod[1]}" for h in bad))
    ns, name = bad[0].pod
    return [
        finding(
            "L5_DEVICE_UNHEALTHY",
            f"the kubelet reports {len(ids)} device{'s' if len(ids) > 1 else ''} allocated to "
            f"{', '.join(pods_named)} on {node} Unhealthy ({', '.join(ids)}): the device plugin or DRA driver "
            "marked it — drain the node and check the card (its Xid is in the plugin's log and DCGM)",
            evidence=[h.line for h in bad] + unsure,
            commands=[
                f"kubectl get pod -n {ns} {name} -o jsonpath='{{range .status.containerStatuses[*]}}"
                '{.name}{"\\t"}{.allocatedResourcesStatus}{"\\n"}{end}\'',
            ],
            node=node,
        )
    ], []


def allocatable_below_capacity(node: str, obj: dict[str, object]) -> list[Finding]:
    out = []
    for resource, (cap, alloc) in sorted(o.allocatable_gaps(obj).items()):
        # On a time-sliced node the numbers count replicas; the summary counts GPUs (spec: layer 5).
        k = o.gpus_of(obj, resource, cap - alloc)
        note = o.sliced_note(obj, resource, cap, alloc)
        lost = f"{k} GPU{'s' if k > 1 else ''}"
        if o.counts_mig_devices(obj, resource):
            lost = f"{cap - alloc} MIG device{'s' if cap - alloc > 1 else ''}"
        elif note:
            lost += f" ({cap - alloc} replicas)"
        out.append(
            finding(
                "L5_ALLOCATABLE_BELOW_CAPACITY",
                f"node {node}: {resource} capacity {cap}, allocatable {alloc}"
                + (f" (time-sliced, {o.replicas_per_gpu(obj, resource)} replicas per GPU)" if note else "")
                + f" — {lost} reported unhealthy by the device plugin; drain the node and check the card",
                evidence=[
                    f"status.capacity[{resource}]={cap}",
                    f"status.allocatable[{resource}]={alloc}",
                    *([note] if note else []),
                ],
                commands=[f"kubectl describe node {node} | sed -n '/Capacity/,/Allocated resources/p'"],
                node=node,
            )
        )
    return out


def device_unhealthy(node: str, log: PluginLog, replicas: int = 1) -> Finding:
    """One line per GPU: a time-sliced GPU's replicas (`GPU-…::0` … `::3`) are one GPU taken out."""
    by_gpu: dict[str, list[tuple[str, int | None, str]]] = {}
    for device, (number, line) in sorted(log.unhealthy.items()):
        by_gpu.setdefault(o.physical_device(device), []).append((device, number, line))
    evidence = []
    for gpu, marks in by_gpu.items():
        named = [d for d, _n, _l in marks if d != gpu]
        numbers = sorted({n for _d, n, _l in marks if n is not None})
        which = f" (replicas {', '.join(d[len(gpu) :] for d in named)})" if named else ""
        evidence.append(
            f"{gpu}{which}: {'Xid ' + ', '.join(map(str, numbers)) if numbers else 'no Xid given'} — {marks[0][2]}"
        )
    shared = replicas > 1 or any(d != o.physical_device(d) for d in log.unhealthy)
    xids = sorted({n for n, _ in log.unhealthy.values() if n is not None})
    why = f" after Xid {', '.join(map(str, xids))}" if xids else ""
    count = len(by_gpu)
    if shared:
        per = max([replicas, *(len(m) for m in by_gpu.values())])
        what = f"{count} GPU{'s' if count > 1 else ''} ({count * per} replicas)"
        evidence.append(
            f"time-sliced: the plugin advertises each GPU {per} times (device IDs <uuid>::<replica>); "
            "counted here as GPUs"
        )
    elif ALL_DEVICES in by_gpu:
        what = ALL_DEVICES  # not "1 device": the plugin took every device of the node out
    else:
        what = f"{count} device{'s' if count > 1 else ''}"
    act = "act on the Xid" if xids else "check the card (the plugin gave no Xid)"
    return finding(
        "L5_DEVICE_UNHEALTHY",
        f"the device plugin on {node} marked {what} unhealthy{why} ({', '.join(by_gpu)}): "
        f"it stays unallocatable until the plugin restarts — drain the node and {act}",
        evidence=evidence,
        commands=log.commands,
        node=node,
    )
