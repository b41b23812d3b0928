"""The repeat-offender and RMA rules over the ledger's events (layers/facts/ledgerevents.py), as data.

The rules are records
(reason, window, threshold, scope, action) whose defaults are the spec's table:
NVSentinel's analyzer thresholds and NVIDIA's row-remap RMA criterion; the thresholds
are settings. Evaluation is pure: events and Prometheus window counts in, rules met out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import msgspec
from msgspec.structs import replace

from layers.facts.ledgerevents import CASCADE_S, DAY_S, WEEK_S, Event, WindowCount, coalesce, iso
from layers.xid import XidAction, lookup

Scope = Literal["gpu", "node"]
# Catalog actions that make an Xid fatal (spec: "catalog action reset, reboot or support").
FATAL_ACTIONS = frozenset(
    {XidAction.RESET_GPU, XidAction.RESTART_VM, XidAction.RESTART_BM, XidAction.CONTACT_SUPPORT}
)
APP_XIDS = frozenset({13, 31})

RMA_ROW_REMAP_FAILURE = "RMA_ROW_REMAP_FAILURE"
REPEAT_FATAL_XID = "REPEAT_FATAL_XID"
REPEAT_NODE_FAULTS = "REPEAT_NODE_FAULTS"
REPEAT_APP_XID = "REPEAT_APP_XID"
REMAP_PENDING = "REMAP_PENDING"
LEDGER_REASONS = (RMA_ROW_REMAP_FAILURE, REPEAT_FATAL_XID, REPEAT_NODE_FAULTS, REPEAT_APP_XID, REMAP_PENDING)


def is_fatal_xid(xid: int) -> bool:
    return lookup(xid).action in FATAL_ACTIONS


class Rule(msgspec.Struct, frozen=True):
    """One repeat-offender or RMA rule: met when `threshold` matching events fall within `window_s`
    on one GPU (scope "gpu") or one node (scope "node"); `window_s` 0 means any time in the ledger."""

    reason: str
    window_s: int
    threshold: int
    scope: Scope
    action: str
    when: str  # the spec's "when", for people


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule(
        RMA_ROW_REMAP_FAILURE,
        0,
        1,
        "gpu",
        "RMA (NVIDIA's memory RMA criterion)",
        "the row-remap failure flag on a GPU",
    ),
    Rule(
        REPEAT_FATAL_XID,
        DAY_S,
        5,
        "gpu",
        "contact support / RMA",
        "the same fatal Xid (catalog action reset, reboot or support) on one GPU",
    ),
    Rule(
        REPEAT_NODE_FAULTS,
        WEEK_S,
        5,
        "node",
        "contact support; stop returning it to service",
        "fatal events on one node, repairs in between",
    ),
    Rule(
        REPEAT_APP_XID,
        DAY_S,
        2,
        "gpu",
        "run diagnostics: the card may be at fault, not the code",
        "Xid 13 or 31 on the same GPU",
    ),
    Rule(REMAP_PENDING, DAY_S, 1, "gpu", "drain, reset or reboot", "remaps wait for a reset"),
)


def rules_with(thresholds: Mapping[str, int]) -> tuple[Rule, ...]:
    """The default rules with thresholds from the settings (reason -> threshold)."""
    return tuple(replace(r, threshold=thresholds.get(r.reason, r.threshold)) for r in DEFAULT_RULES)


class Presence(msgspec.Struct, frozen=True):
    """Which GPUs (UUIDs) each node has now, for the nodes where that is known (DCGM's series of the
    node answered). The ledger follows the card: a GPU's rules go to the node it is on; a GPU no longer
    on a node (replaced) leaves that node's rules, its history stays."""

    nodes: Mapping[str, frozenset[str]] = msgspec.field(default_factory=dict)

    def gone(self, gpu: str, node: str) -> bool:
        return node in self.nodes and gpu not in self.nodes[node]

    def where(self, gpu: str, seen: Sequence[Event]) -> str:
        """The node the GPU is on now: where it is present, else where it was seen last."""
        here = sorted(n for n, gpus in self.nodes.items() if gpu in gpus)
        if here:
            return here[0]
        return max(seen, key=lambda e: e.at).node if seen else ""


