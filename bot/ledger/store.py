"""The ledger's storage: one Redis hash per node, or process memory for a single replica.

Key layout (spec/interfaces.md, "Redis as it runs in production": no command spans two
hash slots): `gpubot:ledger:{NODE}` holds the node's entries (`ev:<id>` -> JSON event) and
GPU identities (`gpu:<uuid>` -> JSON); the braces make the node name the hash tag, so a
node's read-modify-write is one WATCH/MULTI/EXEC on one key, safe on Redis Cluster.
`gpubot:ledger:nodes` (a sorted set: node -> last write) lists the nodes for the export, and
`gpubot:ledger:gpu:{UUID}` (a sorted set: node -> when the GPU was last seen there) follows a card
from node to node; both are written on their own after the node's transaction, steps safe to
repeat. Every key expires after the retention (GPUBOT_LEDGER_RETENTION_DAYS), indexes included.
The node's hash also keeps `present`: the GPUs DCGM showed on the node at the last look (a GPU no
longer there was replaced and leaves the node's rules, layers/ledger_rules.py).

Writes are idempotent: an event already there (the same node, GPU, kind and Xid within the
same-event tolerance, layers/ledger_rules.py) is merged into its entry, never added twice.
Entries older than the retention are dropped on every write and on read; the key expires
with the retention too, so a node nobody writes about leaves nothing behind.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import msgspec.structs

from layers.facts.ledgerevents import Event, coalesce
from layers.facts.ledgerfacts import GpuId

Fields = dict[str, str]
PRESENT = "present"  # the node's hash field: the GPUs on it at the last look
Change = tuple[Fields, list[str]]  # (fields to set, fields to delete)


class LedgerUnavailable(Exception):
    """The ledger's store failed; the message is one line without secrets."""


class Backend(Protocol):
    """Atomic per-node updates and reads; `update` calls `change` with the node's fields and
    applies what it returns in one step (retried when a concurrent writer got there first)."""

    def update(self, node: str, change: Callable[[Fields], Change], ttl_s: float, now: float) -> None: ...

    def read(self, node: str) -> Fields: ...

    def nodes(self) -> list[str]: ...

    def seen_gpu(self, gpus: Iterable[str], node: str, ttl_s: float, now: float) -> None: ...

    def gpu_nodes(self, gpu: str) -> list[str]: ...


