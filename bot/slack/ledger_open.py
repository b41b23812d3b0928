"""The process's GPU ledger (bot/ledger/): in the bot's Redis (REDIS_URL) when set, else in memory.

One per process and URL, so `/gpu node`, the digest and the diagnostics share it.
"""

from __future__ import annotations

import dataclasses
import threading

from bot.ledger.digest_hook import with_ledger
from bot.ledger.store import Ledger, ledger_prefix, open_ledger
from bot.ops.config import Config
from bot.slack.redisconn import RedisTarget, connect
from layers.digest import Digest
from layers.sources import Cluster, Telemetry

_LEDGERS: dict[tuple[str, str], Ledger] = {}
_LOCK = threading.Lock()


def bot_ledger(cfg: Config, redis_url: str | None = None) -> Ledger:
    """The ledger in the Redis of the process's shape (GPUBOT_REDIS_MODE: one server, a Redis Cluster,
    the master behind Sentinel); in memory when no Redis is configured."""
    target = RedisTarget.of(cfg)
    if redis_url:
        target = dataclasses.replace(target, url=redis_url)
    where = target.shown if target.configured else ""
    prefix = ledger_prefix(cfg.cluster_name)
    with _LOCK:
        if (where, prefix) not in _LEDGERS:
            client = connect(target, ride_out_restarts=True) if where else None
            _LEDGERS[where, prefix] = open_ledger(
                client, cfg.ledger_retention_days, shown=f"Redis at {where}", prefix=prefix
            )
        return _LEDGERS[where, prefix]


def ledger_digest(
    cfg: Config, cluster: Cluster, telemetry: Telemetry, digest: Digest, *, offline: bool = False
) -> Digest:
    """The digest through the ledger (bot/ledger/digest_hook.py). A scenario's or bundle's digest
    (`offline`) reads and writes a ledger of its own in memory, never the bot's Redis."""
    ledger = open_ledger(None, cfg.ledger_retention_days) if offline else bot_ledger(cfg)
    return with_ledger(cfg, cluster, telemetry, digest, ledger)
