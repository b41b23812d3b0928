"""The digest's fleet read: remapped rows, row-remap failures and Xids of every node over 24 h."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from layers.facts.dcgmseries import (
    CORRECTABLE_ROWS,
    DAY_S,
    LAST_XID,
    ROW_REMAP_FAILURE,
    UNCORRECTABLE_ROWS,
    XID_COUNT,
    XID_TOTAL,
    GpuFacts,
)
from layers.facts.gpuassembly import Assembly, by_node
from layers.facts.hosts import HostMap, selector_for
from layers.facts.rowgrowth import verified_growth
from layers.sources import Read, Selector, Telemetry, read_all


class NodeHealth(msgspec.Struct, frozen=True):
    """One node's hardware-health signals over 24 h, for the digest."""

    node: str
    gpus: tuple[GpuFacts, ...]

    @property
    def correctable_rows_24h(self) -> float:
        return sum(g.correctable_rows_24h or 0 for g in self.gpus)

    @property
    def uncorrectable_rows_24h(self) -> float:
        return sum(g.uncorrectable_rows_24h or 0 for g in self.gpus)

    @property
    def rows_rising(self) -> bool:
        return any(g.rows_rising for g in self.gpus)

    @property
    def row_remap_failure(self) -> bool:
        return any((g.row_remap_failure or 0) > 0 for g in self.gpus)

    @property
    def xids_24h(self) -> list[int]:
        """Xids from the exporter's counts and the last-Xid gauge where it changed in the 24 h
        (it never resets: an unchanged value is an old Xid)."""
        seen = {x for g in self.gpus for x in (*g.xid_counts_24h, *g.xid_totals_24h)}
        seen.update(g.last_xid for g in self.gpus if g.last_xid > 0 and g.last_xid_recent)
        return sorted(seen)


def read_fleet_health(
    telemetry: Telemetry, hostmap: HostMap, nodes: Sequence[str] | None = None
) -> dict[str, NodeHealth]:
    """Remapped-row growth, row-remap failures and Xids for the whole fleet in six calls
    (seven when some GPU holds a last Xid, eight when such a GPU's series began in the last 24 h;
    one more when rows rose somewhere, to tell growth from a reset's dip: rowgrowth.py).

    With `nodes` None no selector is sent (every series); otherwise only those nodes'.
    Raises TelemetryError when the source is down.
    """
    match: list[Selector] = [] if nodes is None else selector_for(nodes, hostmap)
    asm = Assembly(hostmap, {})
    # Only non-zero series: across a fleet these signals are zero almost
    # everywhere, and moving 80,000 zeros costs most of the digest's time.
    rows24, urows24, remap, last, xids, xid_totals = read_all(
        telemetry,
        [
            Read("increase", CORRECTABLE_ROWS, DAY_S, match, 0),
            Read("increase", UNCORRECTABLE_ROWS, DAY_S, match, 0),
            Read("max_over_time", ROW_REMAP_FAILURE, DAY_S, match, 0),
            Read("instant", LAST_XID, match=match, above=0),
            Read("max_over_time", XID_COUNT, DAY_S, match, 0),
            Read("changed", XID_TOTAL, DAY_S, match),
        ],
    )
    grown = verified_growth(telemetry, DAY_S, {CORRECTABLE_ROWS: rows24, UNCORRECTABLE_ROWS: urows24})
    asm.put("correctable_rows_24h", grown[CORRECTABLE_ROWS])
    asm.put("uncorrectable_rows_24h", grown[UNCORRECTABLE_ROWS])
    asm.put("row_remap_failure", remap)
    asm.read_last_xid(telemetry, match, last)
    asm.put_xid_counts(xids)
    asm.put_xid_counts(xid_totals, totals=True)
    grouped = by_node(asm.facts())
    return {node: NodeHealth(node, tuple(gpus)) for node, gpus in sorted(grouped.items())}
