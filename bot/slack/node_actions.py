"""The node actions the buttons run, over the chosen sources: cordon and uncordon
(bot/actions/cordon.py, with the breaker's lock in the state store) and must-gather
(bot/actions/bundle_writer.py, into a temporary file the button uploads and removes).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from bot.ops.config import Config
from bot.sources.opener import Sources
from handlers.buttons import Bundle, Outcome
from handlers.ports import StateStore
from layers.findings import Target, WalkResult


class ClusterNodeActions:
    """Cordon, uncordon and must-gather over the chosen sources (bot/actions/cordon.py, bot/actions/bundle_writer.py)."""

    def __init__(self, sources: Sources, cfg: Config, store: StateStore | None = None) -> None:
        self.sources = sources
        self.cfg = cfg
        # The breaker's lock lives in the state store: with Redis, every replica (and a CLI with
        # the same REDIS_URL) counts cordons one at a time.
        self.store = store

    def _ledger(self) -> Any:
        """The bot's node ledger the actions write to; none for a scenario or bundle (read-only)."""
        from bot.slack.ledger_open import bot_ledger

        return None if self.sources.offline else bot_ledger(self.cfg)

    def cordon(self, node: str, actor: str, reason: str) -> Outcome:
        from bot.actions.cordon import cordon, store_breaker_lock

        out = cordon(
            self.sources.cluster,
            self.sources.writer,
            node,
            reason,
            actor,
            max_fraction=self.cfg.cordon_max_fraction,
            breaker_lock=(
                store_breaker_lock(self.store, cluster=self.cfg.cluster_name)
                if self.store is not None
                else None
            ),
            ledger=self._ledger(),
        )
        return Outcome(out.applied, out.message)

    def uncordon(self, node: str, actor: str) -> Outcome:
        from bot.actions.cordon import uncordon

        out = uncordon(self.sources.cluster, self.sources.writer, node, actor=actor, ledger=self._ledger())
        return Outcome(out.applied, out.message)

    def must_gather(self, node: str, target: Target, walk: WalkResult | None, actor: str = "slack") -> Bundle:
        """The bundle of `node`, written to the node's ledger as taken by `actor` (handlers/buttons.py
        does not pass the clicking user yet: "slack" until it does)."""
        from bot.actions.archive import name_part
        from bot.actions.bundle_writer import collect_bundle

        fd, path = tempfile.mkstemp(prefix=f"gpubot-must-gather-{name_part(node)}-", suffix=".tar.gz")
        os.close(fd)
        pod = (target.namespace, target.pod) if target.pod and target.namespace else None
        try:
            report = collect_bundle(
                self.sources.cluster,
                self.sources.telemetry,
                path,
                node=node,
                target=pod,
                walk=walk,
                operator_namespace=self.cfg.operator_namespace,
                ledger=self._ledger(),
                actor=actor,
            )
        except BaseException:
            os.unlink(path)
            raise
        summary = f"{report.files} files, {report.archive_bytes / 1e6:.1f} MB"
        if report.errors:
            summary += f", {len(report.errors)} read(s) failed (listed in errors.txt)"
        return Bundle(path=path, filename=f"must-gather-{name_part(node)}.tar.gz", summary=summary)
