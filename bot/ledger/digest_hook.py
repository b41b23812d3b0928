"""The digest's part in the ledger: it writes what it saw (row-remap failures and pending remaps,
fleet-wide) and shows the rules met as "Repeat offenders and RMA candidates" (layers/digest_ledger.py).

Every place that collects a digest passes it through `with_ledger`: the CLI, `/gpu digest`, the
daily run and a cluster's agent. A store or a Prometheus that cannot be read leaves the digest as
it was, with a note.
"""

from __future__ import annotations

from typing import Any

from bot.ledger.service import fleet_offenders
from bot.ledger.store import Ledger, LedgerUnavailable
from bot.ops.config import Config
from layers.digest import Digest
from layers.digest_ledger import with_offenders
from layers.facts import objects as o
from layers.facts.hosts import host_map
from layers.facts.ledgerfacts import fleet_state_events
from layers.sources import Cluster, SourceError, Telemetry, TelemetryError


def with_ledger(
    cfg: Config, cluster: Cluster, telemetry: Telemetry, digest: Digest, ledger: Ledger
) -> Digest:
    """The digest with the ledger's rules met (and the ledger with what the digest saw)."""
    notes: list[str] = []
    try:
        nodes = cluster.list_nodes()
    except SourceError as err:
        return with_offenders(digest, [], [], {}, [f"repeat offenders not read: {err}"])
    names = [o.name(n) for n in nodes]
    now = telemetry.now()
    try:
        events = fleet_state_events(telemetry, host_map(names, []), now)
    except TelemetryError as err:
        events = []
        notes.append(f"row-remap flags for the ledger not read from {telemetry.source}: {err}")
    by_node: dict[str, list[Any]] = {}
    for ev in events:
        by_node.setdefault(ev.node, []).append(ev)
    try:
        for node, evs in by_node.items():
            ledger.record(node, evs, now=now)
    except LedgerUnavailable as err:
        notes.append(f"the ledger's store: {err}")
    hits, more = fleet_offenders(cfg, cluster, telemetry, ledger, names)
    serials: dict[str, str] = {}
    try:
        for node in {h.node for h in hits}:
            serials.update({u: g.serial for u, g in ledger.read(node, now=now)[1].items() if g.serial})
    except LedgerUnavailable:
        pass  # said above (or the rules came from Prometheus alone): no serials then
    return with_offenders(digest, hits, nodes, serials, [*notes, *more])
