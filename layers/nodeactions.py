"""The decision table's answer for one node as plain data: `NodePolicy` (each action offered or
not and what is said instead, the confirmation lines, the advice) and `Allowed`.

Decided by layers/nodepolicy.py (`decide`); kept on each `LayerResult` so a stored walk's buttons
keep it; round-trips through `to_dict` / `from_dict`.
"""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

import msgspec

Row = Literal[
    "no-owner",
    "cordoned-by-gpubot",
    "cordoned-by-person",
    "queued",
    "running-repair",
    "running-maintenance",
    "running-removal",
    "gave-up",
    "reported",
]
ROWS: tuple[Row, ...] = get_args(Row)  # the table's rows, in its order
# A catalog action that fights a holder: drain, reset, reboot, power-cycle, replace the node.
ACTION_WORDS = re.compile(r"\b(?:drain|reset|reboot|power-cycle|cordon|replace)", re.IGNORECASE)


class Allowed(msgspec.Struct, frozen=True):
    """One action on one node: offered or not, and the sentence said with it (or instead)."""

    offered: bool
    said: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"offered": self.offered, "said": self.said}


class NodePolicy(msgspec.Struct, frozen=True):
    node: str
    row: Row
    cordon: Allowed
    uncordon: Allowed
    uncordon_force: Allowed
    diagnostics: Allowed
    must_gather: Allowed
    next_steps: tuple[str, ...] = ()  # what the platform does after a cordon (GKE, EKS, driver manager)
    line: str = ""  # the deciding owner in one sentence for a confirmation, "" without one
    holder: dict[str, str] | None = None  # {"name", "state", "phase", "role", "kind"} of the deciding owner
    owners: tuple[str, ...] = ()  # every owner read, as owner lines (`owner: X (state) — mark …`)
    cordoned_by: str | None = None  # who cordoned it, in words (None: schedulable)
    must_gather_first: bool = False  # the node is going away: collect before anything else
    advice_head: str = ""  # said before (or instead of) the catalog's action
    replaces_action: bool = False  # the catalog's drain/reset/reboot is not advised here
    advice_tail: str = ""  # said after the catalog's action

    @property
    def confirm(self) -> tuple[str, ...]:
        """What every confirmation of an action on this node repeats first: the owner line and the
        platform's next step, whichever layer's message the button is on."""
        return ((self.line,) if self.line else ()) + self.next_steps

    def advise(self, catalog_action: str) -> str:
        """The advice a finding or the verdict gives on this node for the catalog's action."""
        if self.replaces_action:
            return self.advice_head
        parts = [p for p in (self.advice_head, catalog_action, self.advice_tail) if p]
        return "; ".join(parts)

    def advise_summary(self, summary: str) -> str:
        """A finding's summary with its advice (the text after the last ` — `) as the table says:
        a drain / reset / reboot the node's holder forbids is replaced, a queued upgrade or an
        owner that gave up is said with it. A summary without such advice is left as it is."""
        head, sep, tail = summary.rpartition(" — ")
        if not sep or not (self.advice_head or self.advice_tail) or not ACTION_WORDS.search(tail):
            return summary
        return f"{head} — {self.advise(tail)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "row": self.row,
            "cordon": self.cordon.to_dict(),
            "uncordon": self.uncordon.to_dict(),
            "uncordon_force": self.uncordon_force.to_dict(),
            "diagnostics": self.diagnostics.to_dict(),
            "must_gather": self.must_gather.to_dict(),
            "next_steps": list(self.next_steps),
            "line": self.line,
            "holder": self.holder,
            "owners": list(self.owners),
            "cordoned_by": self.cordoned_by,
            "must_gather_first": self.must_gather_first,
            "advice_head": self.advice_head,
            "replaces_action": self.replaces_action,
            "advice_tail": self.advice_tail,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NodePolicy:
        def allowed(k: str) -> Allowed:
            a = d.get(k) or {}
            return Allowed(bool(a.get("offered")), str(a.get("said") or ""))

        row = d.get("row")
        return cls(
            node=str(d["node"]),
            row=row if row in ROWS else "no-owner",
            cordon=allowed("cordon"),
            uncordon=allowed("uncordon"),
            uncordon_force=allowed("uncordon_force"),
            diagnostics=allowed("diagnostics"),
            must_gather=allowed("must_gather"),
            next_steps=tuple(d.get("next_steps") or ()),
            line=str(d.get("line") or ""),
            holder=d.get("holder"),
            owners=tuple(d.get("owners") or ()),
            cordoned_by=d.get("cordoned_by"),
            must_gather_first=bool(d.get("must_gather_first")),
            advice_head=str(d.get("advice_head") or ""),
            replaces_action=bool(d.get("replaces_action")),
            advice_tail=str(d.get("advice_tail") or ""),
        )