class Hit(msgspec.Struct, frozen=True):
    """A rule met: on which node and GPU, since when (the first entry that meets it), the entries."""

    reason: str
    node: str
    gpu: str  # "" for a node-level rule
    since: float
    detail: str
    action: str
    entries: tuple[Event, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "since": iso(self.since),
            "detail": self.detail,
            "action": self.action,
            "entries": [_entry(e) for e in self.entries],
        }


def _entry(ev: Event) -> dict[str, Any]:
    return {"at": iso(ev.at), "node": ev.node, "gpu": ev.gpu or None, "kind": ev.kind, "xid": ev.xid}


def _times(entries: Sequence[Event]) -> str:
    """The entries' times (and nodes, when a moved card's entries span several)."""
    many = len({e.node for e in entries}) > 1
    shown = ", ".join(iso(e.at) + (f" on {e.node}" if many else "") for e in entries[:6])
    return shown + (f" … {len(entries) - 6} more" if len(entries) > 6 else "")


def _worst_window(entries: Sequence[Event], window_s: int) -> list[Event]:
    """The most entries within one sliding window (the earliest such window)."""
    ordered = sorted(entries, key=lambda e: e.at)
    best: list[Event] = []
    lo = 0
    for hi, ev in enumerate(ordered):
        while ev.at - ordered[lo].at > window_s:
            lo += 1
        if hi - lo + 1 > len(best):
            best = ordered[lo : hi + 1]
    return best


def _xid_rule(
    rule: Rule,
    events: Sequence[Event],
    windows: Sequence[WindowCount],
    now: float,
    wanted: frozenset[int] | None,
    presence: Presence,
    label: Callable[[int], str] = lambda x: f"Xid {x}",
) -> list[Hit]:
    """Per GPU (by UUID, over every node it was seen on) and Xid: the entries in the worst window, or
    Prometheus's per-GPU count where higher (it fills what the bot did not witness, never adds)."""
    by_key: dict[tuple[str, int], list[Event]] = defaultdict(list)
    for ev in events:
        if ev.kind == "xid" and ev.xid is not None and ev.gpu and _wanted(ev.xid, wanted):
            by_key[(ev.gpu, ev.xid)].append(ev)
    counted: dict[tuple[str, int], tuple[int, str]] = {}
    for w in windows:
        if _wanted(w.xid, wanted) and w.day > counted.get((w.gpu, w.xid), (0, ""))[0]:
            counted[(w.gpu, w.xid)] = (w.day, w.node)
    hits: list[Hit] = []
    for key in sorted(set(by_key) | set(counted)):
        gpu, xid = key
        seen = _worst_window(by_key.get(key, []), rule.window_s)
        prom, prom_node = counted.get(key, (0, ""))
        node = presence.where(gpu, by_key.get(key, [])) or prom_node
        if not node or presence.gone(gpu, node):
            continue  # replaced: its history stays in the export, its rules leave the node
        if len(seen) >= prom:
            n, since, how = len(seen), (seen[0].at if seen else now), "witnessed: " + _times(seen)
        else:
            n, since = prom, seen[0].at if seen else now - rule.window_s
            how = "Prometheus increase over 24 h" + (f"; witnessed: {_times(seen)}" if seen else "")
        if n >= rule.threshold:
            hits.append(
                Hit(
                    rule.reason,
                    node,
                    gpu,
                    since,
                    f"{label(xid)} {n}× in 24 h ({how})",
                    rule.action,
                    tuple(seen),
                )
            )
    return hits


def _wanted(xid: int, wanted: frozenset[int] | None) -> bool:
    return is_fatal_xid(xid) if wanted is None else xid in wanted