class MemoryBackend:
    """Process memory (one replica): a dict per node under one lock."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._data: dict[str, tuple[float, Fields]] = {}
        self._gpus: dict[str, tuple[float, dict[str, float]]] = {}  # uuid -> (expiry, node -> last seen)
        self._mutex = threading.Lock()
        self._clock = clock

    def update(self, node: str, change: Callable[[Fields], Change], ttl_s: float, now: float) -> None:
        with self._mutex:
            fields = dict(self._live(node))
            put, drop = change(fields)
            fields.update(put)
            for f in drop:
                fields.pop(f, None)
            self._data[node] = (self._clock() + ttl_s, fields)

    def _live(self, node: str) -> Fields:
        hit = self._data.get(node)
        if hit is None or hit[0] <= self._clock():
            self._data.pop(node, None)
            return {}
        return hit[1]

    def read(self, node: str) -> Fields:
        with self._mutex:
            return dict(self._live(node))

    def nodes(self) -> list[str]:
        with self._mutex:
            return sorted(n for n in list(self._data) if self._live(n))

    def seen_gpu(self, gpus: Iterable[str], node: str, ttl_s: float, now: float) -> None:
        with self._mutex:
            for gpu in gpus:
                _, where = self._gpus.get(gpu, (0.0, {}))
                where = {n: t for n, t in where.items() if t >= now - ttl_s}
                where[node] = now
                self._gpus[gpu] = (self._clock() + ttl_s, where)

    def gpu_nodes(self, gpu: str) -> list[str]:
        with self._mutex:
            hit = self._gpus.get(gpu)
            if hit is None or hit[0] <= self._clock():
                return []
            return sorted(hit[1], key=lambda n: (hit[1][n], n))


class RedisBackend:
    """A redis-py client (decoded strings): WATCH the node's hash, MULTI, HSET/HDEL, PEXPIRE, EXEC."""

    def __init__(self, client: Any, *, prefix: str = "gpubot:", shown: str = "Redis") -> None:
        self._redis = client
        self._prefix = prefix
        self._shown = shown

    def key(self, node: str) -> str:
        return f"{self._prefix}ledger:{{{node}}}"

    @property
    def _index(self) -> str:
        return f"{self._prefix}ledger:nodes"

    def _fail(self, what: str, err: Exception) -> LedgerUnavailable:
        text = " ".join(str(err).split())[:300] or type(err).__name__
        return LedgerUnavailable(f"{self._shown} failed to {what} the ledger: {text}")

    def update(self, node: str, change: Callable[[Fields], Change], ttl_s: float, now: float) -> None:
        from redis.exceptions import RedisError, WatchError

        key = self.key(node)
        try:
            for _ in range(20):
                with self._redis.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(key)
                        put, drop = change(dict(pipe.hgetall(key)))
                        pipe.multi()
                        if put:
                            pipe.hset(key, mapping=put)
                        if drop:
                            pipe.hdel(key, *drop)
                        pipe.pexpire(key, max(1, int(ttl_s * 1000)))
                        pipe.execute()
                        break
                    except WatchError:
                        continue  # another writer changed the node between read and write: read again
            else:
                raise LedgerUnavailable(f"{self._shown}: the ledger of {node} kept changing under 20 tries")
            # The index is a key of its own slot: written after, a step safe to repeat; it expires too.
            self._redis.zadd(self._index, {node: now})
            self._redis.zremrangebyscore(self._index, "-inf", now - ttl_s)
            self._redis.pexpire(self._index, max(1, int(ttl_s * 1000)))
        except RedisError as err:
            raise self._fail("write", err) from None

    def gpu_key(self, gpu: str) -> str:
        return f"{self._prefix}ledger:gpu:{{{gpu}}}"

    def seen_gpu(self, gpus: Iterable[str], node: str, ttl_s: float, now: float) -> None:
        from redis.exceptions import RedisError

        try:
            for gpu in gpus:
                key = self.gpu_key(gpu)  # one slot per GPU: no command spans two
                with self._redis.pipeline(transaction=True) as pipe:
                    pipe.zadd(key, {node: now})
                    pipe.zremrangebyscore(key, "-inf", now - ttl_s)
                    pipe.pexpire(key, max(1, int(ttl_s * 1000)))
                    pipe.execute()
        except RedisError as err:
            raise self._fail("write", err) from None

    def gpu_nodes(self, gpu: str) -> list[str]:
        from redis.exceptions import RedisError

        try:
            return list(self._redis.zrange(self.gpu_key(gpu), 0, -1))
        except RedisError as err:
            raise self._fail("read", err) from None

    def read(self, node: str) -> Fields:
        from redis.exceptions import RedisError

        try:
            return dict(self._redis.hgetall(self.key(node)))
        except RedisError as err:
            raise self._fail("read", err) from None

    def nodes(self) -> list[str]:
        from redis.exceptions import RedisError

        try:
            return sorted(self._redis.zrange(self._index, 0, -1))
        except RedisError as err:
            raise self._fail("list", err) from None


