"""The digest's reads past the node list and the fleet's hardware signals.

The GPUs DRA nodes publish (one ResourceSlice list, one DeviceTaintRule list) and the device
plugin's log of the nodes with a capacity gap (the Xids DCGM cannot report). Both are bounded
by what the digest already flagged or by one list each, never by the fleet's pods.
"""

from __future__ import annotations

import dataclasses

import msgspec.structs

from layers.digest_model import ALLOCATABLE_BELOW_CAPACITY, Digest
from layers.facts import draslices
from layers.facts.context import Settings, WalkContext
from layers.facts.draslices import Inventory
from layers.facts.fold import shown
from layers.facts.pluginlog import read_plugin_log
from layers.findings import Target
from layers.sources import Cluster, SourceError, Telemetry

# Device plugin logs read per digest: only nodes with a capacity gap, whose lost GPUs the plugin's
# Xid lines explain (DCGM cannot report 79, 119, 120); bounded so a bad day stays one quick read.
PLUGIN_LOG_NODES = 50


def dra_inventory(cluster: Cluster, notes: list[str]) -> Inventory | None:
    """The GPUs DRA nodes publish, with their taints (one slice list, one DeviceTaintRule list);
    a refusal is a note naming the rule, a cluster without DRA an empty inventory."""
    try:
        slices = cluster.list_dra("ResourceSlice", field_selector=f"spec.driver={draslices.DRIVER}")
    except SourceError as err:
        notes.append(f"DRA ResourceSlices not read, so GPUs tainted by the DRA driver are not counted: {err}")
        return None
    try:
        rules = cluster.list_dra("DeviceTaintRule") if slices else []
    except SourceError as err:
        notes.append(f"DeviceTaintRules not read (taints they add are not counted): {err}")
        rules = []
    inventory = draslices.build_inventory(slices, rules)
    if inventory.problems:
        notes.append(
            f"{len(inventory.problems)} part(s) of the DRA inventory unreadable: {inventory.problems[0]}"
        )
    return inventory


def with_plugin_xids(
    digest: Digest, cluster: Cluster, telemetry: Telemetry, operator_namespace: str | None
) -> Digest:
    """Add the Xids of the last 24 h in the device plugin's log to nodes with a capacity gap.

    DCGM cannot report every Xid (79, 119, 120): the plugin's log is the other witness
    (spec/findings.md, layer 5), and the one that names why a GPU left allocatable.
    """
    gaps = [f for f in digest.flagged if ALLOCATABLE_BELOW_CAPACITY in f.reasons]
    if not gaps:
        return digest
    ctx = WalkContext(cluster, telemetry, Target(None, None), None, Settings(operator_namespace))
    extra: dict[str, tuple[int, ...]] = {}
    unread: list[str] = []
    partial: list[str] = []  # read, but a byte cap left part of the last 24 h out
    for f in gaps[:PLUGIN_LOG_NODES]:
        try:
            if not ctx.operator_pods_on(f.node, "device-plugin"):
                continue  # no plugin pod (another device plugin, or none): nothing to read, not an error
        except SourceError:
            unread.append(f.node)
            continue
        log, problems = read_plugin_log(ctx, f.node)
        if log is None or not log.read or len(problems) > bool(log.gaps):
            unread.append(f.node)
        elif log.gaps:
            partial.append(f.node)
        if log is not None and log.xids:
            extra[f.node] = tuple(sorted(set(f.xids_24h) | set(log.xids)))
    notes = list(digest.notes)
    missing = "Xids DCGM cannot report (79, 119, 120) may be missing from xids_24h"
    notes += [f"device plugin log not read on {shown(unread)}: {missing}"] if unread else []
    if partial:
        notes.append(
            f"device plugin log read only in part on {shown(partial)} (past the byte cap): {missing}"
        )
    if len(gaps) > PLUGIN_LOG_NODES:
        notes.append(
            f"device plugin logs read on the first {PLUGIN_LOG_NODES} of {len(gaps)} nodes with a capacity gap"
        )
    flagged = tuple(
        msgspec.structs.replace(f, xids_24h=extra[f.node]) if f.node in extra else f for f in digest.flagged
    )
    return dataclasses.replace(digest, flagged=flagged, notes=tuple(notes))
