"""What the node actions write into the node's ledger: a cordon, an uncordon, a bundle (who,
when, which node), so `gpubot node NODE` and `/gpu node` show who did what after the node's
annotations are gone (spec/interfaces.md, "Node history, repeat offenders and RMA").

Each write is idempotent: the same action told twice (a retried click, the cordon that a later
walk also reads from the node's annotations) lands within the ledger's same-event window
(layers/facts/ledgerevents.py) and is one entry. A store that fails costs the entry, never the
action: the caller gets a note to say.
"""

from __future__ import annotations

import logging

from bot.ledger.store import Ledger, LedgerUnavailable
from layers.facts.ledgerevents import Event

log = logging.getLogger("gpubot.history")

SOURCE = "gpubot"


def record_action(
    ledger: Ledger | None, node: str, kind: str, at: float, actor: str, detail: str
) -> str | None:
    """Write one node event (`kind` cordon, uncordon or bundle); a note when it could not be written."""
    if ledger is None or not node:
        return None
    try:
        ledger.record(node, [Event(node, kind, at, source=SOURCE, actor=actor, detail=detail)], now=at)
    except LedgerUnavailable as err:
        log.warning("%s of %s not written to the ledger: %s", kind, node, err)
        return f"not written to the node's ledger: {err}"
    return None
