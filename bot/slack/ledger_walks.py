"""Walks write the ledger: when a walk has run layer 5 on a node, what that node's objects, logs
and series show is recorded (idempotently: the same Xid line seen by two walks is one entry).

A WalkObserver around the bot's own, so neither the walk service nor the layers change.
Recording runs after the walk is posted and never fails it: a store or source that fails
is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

from bot.ledger.service import node_report
from bot.ledger.store import Ledger
from bot.ops.config import Config
from bot.sources.opener import Sources
from handlers.ports import WalkObserver
from layers.findings import LayerResult, WalkResult

log = logging.getLogger("gpubot.ledger")
CARD_LAYER = 5


class LedgerObserver:
    """`inner`'s observer, and the ledger written for every node a walk looked at in layer 5."""

    def __init__(self, inner: WalkObserver, record: Callable[[str], None]) -> None:
        self.inner = inner
        self.record = record

    def walk_started(self) -> None:
        self.inner.walk_started()

    def layer_done(self, result: LayerResult, seconds: float) -> None:
        self.inner.layer_done(result, seconds)

    def walk_finished(self, result: WalkResult) -> None:
        self.inner.walk_finished(result)
        node = result.target.node
        if node and any(r.layer == CARD_LAYER for r in result.layers):
            try:
                self.record(node)
            except Exception as err:  # the walk is done and posted: the ledger must not undo that
                log.warning("ledger not written for %s after its walk: %s", node, err)

    def action(self, kind: str, outcome: str) -> None:
        self.inner.action(kind, outcome)

    def scope(self, walk_id: str | None) -> AbstractContextManager[None]:
        return self.inner.scope(walk_id)


def walk_recorder(cfg: Config, sources: Sources, ledger: Ledger) -> Callable[[str], None]:
    """Record one node's observation (never from a scenario or bundle: its history is made up)."""

    def record(node: str) -> None:
        if not sources.offline:
            node_report(cfg, sources.cluster, sources.telemetry, ledger, node)

    return record
