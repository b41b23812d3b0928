"""Layer 5 — the card itself: unhealthy devices, Xids, remapped rows, clock events.

Two witnesses: the device plugin's log (it marks devices unhealthy and sees
Xids DCGM cannot report: 79, 119, 120; read and parsed in layers/facts/pluginlog.py)
and DCGM's series. "No Xid" is never concluded from DCGM alone; when telemetry is
down the log is still read.
"""

from __future__ import annotations

from collections.abc import Iterable

from layers import xid
from layers.dra import devicehealth
from layers.facts import gpufacts as gf
from layers.facts import objects as o
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.facts.fold import fold, shown
from layers.facts.pluginlog import ALL_DEVICES, LAYER, PluginLog, read_plugin_log
from layers.findings import Finding, LayerResult, Severity, finding, unknown
from layers.sources import SourceError

SLOWDOWN_EVENTS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")
_EVIDENCE_LINES = 5


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
            g.last_xid_recent or g.xid_counts_24h or g.xid_totals_24h or g.rows_rising or g.row_remap_failure
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
    taints, dra_findings = devicehealth.card_evidence(ctx, node)
    out += dra_findings
    out += xid_findings(
        node, log, gpus, facts.error, taints, o.condition_xids(obj) if obj is not None else None
    )
    out += row_remaps(node, gpus)
    out += clock_events(node, gpus)
    history = old_last_xids(node, gpus, log)
    if not out and not read_log:
        return history  # counted in the layer's one finding for the nodes whose log was not read
    if not out:
        out.append(
            finding(
                "L5_OK",
                f"node {node}: no unhealthy device, Xid in the last 24 h, remapped-row growth or slowdown clock events "
                "(device plugin log and DCGM both read)",
                evidence=[
                    f"device plugin log read: {', '.join(log.read) if log else 'no'}",
                    f"GPUs with DCGM series: {len(gpus)}",
                ],
                node=node,
            )
        )
    return [*out, *history]


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


def xid_findings(
    node: str,
    log: PluginLog | None,
    gpus: list[gf.GpuFacts],
    telemetry_error: str | None,
    taints: devicehealth.TaintXids | None = None,
    condition: tuple[list[int], str | None] | None = None,
) -> list[Finding]:
    seen: dict[int, list[str]] = {}
    # GKE's plugin keeps the Xids it caught in a node condition until it restarts: they stand, like its marks.
    numbers, line = condition or ([], None)
    for number in numbers:
        seen.setdefault(number, []).append(line or "")
    texts: dict[int, list[str]] = {}
    # A time-sliced GPU's replicas (`GPU-…::1`) name one GPU.
    devices: dict[int, set[str]] = {
        n: {o.physical_device(x) for x in d} for n, d in (log.xid_devices if log else {}).items()
    }
    # The DRA driver's gpu.nvidia.com/xid=N taints; effect None alone (an Xid it ignores) is evidence only.
    quiet: set[int] = set()
    for number, lines in (taints.lines if taints else {}).items():
        seen.setdefault(number, []).extend(lines)
        devices.setdefault(number, set()).update(taints.devices.get(number, ()) if taints else ())
        if taints and not taints.blocking.get(number):
            quiet.add(number)
    for number, lines in (log.xids if log else {}).items():
        seen.setdefault(number, []).extend(lines[:_EVIDENCE_LINES])
        if len(lines) > _EVIDENCE_LINES:
            seen[number].append(f"… {len(lines) - _EVIDENCE_LINES} more log lines with Xid {number}")
        texts.setdefault(number, []).extend(lines)
    quiet -= set(log.xids if log else ())
    for g in gpus:
        quiet -= {g.last_xid if g.last_xid_recent else 0, *g.xid_counts_24h, *g.xid_totals_24h}
        if g.last_xid > 0 and g.last_xid_recent:
            devices.setdefault(g.last_xid, set()).add(g.uuid or g.label)
            msg = f" ({g.last_xid_message})" if g.last_xid_message else ""
            seen.setdefault(g.last_xid, []).append(
                f"DCGM_FI_DEV_XID_ERRORS{g.matcher()} = {g.last_xid}{msg}: the last Xid on {g.label}, "
                "set within the last 24 h (the gauge does not reset; it changed or its series began in the window)"
            )
            if g.last_xid_message:
                texts.setdefault(g.last_xid, []).append(g.last_xid_message)
        for number, peak in g.xid_counts_24h.items():
            devices.setdefault(number, set()).add(g.uuid or g.label)
            seen.setdefault(number, []).append(
                f'DCGM_EXP_XID_ERRORS_COUNT{g.matcher()[:-1]},xid="{number}"}} peaked at {peak:g} in 24 h on {g.label}'
            )
        for number in g.xid_totals_24h:
            devices.setdefault(number, set()).add(g.uuid or g.label)
            seen.setdefault(number, []).append(
                f'DCGM_EXP_XID_ERRORS_TOTAL{g.matcher()[:-1]},xid="{number}"}} changed or first appeared in the '
                f"last 24 h on {g.label} (a counter since the exporter started: its value alone may be days old)"
            )
    out = []
    for number in sorted(seen):
        entry = xid.lookup(number)
        evidence = list(seen[number])
        if telemetry_error is not None:
            evidence.append(f"DCGM telemetry not checked: {telemetry_error}")
        where = f"{node} ({', '.join(sorted(devices[number]))})" if devices.get(number) else node
        summary = f"Xid {number} on {where}, {entry.name}: {entry.meaning} — {entry.advice}"
        if number == 154:
            action = next((a for t in texts.get(number, []) if (a := xid.parse_recovery_action(t))), None)
            summary = (
                f"Xid 154 on {where}: the GPU's recovery action changed to {action!r} — take that action for the Xid it accompanies"
                if action
                else f"Xid 154 on {where}: the GPU's recovery action changed; the action it names is not in this "
                "evidence — read it from the kernel log (dmesg | grep -i xid) and take it"
            )
        out.append(
            finding(
                "L5_XID",
                summary,
                severity=Severity.INFO if number in quiet else entry.severity,
                evidence=[
                    *evidence,
                    f"catalog action: {entry.immediate_action or 'none'} (investigate: {entry.investigatory_action or 'none'})",
                ],
                commands=_xid_commands(node, gpus, log),
                node=node,
            )
        )
    return out


