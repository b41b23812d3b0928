"""The ledger's operations the CLI, the Slack bot and the digest share.

`node_report`: observe the node (its objects, logs, 7 days of series), record what was seen
(idempotent: a second look adds nothing), read back every entry kept, and evaluate the rules.
`fleet_offenders`: the rules met across the fleet, for the digest's section.
`export_rows`: the ledger as CSV rows for an RMA ticket.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Any

from bot.ledger.store import Ledger, LedgerUnavailable
from bot.ops.config import Config
from layers.facts import objects as o
from layers.facts.context import Settings, WalkContext
from layers.facts.hosts import host_map
from layers.facts.ledgerevents import Event
from layers.facts.ledgerfacts import window_counts
from layers.findings import Target
from layers.ledger import NodeLedger, build, observe
from layers.ledger_rules import (
    REPEAT_APP_XID,
    REPEAT_FATAL_XID,
    REPEAT_NODE_FAULTS,
    Hit,
    Presence,
    Rule,
    evaluate,
    rules_with,
)
from layers.sources import Cluster, Telemetry, TelemetryError

CSV_COLUMNS = (
    "node",
    "gpu_uuid",
    "gpu_index",
    "serial",
    "at",
    "kind",
    "xid",
    "source",
    "seen_by",
    "actor",
    "detail",
    "rules_met",
)


def configured_rules(cfg: Config) -> tuple[Rule, ...]:
    return rules_with(
        {
            REPEAT_FATAL_XID: cfg.ledger_repeat_fatal_xid,
            REPEAT_NODE_FAULTS: cfg.ledger_repeat_node_faults,
            REPEAT_APP_XID: cfg.ledger_repeat_app_xid,
        }
    )


def _ctx(cluster: Cluster, telemetry: Telemetry, cfg: Config) -> WalkContext:
    return WalkContext(cluster, telemetry, Target(None, None), None, Settings(cfg.operator_namespace))


def node_report(
    cfg: Config,
    cluster: Cluster,
    telemetry: Telemetry,
    ledger: Ledger,
    node: str,
    *,
    days: int = 30,
    record: bool = True,
) -> NodeLedger:
    """The node's ledger now. `record` False leaves the store as it is (a scenario read against a
    shared Redis must not write a made-up history into it). A failed store read is a problem
    noted on the report, not a failure: what the sources show still stands."""
    obs, obj = observe(_ctx(cluster, telemetry, cfg), node)
    now = telemetry.now()
    problems = list(obs.problems)
    stored: list[Event] = []
    gpus = dict(obs.gpus)
    present = obs.present
    try:
        if record:
            ledger.record(node, obs.events, obs.gpus, now=now, present=obs.present)
        stored, kept, last = ledger.snapshot(node, now=now)
        present = present if present is not None else last
        gpus = {**kept, **{u: g for u, g in obs.gpus.items() if u not in kept}}
        # The ledger follows the card: the history of this node's GPUs on the nodes they were on before.
        mine = present if present is not None else {e.gpu for e in [*stored, *obs.events] if e.gpu}
        stored += [e for g in sorted(mine) for e in ledger.gpu_history(g, now=now, besides=node)]
    except LedgerUnavailable as err:
        problems.append(f"the ledger's store: {err}; showing what the sources show now")
    return build(
        obj,
        [*stored, *obs.events],
        gpus,
        now,
        days=days,
        rules=configured_rules(cfg),
        windows=obs.windows,
        problems=problems,
        presence=Presence({node: frozenset(present)}) if present is not None else None,
    )


def fleet_offenders(
    cfg: Config, cluster: Cluster, telemetry: Telemetry, ledger: Ledger, nodes: Sequence[str]
) -> tuple[list[Hit], list[str]]:
    """Rules met by the stored entries of every ledger node plus Prometheus's fleet-wide Xid
    windows (two queries for the whole fleet), and notes on what could not be read."""
    now = telemetry.now()
    notes: list[str] = []
    events: list[Event] = []
    present: dict[str, frozenset[str]] = {}
    try:
        for node in ledger.nodes():
            kept, _, here = ledger.snapshot(node, now=now)
            events += kept
            if here is not None:
                present[node] = frozenset(here)
    except LedgerUnavailable as err:
        notes.append(f"repeat offenders from Prometheus only: {err}")
    windows = []
    try:
        windows = window_counts(telemetry, host_map(nodes, []), None)
    except TelemetryError as err:
        notes.append(f"Xid counts over 24 h and 7 d not read from {telemetry.source}: {err}")
    known = set(nodes)
    rules = configured_rules(cfg)
    hits = [h for h in evaluate(events, now, rules, windows, Presence(present)) if h.node in known]
    return hits, notes


def export_rows(reports: Iterable[NodeLedger]) -> str:
    """CSV for an RMA ticket: one row per entry, with the GPU's serial and the rules it meets. A moved
    card's entries are in the report of each node it was on: each is written once, with the node where
    it was seen."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    written: set[tuple[str, ...]] = set()
    for rep in reports:
        data: dict[str, Any] = rep.to_dict()
        for ev in data["events"]:
            writer.writerow(_row(rep.node, {}, ev, data["rules"]))
        for gpu in data["gpus"]:
            rules = gpu["rules"] + data["rules"]
            if not gpu["events"]:
                writer.writerow(_row(rep.node, gpu, None, rules))
            for ev in gpu["events"]:
                key = (gpu["uuid"], ev["at"], ev["kind"], str(ev["xid"]), ev["detail"][:40])
                if key not in written:
                    written.add(key)
                    writer.writerow(_row(ev.get("node") or rep.node, gpu, ev, rules))
    return out.getvalue()


def _row(node: str, gpu: dict[str, Any], ev: dict[str, Any] | None, rules: list[dict[str, Any]]) -> list[str]:
    ev = ev or {}
    met = "; ".join(f"{r['reason']} since {r['since']}" for r in rules)
    cells = [
        node,
        gpu.get("uuid") or "",
        "" if gpu.get("index") is None else str(gpu["index"]),
        gpu.get("serial") or "",
        ev.get("at", ""),
        ev.get("kind", ""),
        "" if ev.get("xid") is None else str(ev["xid"]),
        ev.get("source", ""),
        " ".join(ev.get("seen_by", [])),
        ev.get("actor") or "",
        ev.get("detail", ""),
        met,
    ]
    # A cell a spreadsheet would run as a formula (=, +, -, @ first) is quoted as text.
    return ["'" + c if c[:1] in ("=", "+", "-", "@") else c for c in cells]


def alert_event(labels: dict[str, str], starts_at: float, node: str) -> Event | None:
    """The ledger entry an Alertmanager alert about an Xid stands for (dcgm-exporter's labels: `UUID`,
    `gpu`, and the Xid in `xid`, `err_code` or the alert's value label), or None when it names none."""
    raw = labels.get("xid") or labels.get("XID") or labels.get("err_code") or ""
    if not raw.isdigit():
        return None
    gpu = labels.get("UUID") or labels.get("uuid") or ""
    name = labels.get("alertname", "alert")
    return Event(node, "xid", starts_at, gpu=gpu, xid=int(raw), source="alert", detail=f"alert {name}")


def gpu_nodes(cluster: Cluster) -> list[str]:
    """The GPU nodes' names (a failed list raises SourceError: there is no fleet without it)."""
    return sorted(o.name(n) for n in cluster.list_nodes() if o.is_gpu_node(n))
