"""Reaching Redis as users run it: one server, a Redis Cluster, or a primary behind Sentinel.

`connect(target)` gives one client whatever the shape (GPUBOT_REDIS_MODE):

- `single`: REDIS_URL is the server. A URL naming a node of a Redis Cluster
  is refused at start (`check_not_cluster`): a plain client there fails later,
  command by command, with MOVED.
- `cluster`: REDIS_URL names any node; redis-py's RedisCluster learns the
  slots and follows MOVED/ASK and a shard's failover. Database 0 only. Keys
  used in one command share a slot (bot/cluster/streams.py says how).
- `sentinel`: the Sentinels (REDIS_SENTINELS) name the master of
  REDIS_SENTINEL_MASTER; after a failover the client asks them again and
  follows the new master without a restart. A write refused by the old master
  turned replica (READONLY) is a connection error to redis-py's Sentinel pool:
  it is sent again to the new master.

Commands that meet a reset connection or a switch are retried for about two
seconds (`ride_out_restarts`, gateways and agents), then fail with one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.cluster import RedisCluster
from redis.exceptions import ClusterDownError, RedisClusterException, RedisError, ResponseError, TryAgainError
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from bot.ops.config import Config

T = TypeVar("T")


# What a cluster client raises while its nodes restart or a shard fails over (RedisClusterException is
# not a RedisError); one server's client rides these out with its own retry.
SWITCHING = (
    redis.ConnectionError,
    redis.TimeoutError,
    RedisClusterException,
    ClusterDownError,
    TryAgainError,
)
RIDE_OUT_S = 2.5


def riding_out(client: Any, call: Callable[[], T], for_s: float = RIDE_OUT_S) -> T:
    """`call()`, sent again for up to `for_s` while a Redis Cluster is switching (nodes restarting,
    a shard failing over: the slots are learned again); at once for any other client. What still
    fails is raised as a RedisError, so callers turn it into their one line."""
    if not isinstance(client, RedisCluster):
        return call()
    deadline = time.monotonic() + for_s
    wait = 0.05
    while True:
        try:
            return call()
        except SWITCHING as err:
            if time.monotonic() + wait > deadline:
                if isinstance(err, RedisError):
                    raise
                raise redis.ConnectionError(str(err)) from None
            time.sleep(wait)
            wait = min(0.5, wait * 2)


def said(err: BaseException) -> str:
    """A Redis error as one short line. redis-py's "No master found" appends the repr of every
    Sentinel it asked (clients, pools, settings): the name of the master says enough."""
    text = " ".join(str(err).split()) or type(err).__name__
    if isinstance(err, MasterNotFoundError):
        text = text.split(" : ", 1)[0] + " (no Sentinel answered with a master)"
    return text[:300]


class NotThisMode(ValueError):
    """The Redis at REDIS_URL is not of the configured shape (one line, saying what to set)."""


@dataclass(frozen=True)
class RedisTarget:
    url: str | None
    mode: str = "single"
    password: str | None = None
    ca_bundle: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    master: str | None = None
    sentinel_password: str | None = None

    @classmethod
    def of(cls, cfg: Config) -> RedisTarget:
        return cls(
            url=cfg.redis_url,
            mode=cfg.redis_mode,
            password=cfg.redis_password,
            ca_bundle=cfg.redis_ca_bundle,
            sentinels=cfg.redis_sentinels,
            master=cfg.redis_sentinel_master,
            sentinel_password=cfg.redis_sentinel_password,
        )

    @property
    def configured(self) -> bool:
        return bool(self.url) or self.mode == "sentinel"

    @property
    def shown(self) -> str:
        """Where it is, for messages: never a password."""
        if self.mode == "sentinel":
            where = ",".join(f"{h}:{p}" for h, p in self.sentinels)
            return f"sentinel://{where}/{self.master}"
        return shown_url(self.url or "")


def shown_url(url: str) -> str:
    """The URL without user:password, for messages."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return f"unix://{parts.path}"
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _retry() -> Retry:
    return Retry(ExponentialBackoff(cap=0.5, base=0.05), 6)


def connect(target: RedisTarget, *, timeout_s: float = 5.0, ride_out_restarts: bool = False) -> Any:
    """A decoded-strings client of `target`'s shape (redis.Redis, or RedisCluster)."""
    options: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "decode_responses": True,
    }
    if target.password:
        options["password"] = target.password
    if target.ca_bundle:
        options["ssl_ca_certs"] = target.ca_bundle
    if target.mode == "sentinel":
        return _sentinel_master(target, options, ride_out_restarts)
    assert target.url is not None
    if target.mode == "cluster":
        if ride_out_restarts:
            options["retry"] = _retry()
        return RedisCluster.from_url(target.url, **options)
    if ride_out_restarts:
        # Gateways and agents outlive a Redis restart (AOF keeps the streams): a command that meets a
        # reset connection is sent again on a new one for about two seconds before it fails.
        options["retry"] = _retry()
        options["retry_on_error"] = [redis.ConnectionError, redis.TimeoutError]
    return redis.Redis.from_url(target.url, **options)


def _sentinel_master(target: RedisTarget, options: dict[str, Any], ride_out: bool) -> Any:
    assert target.master is not None  # load_config requires it in sentinel mode
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": options["socket_timeout"],
        "socket_connect_timeout": options["socket_connect_timeout"],
        # One try per Sentinel: redis-py's default retries a dead Sentinel for 3 s before asking the
        # next one, on every discovery. The master client's own retry asks them all again.
        "retry": Retry(NoBackoff(), 0),
    }
    if target.sentinel_password:
        sentinel_kwargs["password"] = target.sentinel_password
    if target.url and target.url.startswith("rediss://"):
        options["ssl"] = True
    # Always retried: a switch of master is a connection error for a moment, by design.
    options["retry"] = _retry() if ride_out else Retry(ExponentialBackoff(cap=0.5, base=0.05), 3)
    options["retry_on_error"] = [redis.ConnectionError, redis.TimeoutError]
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs, **options)
    return sentinel.master_for(target.master, **options)


def check_not_cluster(client: Any, target: RedisTarget) -> None:
    """Refuse a single-mode client pointed at a cluster node (NotThisMode), before anything runs."""
    if target.mode != "single":
        return
    try:
        info = client.info("cluster")
    except ResponseError:  # INFO refused (ACL) or unknown: nothing to tell from
        return
    except RedisError:
        raise
    if str(info.get("cluster_enabled", "0")) == "1":
        raise NotThisMode(
            f"REDIS_URL {target.shown} is a Redis Cluster node: set GPUBOT_REDIS_MODE=cluster "
            "(a plain client there fails with MOVED)"
        )
