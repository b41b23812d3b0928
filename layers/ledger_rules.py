"""The repeat-offender and RMA rules over the ledger's events (layers/facts/ledgerevents.py), as data.

The rules are records
(reason, window, threshold, scope, action) whose defaults are the spec's table:
NVSentinel's analyzer thresholds and NVIDIA's row-remap RMA criterion; the thresholds
are settings. Evaluation is pure: events and Prometheus window counts in, rules met out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

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


@dataclass(frozen=True)
class Rule:
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


@dataclass(frozen=True)
class Hit:
    """A rule met: on which node and GPU, since when, and the numbers behind it."""

    reason: str
    node: str
    gpu: str  # "" for a node-level rule
    since: float
    detail: str
    action: str

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "since": iso(self.since), "detail": self.detail, "action": self.action}


def _most_in_window(times: Sequence[float], window_s: int) -> tuple[int, float]:
    """The largest number of times within one sliding window, and where that window starts."""
    best, start, lo = 0, 0.0, 0
    ordered = sorted(times)
    for hi, t in enumerate(ordered):
        while t - ordered[lo] > window_s:
            lo += 1
        if hi - lo + 1 > best:
            best, start = hi - lo + 1, ordered[lo]
    return best, start


def _xid_rule(
    rule: Rule,
    events: Sequence[Event],
    windows: Sequence[WindowCount],
    now: float,
    wanted: frozenset[int] | None,
) -> list[Hit]:
    """Per GPU and Xid: the witnessed count in the worst window, or Prometheus's count where higher."""
    times: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for ev in events:
        if ev.kind == "xid" and ev.xid is not None and ev.gpu and _wanted(ev.xid, wanted):
            times[(ev.node, ev.gpu, ev.xid)].append(ev.at)
    counted = {(w.node, w.gpu, w.xid): w.day for w in windows if _wanted(w.xid, wanted)}
    hits: list[Hit] = []
    for key in sorted(set(times) | set(counted)):
        node, gpu, xid = key
        seen, start = _most_in_window(times.get(key, []), rule.window_s)
        prom = counted.get(key, 0)
        if seen >= prom:
            n, since, how = seen, start, "witnessed"
        else:
            n, since, how = prom, now - rule.window_s, "Prometheus increase over 24 h"
        if n >= rule.threshold:
            hits.append(Hit(rule.reason, node, gpu, since, f"Xid {xid} {n}× in 24 h ({how})", rule.action))
    return hits


def _wanted(xid: int, wanted: frozenset[int] | None) -> bool:
    return is_fatal_xid(xid) if wanted is None else xid in wanted


def _app_rule(rule: Rule, events: Sequence[Event], windows: Sequence[WindowCount], now: float) -> list[Hit]:
    """Xid 13 or 31 together on one GPU (either, twice, is the rule)."""
    merged = [replace(e, xid=-1) for e in events if e.kind == "xid" and e.xid in APP_XIDS]
    sums: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for w in windows:
        if w.xid in APP_XIDS:
            sums[(w.node, w.gpu)][0] += w.day
    counts = [WindowCount(n, g, -1, d, 0) for (n, g), (d, _) in sums.items()]
    hits = _xid_rule(rule, merged, counts, now, frozenset({-1}))
    return [replace(h, detail=h.detail.replace("Xid -1", "Xid 13/31")) for h in hits]


def _node_faults(
    rule: Rule, events: Sequence[Event], windows: Sequence[WindowCount], now: float
) -> list[Hit]:
    """Fatal events per node (fatal Xids, row-remap failures), a cascade counted once, in the window."""
    by_node: dict[str, list[Event]] = defaultdict(list)
    for ev in events:
        if ev.at < now - rule.window_s:
            continue
        if (ev.kind == "xid" and ev.xid is not None and is_fatal_xid(ev.xid)) or ev.kind in (
            "row_remap_failure",
            "uncordon",
        ):
            by_node[ev.node].append(ev)
    prom_week: dict[str, int] = defaultdict(int)
    for w in windows:
        if is_fatal_xid(w.xid):
            prom_week[w.node] += w.week
    hits: list[Hit] = []
    for node in sorted(set(by_node) | set(prom_week)):
        faults: list[float] = []
        repairs = 0
        repaired = False
        for ev in sorted(by_node.get(node, []), key=lambda e: e.at):
            if ev.kind == "uncordon":
                repaired = bool(faults)  # returned to service after a fault
                continue
            if not faults or repaired or ev.at - faults[-1] >= CASCADE_S:
                repairs += 1 if repaired else 0  # a repair counts when a fault followed it
                faults.append(ev.at)
            repaired = False
        n, how = len(faults), "witnessed"
        since = faults[0] if faults else now - rule.window_s
        if prom_week.get(node, 0) > n:
            n, how, since = prom_week[node], "Prometheus increase over 7 d", now - rule.window_s
        if n >= rule.threshold:
            detail = f"{n} fatal events in 7 d ({how})" + (
                f", {repairs} repair(s) in between" if repairs else ""
            )
            hits.append(Hit(rule.reason, node, "", since, detail, rule.action))
    return hits


def _state_rule(rule: Rule, events: Sequence[Event], now: float, kind: str, detail: str) -> list[Hit]:
    first: dict[tuple[str, str], float] = {}
    for ev in events:
        if ev.kind != kind or not ev.gpu:
            continue
        if kind == "remapped_rows" and not ev.pending:
            continue
        if rule.window_s and ev.at < now - rule.window_s:
            continue
        key = (ev.node, ev.gpu)
        first[key] = min(first.get(key, ev.at), ev.at)
    return [Hit(rule.reason, n, g, t, detail, rule.action) for (n, g), t in sorted(first.items())]


def evaluate(
    events: Iterable[Event],
    now: float,
    rules: Sequence[Rule] = DEFAULT_RULES,
    windows: Sequence[WindowCount] = (),
) -> list[Hit]:
    """Every rule met by the events (folded first) and Prometheus's window counts, worst first."""
    folded = coalesce(events)
    hits: list[Hit] = []
    for rule in rules:
        if rule.reason == RMA_ROW_REMAP_FAILURE:
            hits += _state_rule(rule, folded, now, "row_remap_failure", "row-remap failure flag set")
        elif rule.reason == REPEAT_FATAL_XID:
            hits += _xid_rule(rule, folded, windows, now, None)
        elif rule.reason == REPEAT_NODE_FAULTS:
            hits += _node_faults(rule, folded, windows, now)
        elif rule.reason == REPEAT_APP_XID:
            hits += _app_rule(rule, folded, windows, now)
        elif rule.reason == REMAP_PENDING:
            hits += _state_rule(rule, folded, now, "remapped_rows", "row remaps pending a GPU reset")
    order = {r: i for i, r in enumerate(LEDGER_REASONS)}
    return sorted(hits, key=lambda h: (order.get(h.reason, 99), h.node, h.gpu))