def old_last_xids(node: str, gpus: list[gf.GpuFacts], log: PluginLog | None) -> list[Finding]:
    """DCGM's last-Xid gauge never resets: a value unchanged over 24 h is history, one info line per Xid."""
    held: dict[int, list[gf.GpuFacts]] = {}
    for g in gpus:
        if g.last_xid > 0 and not g.last_xid_recent:
            held.setdefault(g.last_xid, []).append(g)
    out = []
    for number, old in sorted(held.items()):
        where = ", ".join(g.uuid or g.label for g in old)
        m = old[0].matcher(with_gpu=False)
        out.append(
            finding(
                "L5_XID",
                f"last Xid {number} on {node} ({where}), before the last 24 h: {xid.lookup(number).name} — "
                "DCGM's last-Xid gauge never resets, so it is history, not a current fault",
                severity=Severity.INFO,
                evidence=[
                    f"DCGM_FI_DEV_XID_ERRORS{g.matcher()} = {number}, unchanged over the last 24 h ({g.label})"
                    for g in old
                ],
                commands=[f"changes(DCGM_FI_DEV_XID_ERRORS{m}[24h])", *(log.commands if log else [])],
                node=node,
            )
        )
    return out


def _xid_commands(node: str, gpus: list[gf.GpuFacts], log: PluginLog | None) -> list[str]:
    cmds = list(log.commands if log else [])
    if gpus:
        m = gpus[0].matcher(with_gpu=False)
        cmds.append(f"DCGM_FI_DEV_XID_ERRORS{m} > 0")
        cmds.append(f"max_over_time(DCGM_EXP_XID_ERRORS_COUNT{m}[24h]) > 0")
    return cmds


def row_remaps(node: str, gpus: Iterable[gf.GpuFacts]) -> list[Finding]:
    out = []
    for g in gpus:
        if (g.row_remap_failure or 0) > 0:
            out.append(
                finding(
                    "L5_ROW_REMAP_FAILURE",
                    f"{g.label} on {node}: a row remap failed — no longer a software problem: drain the node and "
                    "replace the GPU (RMA)",
                    evidence=[
                        f"max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE{g.matcher()}[24h]) = {g.row_remap_failure:g}"
                    ],
                    commands=[f"DCGM_FI_DEV_ROW_REMAP_FAILURE{g.matcher(with_gpu=False)} > 0"],
                    node=node,
                )
            )
        if g.rows_rising:
            evidence = []
            for kind, now, rise in (
                ("CORRECTABLE", g.correctable_rows, g.correctable_rows_24h),
                ("UNCORRECTABLE", g.uncorrectable_rows, g.uncorrectable_rows_24h),
            ):
                if rise is not None:
                    total = f"{now:g}" if now is not None else "?"
                    evidence.append(
                        f"DCGM_FI_DEV_{kind}_REMAPPED_ROWS{g.matcher()} = {total}, +{rise:.3g} in 24 h"
                    )
            m = g.matcher(with_gpu=False)
            out.append(
                finding(
                    "L5_REMAPPED_ROWS_RISING",
                    f"{g.label} on {node}: remapped memory rows rose in the last 24 h — the card's memory is "
                    "degrading; plan a drain and diagnostics (dcgmi diag) before it fails",
                    evidence=evidence,
                    commands=[
                        f"increase(DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{m}[24h]) > 0",
                        f"increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{m}[24h]) > 0",
                    ],
                    node=node,
                )
            )
    return out


def clock_events(node: str, gpus: list[gf.GpuFacts]) -> list[Finding]:
    evidence = [
        f"{g.label}: {name} peaked at {peak:g} in a window within 24 h"
        for g in gpus
        for name, peak in g.clock_events_24h.items()
        if name in SLOWDOWN_EVENTS
    ] + [
        f"{g.label}: {name} counted in the last 24 h (DCGM_EXP_CLOCK_EVENTS_TOTAL changed or first appeared)"
        for g in gpus
        for name in g.clock_totals_24h
        if name in SLOWDOWN_EVENTS
    ]
    if not evidence:
        return []
    names = sorted(
        {n for g in gpus for n in (*g.clock_events_24h, *g.clock_totals_24h) if n in SLOWDOWN_EVENTS}
    )
    m = gpus[0].matcher(with_gpu=False)[:-1]
    sep = "," if len(m) > 1 else ""
    return [
        finding(
            "L5_CLOCK_EVENTS",
            f"GPUs on {node} were slowed down by {', '.join(names)}: check cooling, power delivery and the "
            "board (thermal or power-brake slowdown throttles every job on the GPU)",
            evidence=evidence,
            commands=[
                f'max_over_time(DCGM_EXP_CLOCK_EVENTS_COUNT{m}{sep}clock_event=~"(?i)(hw_slowdown|sw_thermal|hw_thermal|hw_power_brake).*"}}[24h]) > 0'
            ],
            node=node,
        )
    ]
