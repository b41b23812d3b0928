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

A stalled Redis (a frozen primary, a full disk, a paused VM) accepts and never
answers: every call is bounded in time whatever the mode. The socket waits
`timeout_s` (REQUEST_TIMEOUT_S) for an answer and CONNECT_TIMEOUT_S for a
connection; a thread waits at most POOL_WAIT_S for a free connection of the
pool (POOL_SIZE of them), and retries stop once the next try could not end
within the retry budget (`DeadlineRetry`): a try that timed out is not sent
again past it.
"""

from __future__ import annotations

import logging
import threading
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
log = logging.getLogger("gpubot.redis")


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
REQUEST_TIMEOUT_S = 2.0  # a command's answer; above an agent's 1 s XREADGROUP block
CONNECT_TIMEOUT_S = 1.0
POOL_SIZE = 64  # connections per server, per process
POOL_WAIT_S = 1.0  # for a free one, when all are busy (all of them stuck on a stalled server)
RETRY_BUDGET_S = 2.5  # a command and its retries, in all


class DeadlineRetry(Retry):
    """redis-py's Retry bounded in total time, not only in count: a try is made again only while it
    could still end within `budget_s` of the first, judged by how long the last one took (a refused
    connection fails in a millisecond and is retried; a socket timeout took `REQUEST_TIMEOUT_S`)."""

    def __init__(self, budget_s: float = RETRY_BUDGET_S, retries: int = 6) -> None:
        super().__init__(ExponentialBackoff(cap=0.5, base=0.05), retries)
        self.budget_s = budget_s

    def call_with_retry(  # type: ignore[override]
        self,
        do: Callable[[], T],
        fail: Callable[..., Any],
        is_retryable: Callable[[Exception], bool] | None = None,
        with_failure_count: bool = False,
    ) -> T:
        deadline = time.monotonic() + self.budget_s
        failures = 0
        while True:
            began = time.monotonic()
            try:
                return do()
            except self._supported_errors as error:
                failures += 1
                if with_failure_count:
                    fail(error, failures)
                else:
                    fail(error)
                wait = self._backoff.compute(failures)
                took = time.monotonic() - began
                retryable = (self._is_retryable is None or self._is_retryable(error)) and (
                    is_retryable is None or is_retryable(error)
                )
                if not retryable or failures > self._retries or time.monotonic() + wait + took > deadline:
                    raise error
                if wait > 0:
                    time.sleep(wait)


def riding_out(client: Any, call: Callable[[], T], for_s: float = RIDE_OUT_S) -> T:
    """`call()`, sent again for up to `for_s` while a Redis Cluster is switching (nodes restarting,
    a shard failing over: the slots are learned again); at once for any other client. What still
    fails is raised as a RedisError, so callers turn it into their one line."""
    # One server or Sentinel's master: redis-py's own retry rides out a reset connection; what is left
    # is a write no replica confirmed (NotReplicated, below), sent again here.
    retried = SWITCHING if isinstance(client, RedisCluster) else (NotReplicated,)
    deadline = time.monotonic() + for_s
    wait = 0.05
    while True:
        began = time.monotonic()
        try:
            return call()
        except retried as err:
            # A try that took long (a stalled node: a socket timeout) is not made again past the deadline.
            if time.monotonic() + wait + (time.monotonic() - began) > deadline:
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


def _retry(budget_s: float = RETRY_BUDGET_S) -> Retry:
    return DeadlineRetry(budget_s)


def connect(
    target: RedisTarget, *, timeout_s: float = REQUEST_TIMEOUT_S, ride_out_restarts: bool = False
) -> Any:
    """A decoded-strings client of `target`'s shape (redis.Redis, or RedisCluster), every call bounded
    in time (the module's docstring)."""
    options: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": min(timeout_s, CONNECT_TIMEOUT_S),
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
        # Always a DeadlineRetry: redis-py's own for a cluster backs off up to 10 s between tries.
        options["retry"] = _retry() if ride_out_restarts else DeadlineRetry(RETRY_BUDGET_S, 1)
        return RedisCluster.from_url(target.url, max_connections=POOL_SIZE, **options)
    if ride_out_restarts:
        # Gateways and agents outlive a Redis restart (AOF keeps the streams): a command that meets a
        # reset connection is sent again on a new one for about two seconds before it fails.
        options["retry"] = _retry()
        options["retry_on_error"] = [redis.ConnectionError, redis.TimeoutError]
    else:
        options["retry"] = DeadlineRetry(RETRY_BUDGET_S, 1)
    # A blocking pool: when every connection is stuck on a stalled server, the next caller waits
    # POOL_WAIT_S for one, then fails, instead of opening connections without end.
    pool = redis.BlockingConnectionPool.from_url(
        target.url, max_connections=POOL_SIZE, timeout=POOL_WAIT_S, **options
    )
    client = redis.Redis(connection_pool=pool)
    client.auto_close_connection_pool = True  # close() ends the pool's connections, as from_url's would
    return client


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
    options["retry"] = _retry() if ride_out else DeadlineRetry(RETRY_BUDGET_S, 3)
    options["retry_on_error"] = [redis.ConnectionError, redis.TimeoutError]
    sentinel = Sentinel(list(target.sentinels), sentinel_kwargs=sentinel_kwargs, **options)
    # redis-py's Sentinel pool has no blocking variant: past POOL_SIZE a caller fails at once.
    return sentinel.master_for(target.master, max_connections=POOL_SIZE, **options)


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


# --- writes that must survive a failover ---------------------------------------------------------

NOT_REPLICATED = "no replica confirmed"
WAIT_MS = 500  # how long a write waits for a replica to hold it (WAIT 1 <ms>)
_REPLICAS_TTL_S = 10.0
_replicas: dict[int, tuple[float, bool]] = {}  # id(node client) -> (when read, has or had replicas)
_replicas_lock = threading.Lock()


class NotReplicated(redis.ConnectionError):
    """The master took a write no replica confirmed within WAIT_MS: it may have been demoted (a
    Sentinel or a cluster failover promoted its replica), and the write is then discarded. Callers
    send it again (the writes are idempotent), on the master the switch names."""


def _node_client(client: Any, key: str) -> Any:
    if isinstance(client, RedisCluster):
        return client.get_redis_connection(client.get_node_from_key(key))
    return client


def _has_replicas(node: Any) -> bool:
    """Whether this master has, or had, replicas: a master that had one and has none now is the
    moment of a switch (its replica was just promoted), when a write is most likely discarded."""
    now = time.monotonic()
    with _replicas_lock:
        seen = _replicas.get(id(node))
    if seen is None or (not seen[1] and now - seen[0] > _REPLICAS_TTL_S):
        try:
            count = int(node.info("replication").get("connected_slaves", 0))
        except ResponseError:  # INFO refused (an ACL without it): no WAIT, as before
            count = 0
        seen = (now, count > 0)
        with _replicas_lock:
            _replicas[id(node)] = seen
    return seen[1]


def _still_master(client: Any, node: Any, key: str) -> bool:
    """After a write no replica confirmed: whether the master it went to is still the one the Sentinels
    (or the cluster's slot map) name. Then only its replicas are away and the write stands."""
    if isinstance(client, RedisCluster):
        before = client.get_node_from_key(key).name
        client.nodes_manager.initialize()
        return bool(client.get_node_from_key(key).name == before)
    pool = getattr(client, "connection_pool", None)
    if pool is None or not hasattr(pool, "get_master_address"):
        return True  # one server: nobody promotes a replica behind our back
    before = pool.master_address
    return bool(pool.get_master_address() == before)


def replicated(client: Any, key: str, direct: Callable[[], T], build: Callable[[Any], None]) -> T:
    """`direct()` where the master of `key` has no replica (one server: as ever). Where it has, the
    same command as `build` adds it to a pipeline on that master, then `WAIT 1 WAIT_MS` on the same
    connection: its answer, or NotReplicated when no replica confirmed it (a demoted master's write,
    discarded at the switch)."""
    node = _node_client(client, key)
    if not _has_replicas(node):
        return direct()
    wait_ms = WAIT_MS
    pipe = node.pipeline(transaction=False)
    build(pipe)
    pipe.execute_command("WAIT", 1, wait_ms)
    try:
        answer, acked = pipe.execute()
    except ResponseError as err:
        if str(err).startswith(("MOVED", "ASK", "READONLY", "CLUSTERDOWN")):
            with _replicas_lock:
                _replicas.pop(id(node), None)
            if isinstance(client, RedisCluster):
                client.nodes_manager.initialize()  # the slot moved with a failover: learn the map again
            raise redis.ConnectionError(f"the master changed: {str(err)[:120]}") from None
        raise
    if int(acked) < 1:
        if _still_master(client, node, key):
            log.warning(
                "no replica confirmed the write to %s within %d ms; its master is still the master",
                key,
                wait_ms,
            )
            return answer  # type: ignore[no-any-return]
        raise NotReplicated(f"{NOT_REPLICATED} the write to {key} within {wait_ms} ms")
    return answer  # type: ignore[no-any-return]
