"""The digest's "Repeat offenders and RMA candidates": the ledger's rules met, on the digest.

A node meeting a rule is flagged with the rule's reason (spec/interfaces.md, `digest --format
json`: RMA_ROW_REMAP_FAILURE, REPEAT_FATAL_XID, REPEAT_NODE_FAULTS, REPEAT_APP_XID,
REMAP_PENDING), added to the reasons it already has, and each rule met is one row of the
section (GPU, serial, node, reason, since).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from layers.digest import Digest, FlaggedNode
from layers.facts import objects as o
from layers.facts.ledgerevents import iso
from layers.ledger_rules import LEDGER_REASONS, Hit
from layers.sources import K8sObject


class Offender(msgspec.Struct, frozen=True):
    node: str
    gpu: str  # UUID; "" for a node-level rule
    serial: str
    reason: str
    since: float
    detail: str
    action: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "gpu": self.gpu or None,
            "serial": self.serial or None,
            "reason": self.reason,
            "since": iso(self.since),
            "detail": self.detail,
            "action": self.action,
        }


def with_offenders(
    digest: Digest,
    hits: Sequence[Hit],
    nodes: Sequence[K8sObject],
    serials: Mapping[str, str],
    notes: Sequence[str] = (),
) -> Digest:
    """The digest with the ledger's rules: reasons on flagged nodes (a node flagged by a rule alone
    joins the list), and the section's rows."""
    order = {r: i for i, r in enumerate(LEDGER_REASONS)}
    offenders = tuple(
        Offender(h.node, h.gpu, serials.get(h.gpu, ""), h.reason, h.since, h.detail, h.action)
        for h in sorted(hits, key=lambda h: (order.get(h.reason, 99), h.node, h.gpu))
    )
    by_node: dict[str, list[str]] = {}
    for off in offenders:
        reasons = by_node.setdefault(off.node, [])
        if off.reason not in reasons:
            reasons.append(off.reason)
    objects = {o.name(n): n for n in nodes}
    flagged: list[FlaggedNode] = []
    for f in digest.flagged:
        extra = [r for r in by_node.pop(f.node, []) if r not in f.reasons]
        flagged.append(msgspec.structs.replace(f, reasons=(*f.reasons, *extra)) if extra else f)
    for name, reasons in sorted(by_node.items()):
        node = objects.get(name)
        cap = sum(o.gpu_resources(node, "capacity").values()) if node else 0
        alloc = sum(o.gpu_resources(node, "allocatable").values()) if node else 0
        cordoned = node is not None and o.is_unschedulable(node)
        flagged.append(
            FlaggedNode(node=name, capacity=cap, allocatable=alloc, reasons=tuple(reasons), cordoned=cordoned)
        )
    return dataclasses.replace(
        digest, flagged=tuple(flagged), offenders=offenders, notes=(*digest.notes, *notes)
    )
