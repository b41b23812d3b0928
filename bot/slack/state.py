"""The state store: Redis when REDIS_URL is set (any number of replicas), else process memory.

Values are JSON. Every Redis failure becomes StateUnavailable with one line
that names the host but never the password the URL may carry.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack

import redis
from redis.cluster import RedisCluster
from redis.exceptions import RedisError

from bot.slack.redisconn import (
    REQUEST_TIMEOUT_S,
    RIDE_OUT_S,
    RedisTarget,
    check_not_cluster,
    connect,
    replicated,
    riding_out,
    said,
    shown_url,
)
from bot.slack.renewer import LOCK_LEASE_S, LockRenewer
from handlers.ports import JSONValue, LockNotAcquired, StateStore, StateUnavailable

__all__ = ["MemoryState", "RedisState", "StateUnavailable", "open_state", "redis_client", "shown_url"]

T = TypeVar("T")
SINGLE_REPLICA_NOTE = "single replica: state in process memory (set REDIS_URL to run several replicas)"


class RedisLink(TypedDict, total=False):
    """How to reach Redis besides its URL; what is left out takes `redis_client`'s default."""

    ca_bundle: str | None
    password: str | None
    timeout_s: float
    ride_out_restarts: bool


def redis_client(
    url: str,
    *,
    ca_bundle: str | None = None,
    password: str | None = None,
    timeout_s: float = REQUEST_TIMEOUT_S,
    ride_out_restarts: bool = False,
) -> redis.Redis:
    """A redis-py client (decoded strings) for one server at REDIS_URL: `rediss://` is TLS, verified
    against the system's CAs or `ca_bundle` (REDIS_CA_BUNDLE); `password` (REDIS_PASSWORD) overrides
    the URL's. Agents in other clusters reach Redis over the network: this keeps that link private.
    Every shape (cluster, Sentinel): bot/slack/redisconn.py `connect`."""
    target = RedisTarget(url, password=password, ca_bundle=ca_bundle)
    return connect(target, timeout_s=timeout_s, ride_out_restarts=ride_out_restarts)  # type: ignore[no-any-return]


