"""The process's GPU ledger (bot/ledger/): in the bot's Redis (REDIS_URL) when set, else in memory.

One per process and URL, so `/gpu node`, the digest and the diagnostics share it.
"""

from __future__ import annotations

import threading

from bot.ledger.digest_hook import with_ledger
from bot.ledger.store import Ledger, open_ledger
from bot.ops.config import Config
from bot.slack.state import redis_client, shown_url
from layers.digest import Digest
from layers.sources import Cluster, Telemetry

_LEDGERS: dict[str, Ledger] = {}
_LOCK = threading.Lock()


def bot_ledger(cfg: Config, redis_url: str | None = None) -> Ledger:
    url = redis_url or cfg.redis_url or ""
    with _LOCK:
        if url not in _LEDGERS:
            client = (
                redis_client(
                    url, ca_bundle=cfg.redis_ca_bundle, password=cfg.redis_password, ride_out_restarts=True
                )
                if url
                else None
            )
            _LEDGERS[url] = open_ledger(client, cfg.ledger_retention_days, shown=f"Redis at {shown_url(url)}")
        return _LEDGERS[url]


def ledger_digest(
    cfg: Config, cluster: Cluster, telemetry: Telemetry, digest: Digest, *, offline: bool = False
) -> Digest:
    """The digest through the ledger (bot/ledger/digest_hook.py). A scenario's or bundle's digest
    (`offline`) reads and writes a ledger of its own in memory, never the bot's Redis."""
    ledger = open_ledger(None, cfg.ledger_retention_days) if offline else bot_ledger(cfg)
    return with_ledger(cfg, cluster, telemetry, digest, ledger)