def _app_rule(
    rule: Rule, events: Sequence[Event], windows: Sequence[WindowCount], now: float, presence: Presence
) -> list[Hit]:
    """Xid 13 or 31 together on one GPU (either, twice, is the rule)."""
    merged = [replace(e, xid=-1) for e in events if e.kind == "xid" and e.xid in APP_XIDS]
    sums: dict[tuple[str, str], int] = defaultdict(int)
    for w in windows:
        if w.xid in APP_XIDS:
            sums[(w.node, w.gpu)] += w.day  # one GPU's two Xids: per GPU, never over a node
    counts = [WindowCount(n, g, -1, d) for (n, g), d in sums.items()]
    hits = _xid_rule(rule, merged, counts, now, frozenset({-1}), presence, lambda _: "Xid 13/31")
    originals = {(e.gpu, e.at): e for e in events if e.kind == "xid" and e.xid in APP_XIDS}
    return [replace(h, entries=tuple(originals.get((e.gpu, e.at), e) for e in h.entries)) for h in hits]


def _node_faults(rule: Rule, events: Sequence[Event], now: float, presence: Presence) -> list[Hit]:
    """Fatal events per node (fatal Xids, row-remap failures) in the window, each incident once: the same
    fault on several GPUs, or its cascade, within CASCADE_S is one node event unless the node was returned
    to service between. Only entries with their own times count: Prometheus's per-GPU windows are never
    summed over a node's GPUs."""
    by_node: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        if ev.at < now - rule.window_s or (ev.gpu and presence.gone(ev.gpu, ev.node)):
            continue
        if (ev.kind == "xid" and ev.xid is not None and is_fatal_xid(ev.xid)) or ev.kind in (
            "row_remap_failure",
            "uncordon",
        ):
            by_node[ev.node].append(ev)
    hits: list[Hit] = []
    for node in sorted(by_node):
        faults: list[Event] = []
        repairs = 0
        repaired = False
        for ev in sorted(by_node[node], key=lambda e: e.at):
            if ev.kind == "uncordon":
                repaired = bool(faults)  # returned to service after a fault
                continue
            if not faults or repaired or ev.at - faults[-1].at >= CASCADE_S:
                repairs += 1 if repaired else 0  # a repair counts when a fault followed it
                faults.append(ev)
            repaired = False
        if len(faults) >= rule.threshold:
            detail = f"{len(faults)} fatal events in 7 d: {_times(faults)}" + (
                f"; {repairs} repair(s) in between" if repairs else ""
            )
            hits.append(Hit(rule.reason, node, "", faults[0].at, detail, rule.action, tuple(faults)))
    return hits


def _state_rule(
    rule: Rule, events: Sequence[Event], now: float, kind: str, detail: str, presence: Presence
) -> list[Hit]:
    first: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        if ev.kind != kind or not ev.gpu:
            continue
        if kind == "remapped_rows" and not ev.pending:
            continue
        if rule.window_s and ev.at < now - rule.window_s:
            continue
        first[ev.gpu].append(ev)
    hits: list[Hit] = []
    for gpu, seen in sorted(first.items()):
        seen.sort(key=lambda e: e.at)
        node = presence.where(gpu, seen)
        if not presence.gone(gpu, node):
            hits.append(Hit(rule.reason, node, gpu, seen[0].at, detail, rule.action, tuple(seen)))
    return hits


def evaluate(
    events: Iterable[Event],
    now: float,
    rules: Sequence[Rule] = DEFAULT_RULES,
    windows: Sequence[WindowCount] = (),
    presence: Presence | None = None,
) -> list[Hit]:
    """Every rule met by the events (folded first) and Prometheus's per-GPU window counts, worst first."""
    folded = coalesce(events)
    here = presence or Presence()
    hits: list[Hit] = []
    for rule in rules:
        if rule.reason == RMA_ROW_REMAP_FAILURE:
            hits += _state_rule(rule, folded, now, "row_remap_failure", "row-remap failure flag set", here)
        elif rule.reason == REPEAT_FATAL_XID:
            hits += _xid_rule(rule, folded, windows, now, None, here)
        elif rule.reason == REPEAT_NODE_FAULTS:
            hits += _node_faults(rule, folded, now, here)
        elif rule.reason == REPEAT_APP_XID:
            hits += _app_rule(rule, folded, windows, now, here)
        elif rule.reason == REMAP_PENDING:
            hits += _state_rule(rule, folded, now, "remapped_rows", "row remaps pending a GPU reset", here)
    order = {r: i for i, r in enumerate(LEDGER_REASONS)}
    return sorted(hits, key=lambda h: (order.get(h.reason, 99), h.node, h.gpu))