# Compare-and-delete: a lock that expired and was taken by someone else is not ours to release.
_DELETE_IF_SAME = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Compare-and-renew in one step: a lease that expired and was taken by someone else is not ours to renew.
_EXTEND_IF_SAME = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class RedisState:
    """StateStore over redis-py; safe to share between threads (redis-py pools connections)."""

    def __init__(
        self,
        url: str | None,
        *,
        prefix: str = "gpubot:",
        target: RedisTarget | None = None,
        lock_lease_s: float = LOCK_LEASE_S,
        ride_out_s: float = RIDE_OUT_S,
        **link: Unpack[RedisLink],
    ) -> None:
        target = target or RedisTarget(url, password=link.get("password"), ca_bundle=link.get("ca_bundle"))
        self.shown = target.shown
        self._prefix = prefix
        self.lock_lease_s = lock_lease_s
        self.ride_out_s = ride_out_s  # how long a Redis Cluster's switch is ridden out (redisconn.riding_out)
        try:
            self._redis: Any = connect(
                target,
                timeout_s=link.get("timeout_s", REQUEST_TIMEOUT_S),
                ride_out_restarts=link.get("ride_out_restarts", False),
            )
        except (ValueError, RedisError) as err:
            raise StateUnavailable(f"Redis URL {self.shown} is not usable: {_short(err)}") from None
        self._target = target
        self._renewer = LockRenewer(self)

    def check_mode(self) -> None:
        """Refuse a plain client at a Redis Cluster node (NotThisMode: one line saying to set the mode)."""
        self._do("read INFO cluster", lambda: check_not_cluster(self._redis, self._target))

    def __repr__(self) -> str:
        return f"RedisState({self.shown!r})"

    def _do(self, what: str, call: Callable[[], T]) -> T:
        try:
            return riding_out(self._redis, call, self.ride_out_s)
        except RedisError as err:
            raise StateUnavailable(f"Redis at {self.shown} failed to {what}: {_short(err)}") from None

    def _key(self, key: str) -> str:
        return self._prefix + key

    def get(self, key: str) -> JSONValue | None:
        raw = self._do(f"read {key}", lambda: self._redis.get(self._key(key)))
        return None if raw is None else json.loads(raw)

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        """Written, and held by a replica where the master has one (redisconn.replicated): a done mark
        or a post's record a failover discarded would run or post it again."""
        data, k = json.dumps(value), self._key(key)
        self._do(
            f"write {key}",
            lambda: replicated(
                self._redis,
                k,
                lambda: self._redis.set(k, data, px=_ms(ttl_s)),
                lambda p: p.set(k, data, px=_ms(ttl_s)),
            ),
        )

    def get_many(self, keys: Sequence[str]) -> list[JSONValue | None]:
        """Several GETs in one round trip (a pipeline, not MGET: keys of different slots may go
        to different nodes). A webhook of 10,000 alerts looks up 10,000 fingerprints."""

        def run() -> list[Any]:
            pipe = self._redis.pipeline(transaction=False)
            for key in keys:
                pipe.get(self._key(key))
            return list(pipe.execute())

        raws = self._do(f"read {len(keys)} keys", run) if keys else []
        return [None if raw is None else json.loads(raw) for raw in raws]

    def set_many(self, items: Mapping[str, JSONValue], ttl_s: float) -> None:
        """Several SETs in one round trip (a pipeline)."""

        def run() -> None:
            pipe = self._redis.pipeline(transaction=False)
            for key, value in items.items():
                pipe.set(self._key(key), json.dumps(value), px=_ms(ttl_s))
            pipe.execute()

        if items:
            self._do(f"write {len(items)} keys", run)

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        data, k = json.dumps(value), self._key(key)
        return bool(
            self._do(
                f"write {key}",
                lambda: replicated(
                    self._redis,
                    k,
                    lambda: self._redis.set(k, data, px=_ms(ttl_s), nx=True),
                    lambda p: p.set(k, data, px=_ms(ttl_s), nx=True),
                ),
            )
        )

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        data = json.dumps(value)
        return bool(
            self._do(
                f"renew {key}",
                lambda: self._redis.eval(_EXTEND_IF_SAME, 1, self._key(key), data, _ms(ttl_s)),
            )
        )

    def delete(self, key: str) -> None:
        self._do(f"delete {key}", lambda: self._redis.delete(self._key(key)))

    @contextmanager
    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> Iterator[None]:
        # SET NX PX with a random token, released by a Lua compare-and-delete, so a holder that outlived
        # its lease cannot release someone else's lock. The key lives at most LOCK_LEASE_S and is
        # renewed while the holder's work runs (the renewer thread): a holder SIGKILLed at any point
        # frees it within the lease, never after `timeout_s` (which may be minutes).
        # Polled every 5 ms: a webhook waits on a busy subject in milliseconds, not a tenth of a second.
        key = self._key("lock:" + name)
        token = uuid.uuid4().hex
        lease = min(timeout_s, self.lock_lease_s)
        deadline = time.monotonic() + wait_s
        while not self._do(f"take lock {name}", lambda: self._redis.set(key, token, px=_ms(lease), nx=True)):
            if time.monotonic() >= deadline:
                raise LockNotAcquired(f"lock {name} is held elsewhere (waited {wait_s:g}s)")
            time.sleep(0.005)
        self._renewer.hold(key, token, lease, time.monotonic() + timeout_s)
        try:
            yield
        finally:
            self._renewer.drop(key, token)
            self._do(f"release lock {name}", lambda: self._redis.eval(_DELETE_IF_SAME, 1, key, token))

    def renew_raw(self, key: str, token: str, lease_s: float) -> bool:
        """Renew a raw key (a lock) while it still holds `token`; the renewer's one call."""
        return bool(
            self._do(f"renew {key}", lambda: self._redis.eval(_EXTEND_IF_SAME, 1, key, token, _ms(lease_s)))
        )

    def script(self, what: str, source: str, key: str, *args: int | str) -> Any:
        """A Lua script of one key (this store's prefix added) and `args` (bot/slack/pace.py, flood.py)."""
        k = self._key(key)
        return self._do(what, lambda: self._redis.eval(source, 1, k, *args))

    def ping(self) -> bool:
        """Every primary answers (a Redis Cluster's state spans its shards: one stalled primary holds
        a third of the keys), or the one server / Sentinel's master does."""
        if isinstance(self._redis, RedisCluster):
            return bool(
                self._do("answer PING", lambda: self._redis.ping(target_nodes=RedisCluster.PRIMARIES))
            )
        return bool(self._do("answer PING", self._redis.ping))

    def close(self) -> None:
        self._redis.close()


