"""Layer 5's Xid findings: the device plugin's log, DCGM's Xid series, the DRA driver's taints and
GKE's node condition, merged per Xid number; and DCGM's last-Xid gauge when it is only history.

Split from layers/card.py: the layer walks the node, this module says what each Xid means.
"""

from __future__ import annotations

from layers import xid
from layers.dra import devicehealth
from layers.facts import gpufacts as gf
from layers.facts import objects as o
from layers.facts.pluginlog import PluginLog
from layers.findings import Finding, Severity, finding

_EVIDENCE_LINES = 5


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
    out: list[Finding] = []
    actions: list[str] = []
    for number in sorted(seen):
        entry = xid.lookup(number)
        evidence = list(seen[number])
        if telemetry_error is not None:
            evidence.append(f"DCGM telemetry not checked: {telemetry_error}")
        where = f"{node} ({', '.join(sorted(devices[number]))})" if devices.get(number) else node
        summary = f"Xid {number} on {where}, {entry.name}: {entry.meaning} — {entry.advice}"
        if number == 154:
            action = next((a for t in texts.get(number, []) if (a := xid.parse_recovery_action(t))), None)
            summary = xid.recovery_summary(where, action)
            actions += [action] if action else []
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
    for action in actions[-1:]:
        xid.name_recovery_action(out, node, action, "the Xid's own evidence")
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