class Ledger:
    """The ledger over a backend: record events (idempotently), read a node's, list nodes."""

    def __init__(
        self, backend: Backend, retention_days: int = 90, clock: Callable[[], float] = time.time
    ) -> None:
        self.backend = backend
        self.retention_s = retention_days * 86400
        self._clock = clock

    def record(
        self,
        node: str,
        events: Iterable[Event],
        gpus: Mapping[str, GpuId] | None = None,
        now: float | None = None,
        present: Iterable[str] | None = None,
    ) -> int:
        """Write a node's events and GPU identities (and, when known, the GPUs on it now); returns
        how many entries are new. Each GPU's index notes the node: the ledger follows the card."""
        now = self._clock() if now is None else now
        incoming = [
            e for e in coalesce(e for e in events if e.node == node) if e.at >= now - self.retention_s
        ]
        added = 0

        def change(fields: Fields) -> Change:
            nonlocal added
            added = 0
            kept = {f: Event.from_record(json.loads(v)) for f, v in fields.items() if f.startswith("ev:")}
            drop = [f for f, ev in kept.items() if ev.at < now - self.retention_s]
            live = {f: ev for f, ev in kept.items() if f not in drop}
            put: Fields = {}
            for ev in incoming:
                match = next((f for f, old in live.items() if old.same_as(ev)), None)
                if match is None:
                    field = "ev:" + ev.event_id
                    live[field] = ev
                    put[field] = json.dumps(ev.to_record(), sort_keys=True)
                    added += 1
                    continue
                merged = live[match].merged(ev)
                if merged != live[match]:
                    live[match] = merged
                    put[match] = json.dumps(merged.to_record(), sort_keys=True)
            for uuid, gid in (gpus or {}).items():
                old = json.loads(fields.get("gpu:" + uuid, "{}"))
                new = {k: v or old.get(k, "") for k, v in msgspec.structs.asdict(gid).items()}
                if new != old:
                    put["gpu:" + uuid] = json.dumps(new, sort_keys=True)
            if here is not None:
                put[PRESENT] = json.dumps({"at": now, "gpus": here})
            return put, drop

        here = sorted(set(present)) if present is not None else None
        self.backend.update(node, change, self.retention_s, now)
        seen = {e.gpu for e in incoming if e.gpu} | set(gpus or {}) | set(here or ())
        if seen:
            self.backend.seen_gpu(sorted(seen), node, self.retention_s, now)
        return added

    def read(self, node: str, now: float | None = None) -> tuple[list[Event], dict[str, GpuId]]:
        """The node's live entries in time order and its GPUs' identities."""
        events, gpus, _ = self.snapshot(node, now)
        return events, gpus

    def snapshot(
        self, node: str, now: float | None = None
    ) -> tuple[list[Event], dict[str, GpuId], set[str] | None]:
        """The node's live entries, its GPUs' identities and the GPUs on it at the last look, in one read."""
        now = self._clock() if now is None else now
        fields = self.backend.read(node)
        raw = fields.get(PRESENT)
        present = {str(g) for g in json.loads(raw).get("gpus") or []} if raw else None
        events = [Event.from_record(json.loads(v)) for f, v in fields.items() if f.startswith("ev:")]
        gpus = {f[4:]: GpuId(**json.loads(v)) for f, v in fields.items() if f.startswith("gpu:")}
        live = sorted((e for e in events if e.at >= now - self.retention_s), key=lambda e: (e.at, e.kind))
        return live, gpus, present

    def gpu_history(self, gpu: str, now: float | None = None, besides: str = "") -> list[Event]:
        """The GPU's entries on every node it was seen on but `besides` (a moved card keeps its history)."""
        out: list[Event] = []
        for node in self.backend.gpu_nodes(gpu):
            if node != besides:
                out += [e for e in self.read(node, now=now)[0] if e.gpu == gpu]
        return out

    def nodes(self) -> list[str]:
        return self.backend.nodes()


def ledger_prefix(cluster_name: str | None) -> str:
    """The keys' prefix: per cluster when the process names one (GPUBOT_CLUSTER_NAME). Many clusters'
    agents share one Redis and their node names repeat (every cluster has a `gpu-7`): one node's
    history must not be another cluster's node's."""
    return f"gpubot:{cluster_name}:" if cluster_name else "gpubot:"


def open_ledger(
    client: Any | None, retention_days: int, *, shown: str = "Redis", prefix: str = "gpubot:"
) -> Ledger:
    """The ledger in Redis (a redis-py client) or, without one, in this process's memory."""
    backend: Backend = (
        RedisBackend(client, prefix=prefix, shown=shown) if client is not None else MemoryBackend()
    )
    return Ledger(backend, retention_days)
