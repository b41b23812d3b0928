"""A node's ledger as people and programs read it: its GPUs, their events, the rules met.

`observe` gathers what the sources show now (layers/facts/ledgerfacts.py, plus the cordons
the node object shows); the caller merges that with what the store kept and `report` builds
the `gpubot node --format json` shape of spec/interfaces.md:
`{"node", "owner", "gpus": [{"uuid", "serial", "index", "events": [...], "rules": [...]}],
"rules": [...node-level rules...]}`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from layers import nodepolicy
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.ledgerevents import DAY_S, Event, WindowCount, coalesce, parse_time
from layers.facts.ledgerfacts import GpuId, Observation, observe_node
from layers.ledger_rules import DEFAULT_RULES, Hit, Presence, Rule, evaluate
from layers.remedy import CORDON_REASON, CORDONED_AT, CORDONED_BY
from layers.sources import K8sObject

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def node_events(node: K8sObject) -> list[Event]:
    """Cordons the node object shows: gpubot's (its annotations: who, why, when) or anyone's
    (the `node.kubernetes.io/unschedulable` taint's time)."""
    name = o.name(node)
    notes = o.annotations_of(node)
    at = parse_time(notes.get(CORDONED_AT))
    if at is not None and notes.get(CORDONED_BY) and o.is_unschedulable(node):
        reason = notes.get(CORDON_REASON, "")
        return [Event(name, "cordon", at, source="gpubot", actor=notes[CORDONED_BY], detail=reason)]
    events: list[Event] = []
    if o.is_unschedulable(node):
        for taint in (node.get("spec") or {}).get("taints") or []:
            added = parse_time(taint.get("timeAdded"))
            if taint.get("key") == UNSCHEDULABLE_TAINT and added is not None:
                events.append(
                    Event(name, "cordon", added, source="kubernetes", detail="cordoned, not by gpubot")
                )
    return events


def observe(ctx: WalkContext, node: str) -> tuple[Observation, K8sObject]:
    """What the sources show for the node's ledger now, and the node object."""
    obs = observe_node(ctx, node)
    obj = ctx.cluster.get_node(node)
    obs.events += node_events(obj)
    return obs, obj


class NodeLedger(msgspec.Struct, frozen=True):
    node: str
    owner: dict[str, str] | None
    events: tuple[Event, ...]
    gpus: Mapping[str, GpuId]
    hits: tuple[Hit, ...]
    days: int
    now: float
    problems: tuple[str, ...] = ()

    @property
    def shown_events(self) -> list[Event]:
        return [e for e in self.events if e.at >= self.now - self.days * DAY_S]

    def to_dict(self) -> dict[str, Any]:
        shown = self.shown_events
        uuids = sorted(set(self.gpus) | {e.gpu for e in shown if e.gpu} | {h.gpu for h in self.hits if h.gpu})
        gpus = []
        for uuid in sorted(uuids, key=lambda u: (_index_key(self.gpus.get(u)), u)):
            gid = self.gpus.get(uuid, GpuId(uuid))
            gpus.append(
                {
                    "uuid": uuid,
                    "serial": gid.serial or None,
                    "index": int(gid.index) if gid.index.isdigit() else None,
                    "events": [e.to_dict() for e in shown if e.gpu == uuid],
                    "rules": [h.to_dict() for h in self.hits if h.gpu == uuid],
                }
            )
        return {
            "node": self.node,
            "owner": self.owner,
            "days": self.days,
            "gpus": gpus,
            "events": [e.to_dict() for e in shown if not e.gpu],
            "rules": [h.to_dict() for h in self.hits if not h.gpu],
            "problems": list(self.problems),
        }


def _index_key(gid: GpuId | None) -> int:
    return int(gid.index) if gid is not None and gid.index.isdigit() else 1 << 30


def build(
    node: K8sObject,
    events: Iterable[Event],
    gpus: Mapping[str, GpuId],
    now: float,
    *,
    days: int = 30,
    rules: Sequence[Rule] = DEFAULT_RULES,
    windows: Sequence[WindowCount] = (),
    problems: Sequence[str] = (),
    presence: Presence | None = None,
) -> NodeLedger:
    """The node's ledger from every event known (stored, observed, and its GPUs' entries on other nodes:
    the ledger follows the card), with the rules met on this node."""
    folded = coalesce(events)
    name = o.name(node)
    return NodeLedger(
        node=name,
        owner=nodepolicy.ledger_owner(node),
        events=tuple(folded),
        gpus=dict(gpus),
        hits=tuple(h for h in evaluate(folded, now, rules, windows, presence) if h.node == name),
        days=days,
        now=now,
        problems=tuple(problems),
    )


def text_lines(ledger: NodeLedger) -> list[str]:
    """The terminal's view: GPUs with their events, then the rules met and what to do."""
    d = ledger.to_dict()
    owner = f" (owner: {d['owner']['name']} {d['owner']['state']})" if d["owner"] else ""
    out = [f"{ledger.node}{owner}: {len(ledger.shown_events)} event(s) in {ledger.days} days"]
    for ev in d["events"]:
        out.append(f"  {ev['at']}  {ev['kind']:<17} {ev['actor'] or ev['source']}: {ev['detail'][:120]}")
    for g in d["gpus"]:
        serial = f" serial {g['serial']}" if g["serial"] else ""
        index = f"GPU {g['index']} " if g["index"] is not None else ""
        out.append(f"{index}{g['uuid']}{serial}")
        for ev in g["events"]:
            xid = f" {ev['xid']}" if ev["xid"] is not None else ""
            where = f" (on {ev['node']})" if ev["node"] != ledger.node else ""
            out.append(
                f"  {ev['at']}  {ev['kind']}{xid:<4} [{', '.join(ev['seen_by'])}]{where} {ev['detail'][:120]}"
            )
        for r in g["rules"]:
            out.append(f"  RULE {r['reason']} since {r['since']}: {r['detail']} -> {r['action']}")
    for r in d["rules"]:
        out.append(f"RULE {r['reason']} since {r['since']}: {r['detail']} -> {r['action']}")
    if not ledger.hits:
        out.append("no repeat-offender or RMA rule met")
    out += [f"note: {p}" for p in ledger.problems]
    return out
