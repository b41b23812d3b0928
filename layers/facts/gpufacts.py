"""Per-GPU facts from fleet-wide telemetry (dcgm-exporter and vLLM series).

Reads are one Telemetry call per signal for every requested node at once, never
per node or per GPU: the walk asks about one or a few nodes, the daily digest
about the whole fleet (80,000 GPUs) in at most nine calls.

Which series belong to which node and workload: layers/facts/hosts.py.

The walk's shared read (with the target pod's vLLM facts) is layers/facts/walkfacts.py.

The series' names and the per-GPU record are in dcgmseries.py, the folding of samples into
records in gpuassembly.py, the digest's fleet read in fleethealth.py; all are re-exported here,
the one name the layers import.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from layers.facts.dcgmseries import (
    CLOCK_EVENTS,
    CLOCK_TOTAL,
    CORRECTABLE_ROWS,
    DAY_S,
    FB_FREE,
    FB_USED,
    LAST_XID,
    PREEMPTION_WINDOW_S,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
    UNCORRECTABLE_ROWS,
    VLLM_INFO,
    VLLM_PREEMPTIONS,
    XID_COUNT,
    XID_TOTAL,
    GpuFacts,
    clock_event_name,
)
from layers.facts.fleethealth import NodeHealth, read_fleet_health
from layers.facts.gpuassembly import Assembly, by_node
from layers.facts.hosts import DRA_CLAIM_LABELS, ClaimRef, HostMap, PodRef, pod_selector, selector_for
from layers.facts.rowgrowth import verified_growth
from layers.sources import Read, Telemetry, read_all

# The names the layers, the digest and the chart read from here (gf.*), wherever they now live.
__all__ = [
    "CLOCK_EVENTS",
    "CLOCK_TOTAL",
    "CORRECTABLE_ROWS",
    "FB_FREE",
    "FB_USED",
    "LAST_XID",
    "PREEMPTION_WINDOW_S",
    "ROW_REMAP_FAILURE",
    "ROW_REMAP_PENDING",
    "SPARSE_READ_NODES",
    "UNCORRECTABLE_ROWS",
    "VLLM_INFO",
    "VLLM_PREEMPTIONS",
    "XID_COUNT",
    "XID_TOTAL",
    "GpuFacts",
    "HostMap",
    "NodeHealth",
    "by_node",
    "clock_event_name",
    "read_fleet_health",
    "read_gpu_facts",
    "selector_for",
]

# Past this many nodes a walk's read asks only for non-zero hardware signals.
SPARSE_READ_NODES = 50


def read_gpu_facts(
    telemetry: Telemetry,
    hostmap: HostMap,
    nodes: Sequence[str],
    pods: Mapping[PodRef, str | None] | None = None,
    claims: Mapping[ClaimRef, PodRef] | None = None,
) -> list[GpuFacts]:
    """Every signal the layers need, for these nodes (and these pods' series): thirteen calls,
    fourteen when some GPU holds a last Xid, fifteen when such a GPU's series began in the last 24 h,
    one more when remapped rows rose (rowgrowth.py).

    `pods` maps (namespace, pod) → its node, so series that carry pod labels but
    no host label are found and placed; `claims` maps a pod's DRA ResourceClaims to it, for
    series the exporter labels by claim only. Raises TelemetryError when the source is down.
    """
    pods = pods or {}
    match = selector_for(nodes, hostmap)
    for ns, pod in pods:
        match.extend(pod_selector(ns, pod))
    claims = claims or {}
    for ns in sorted({c[0] for c in claims}):
        match.append(
            {DRA_CLAIM_LABELS[0]: [ns], DRA_CLAIM_LABELS[1]: sorted(c[1] for c in claims if c[0] == ns)}
        )
    asm = Assembly(hostmap, pods, claims)
    # A pending pod's walk may examine the whole fleet: then the hardware signals, zero on
    # almost every GPU, come back for the sick GPUs only (`> 0` on the server), as in the
    # digest. Framebuffer stays whole: it also tells which nodes have DCGM series at all.
    nz = 0.0 if len(nodes) > SPARSE_READ_NODES else None
    # Independent reads, handed over together (a Prometheus sends them at once).
    (
        fb_used,
        fb_free,
        last,
        xids,
        xid_totals,
        rows,
        urows,
        rows24,
        urows24,
        remap,
        pending,
        clocks,
        clock_totals,
    ) = read_all(
        telemetry,
        [
            Read("instant", FB_USED, match=match),
            Read("instant", FB_FREE, match=match),
            Read("instant", LAST_XID, match=match, above=nz),
            Read("max_over_time", XID_COUNT, DAY_S, match, nz),
            Read("changed", XID_TOTAL, DAY_S, match),
            Read("instant", CORRECTABLE_ROWS, match=match, above=nz),
            Read("instant", UNCORRECTABLE_ROWS, match=match, above=nz),
            Read("increase", CORRECTABLE_ROWS, DAY_S, match, nz),
            Read("increase", UNCORRECTABLE_ROWS, DAY_S, match, nz),
            Read("max_over_time", ROW_REMAP_FAILURE, DAY_S, match, nz),
            Read("instant", ROW_REMAP_PENDING, match=match, above=nz),
            Read("max_over_time", CLOCK_EVENTS, DAY_S, match, nz),
            Read("changed", CLOCK_TOTAL, DAY_S, match),
        ],
    )
    asm.put("fb_used_mib", fb_used)
    asm.put("fb_free_mib", fb_free)
    asm.read_last_xid(telemetry, match, last)
    asm.put_xid_counts(xids)
    asm.put_xid_counts(xid_totals, totals=True)
    asm.put("correctable_rows", rows)
    asm.put("uncorrectable_rows", urows)
    grown = verified_growth(telemetry, DAY_S, {CORRECTABLE_ROWS: rows24, UNCORRECTABLE_ROWS: urows24})
    asm.put("correctable_rows_24h", grown[CORRECTABLE_ROWS])
    asm.put("uncorrectable_rows_24h", grown[UNCORRECTABLE_ROWS])
    asm.put("row_remap_failure", remap)
    asm.put("row_remap_pending", pending)
    asm.put_clock_events(clocks)
    asm.put_clock_events(clock_totals, totals=True)
    wanted = set(nodes) | {n for n in pods.values() if n}
    return [f for f in asm.facts() if f.node in wanted]