class MemoryState:
    """StateStore in process memory: one replica only. Thread-safe; expired keys are pruned."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, prune_every: int = 256) -> None:
        self._clock = clock
        self._data: dict[str, tuple[float, str]] = {}  # key -> (expires at, JSON)
        self._locks: dict[str, tuple[float, str]] = {}  # name -> (expires at, owner token)
        self._counts: dict[str, tuple[int, float]] = {}  # key -> (count, window ends at)
        self._mutex = threading.Condition()
        self._writes = 0
        self._prune_every = prune_every

    def _live(self, key: str, now: float) -> str | None:
        hit = self._data.get(key)
        if hit is None:
            return None
        if hit[0] <= now:
            del self._data[key]
            return None
        return hit[1]

    def _prune(self, now: float) -> None:
        self._writes += 1
        if self._writes % self._prune_every == 0:
            for key in [k for k, (exp, _) in self._data.items() if exp <= now]:
                del self._data[key]

    def get(self, key: str) -> JSONValue | None:
        with self._mutex:
            raw = self._live(key, self._clock())
        return None if raw is None else json.loads(raw)

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        data = json.dumps(value)
        with self._mutex:
            now = self._clock()
            self._data[key] = (now + ttl_s, data)
            self._prune(now)

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        data = json.dumps(value)
        with self._mutex:
            now = self._clock()
            if self._live(key, now) is not None:
                return False
            self._data[key] = (now + ttl_s, data)
            self._prune(now)
            return True

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        data = json.dumps(value)
        with self._mutex:
            now = self._clock()
            if self._live(key, now) != data:
                return False
            self._data[key] = (now + ttl_s, data)
            return True

    def delete(self, key: str) -> None:
        with self._mutex:
            self._data.pop(key, None)

    def __len__(self) -> int:
        with self._mutex:
            now = self._clock()
            return sum(1 for exp, _ in self._data.values() if exp > now)

    @contextmanager
    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> Iterator[None]:
        token = uuid.uuid4().hex
        deadline = time.monotonic() + wait_s
        with self._mutex:
            while True:
                held = self._locks.get(name)
                now = self._clock()
                if held is None or held[0] <= now:
                    self._locks[name] = (now + timeout_s, token)
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LockNotAcquired(f"lock {name} is held elsewhere (waited {wait_s:g}s)")
                self._mutex.wait(min(left, max(0.001, held[0] - now), 0.05))
        try:
            yield
        finally:
            with self._mutex:
                held = self._locks.get(name)
                if held is not None and held[1] == token:
                    del self._locks[name]
                self._mutex.notify_all()

    def count(self, key: str, window_s: float) -> tuple[int, float]:
        with self._mutex:
            now = time.monotonic()
            n, until = self._counts.get(key, (0, now + window_s))
            if until <= now:
                n, until = 0, now + window_s
            if len(self._counts) > 10_000:  # windows that ended are forgotten
                self._counts = {k: v for k, v in self._counts.items() if v[1] > now}
            self._counts[key] = (n + 1, until)
            return n + 1, until - now

    def ping(self) -> bool:
        return True


def _short(err: BaseException) -> str:
    return said(err)


def open_state(
    redis_url: str | None,
    *,
    ca_bundle: str | None = None,
    password: str | None = None,
    ride_out_restarts: bool = False,
    target: RedisTarget | None = None,
    lock_lease_s: float = LOCK_LEASE_S,
    ride_out_s: float = RIDE_OUT_S,
) -> tuple[StateStore, str]:
    """(store, note for the start-up log). Raises StateUnavailable when Redis does not answer, and
    NotThisMode when REDIS_URL is a cluster node but the mode is single."""
    target = target or RedisTarget(redis_url, password=password, ca_bundle=ca_bundle)
    if not target.configured:
        return MemoryState(), SINGLE_REPLICA_NOTE
    store = RedisState(
        None,
        target=target,
        ride_out_restarts=ride_out_restarts,
        lock_lease_s=lock_lease_s,
        ride_out_s=ride_out_s,
    )
    store.ping()
    store.check_mode()
    return store, f"state in Redis at {store.shown}: replicas share walks, buttons and the daily digest"


if TYPE_CHECKING:  # both stores satisfy the port
    _memory: StateStore = MemoryState()
    _redis: StateStore = RedisState("redis://127.0.0.1:6379/0")
