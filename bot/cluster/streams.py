"""The Redis side of many clusters: one request stream per cluster, its consumer group, heartbeats.

Redis is the broker: `gpubot:requests:<cluster>` is a Stream trimmed with
`MAXLEN ~`, read by the consumer group `agents` (XREADGROUP, XACK); entries a
dead agent took stay in the group's pending-entry list until another agent
(or its restart) takes them over with XAUTOCLAIM. An entry that failed too
often is copied to `gpubot:dead:<cluster>`, then acknowledged: two steps safe
to repeat, since on a Redis Cluster the two streams are in different hash
slots and no command or MULTI may span them. Every command here names one key.
Agents heartbeat into the hash `gpubot:clusters` (one JSON field per cluster).
Nothing here decides what a request means: that is the agent's and the
gateway's business.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import redis
from redis.exceptions import RedisError, ResponseError

from bot.cluster.entries import ClusterSeen, Entry, Request
from bot.cluster.signing import RequestSigner
from bot.slack.redisconn import NOT_REPLICATED, RIDE_OUT_S, replicated, riding_out, said

REQUESTS = "gpubot:requests:{}"
DEAD = "gpubot:dead:{}"
UNROUTED = "gpubot:alerts:unrouted"  # alerts the gateway could send to no cluster, with why
CLUSTERS = "gpubot:clusters"
PROBE = "gpubot:readyz"  # the gateway's readiness write (a stream kept at one entry)
GROUP = "agents"
DEFAULT_MAXLEN = 10_000
DEAD_MAXLEN = 1_000
BURY_LOOKBACK = 50  # a re-burial looks for its first copy among this many newest dead entries


class StreamsUnavailable(Exception):
    """Redis failed or refused a stream command; one line, never the URL's password."""


@dataclass(frozen=True)
class QueueStats:
    """A cluster stream as /metrics shows it."""

    length: int  # entries kept in the stream (trimmed with MAXLEN ~)
    waiting: int  # queued, not yet delivered to any agent (the group's lag)
    pending: int  # delivered, not yet acknowledged
    oldest_pending_age_s: float  # 0 when nothing is pending
    dead: int


_NOW = "@now@"
_TIME = "return redis.call('TIME')"
# The heartbeat's time is Redis's: TIME, then the write, in one script.
_HEARTBEAT = """
local t = redis.call('TIME')
local now = string.format('%d.%03d', t[1], math.floor(tonumber(t[2]) / 1000))
local value = string.gsub(ARGV[2], '"@now@"', now, 1)
return redis.call('HSET', KEYS[1], ARGV[1], value)
"""


def _entry_ms(entry_id: str) -> int:
    return int(entry_id.split("-", 1)[0])


class ClusterStreams:
    """The stream commands over one redis-py client (decode_responses=True)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        shown: str = "redis",
        maxlen: int = DEFAULT_MAXLEN,
        clock: Callable[[], float] = time.time,
        signer: RequestSigner | None = None,
    ) -> None:
        self.redis = client
        # Signs what is queued and checks what is read; None only in tests of the bare commands.
        self.signer = signer
        self.shown = shown
        self.maxlen = maxlen
        self.clock = clock
        self._groups: set[str] = set()

    def _do(self, what: str, call: Callable[[], Any], ride_out_s: float = RIDE_OUT_S) -> Any:
        try:
            return riding_out(self.redis, call, ride_out_s)
        except RedisError as err:
            text = said(err)
            raise StreamsUnavailable(f"Redis at {self.shown} failed to {what}: {text}") from None

    # --- the gateway's side ----------------------------------------------------------------

    def queue(self, cluster: str, request: Request, patience_s: float = 0.0) -> str:
        """XADD the request to the cluster's stream (trimmed, approximately, to `maxlen`).

        Sent again for up to `patience_s` while Redis refuses it (a Sentinel or cluster failover), with
        the same signature and nonce: before each new try the stream's newest entries are looked through
        for that nonce, so an XADD whose answer was lost in the switch is not queued twice."""
        key = REQUESTS.format(cluster)
        fields = request.fields()
        if self.signer is not None:
            fields = self.signer.sign(key, fields)
        mark = ("nonce", fields["nonce"]) if "nonce" in fields else ("id", request.request_id)
        deadline = time.monotonic() + patience_s
        wait, tried, unconfirmed = 0.1, False, False
        while True:
            try:
                # After a write no replica confirmed, a copy found may sit on a master about to be
                # demoted (and be discarded): sent again instead. Agents run one copy of a nonce.
                if tried and not unconfirmed and (landed := self._queued_already(key, mark)) is not None:
                    return landed
                tried, unconfirmed = True, False
                # Held by a replica before it counts as queued (a demoted master's XADD is discarded at
                # the switch); not sent again inside: the next try looks for the nonce first.
                return str(
                    self._do(
                        f"queue on {key}",
                        lambda: replicated(
                            self.redis,
                            key,
                            lambda: self.redis.xadd(key, fields, maxlen=self.maxlen, approximate=True),  # type: ignore[arg-type]
                            lambda p: p.xadd(key, fields, maxlen=self.maxlen, approximate=True),
                        ),
                        0.0,
                    )
                )
            except StreamsUnavailable as err:
                unconfirmed = NOT_REPLICATED in str(err)
                if time.monotonic() + wait > deadline:
                    raise
                time.sleep(wait)
                wait = min(1.0, wait * 2)

    def _queued_already(self, key: str, mark: tuple[str, str]) -> str | None:
        """The id of the entry among the stream's newest whose field `mark[0]` is `mark[1]` (the nonce
        when signed, else the request id)."""
        name, value = mark
        recent: list[Any] = (
            self._do(f"read {key}", lambda: self.redis.xrevrange(key, count=BURY_LOOKBACK)) or []
        )
        return next((str(eid) for eid, f in recent if (f or {}).get(name) == value), None)

    def _entry(self, key: str, entry_id: str, fields: Mapping[str, str], deliveries: int) -> Entry:
        forged = self.signer.check(key, fields) if self.signer is not None else None
        return Entry.of(entry_id, fields, deliveries, forged)

    def keep_unrouted(self, fields: dict[str, str]) -> None:
        """Keep what no cluster could take (`XRANGE gpubot:alerts:unrouted - +`), trimmed like the dead."""
        self._do(
            f"keep in {UNROUTED}",
            lambda: self.redis.xadd(UNROUTED, fields, maxlen=DEAD_MAXLEN, approximate=True),  # type: ignore[arg-type]
        )

    def check_gateway_writes(self) -> None:
        """What readiness means for a gateway: it can XADD (an ACL without it queues nothing). One
        entry in a stream of its own, trimmed to one: the requests streams are left alone."""
        self._do(
            f"write {PROBE}",
            lambda: self.redis.xadd(PROBE, {"probe": "gateway"}, maxlen=1, approximate=False),
        )

    def check_agent_writes(self, cluster: str) -> None:
        """An agent's: it can acknowledge on its stream (XACK of an id that never exists changes nothing)."""
        key = REQUESTS.format(cluster)
        self._do(f"acknowledge on {key}", lambda: self.redis.xack(key, GROUP, "0-1"))

    def clusters(self) -> dict[str, ClusterSeen]:
        raw = self._do(f"read {CLUSTERS}", lambda: self.redis.hgetall(CLUSTERS))
        seen: dict[str, ClusterSeen] = {}
        for name, value in sorted(raw.items()):
            try:
                d = json.loads(value)
                seen[name] = ClusterSeen(
                    name=name,
                    version=str(d.get("version") or "?"),
                    last_seen=float(d["last_seen"]),
                    agent=str(d.get("agent") or "?"),
                    kinds=tuple(str(k) for k in d.get("kinds") or ()),
                )
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # a field someone else wrote: not a cluster we can route to
        return seen

    # --- the agent's side -----------------------------------------------------------------------

    def heartbeat(self, cluster: str, agent: str, version: str, kinds: tuple[str, ...]) -> None:
        """`last_seen` is Redis's own clock (TIME, inside the script that writes it), never the agent's:
        an agent whose clock runs fast, then dies, must not read "0 s ago" for as long as it ran ahead."""
        value = json.dumps(
            {"version": version, "last_seen": _NOW, "agent": agent, "kinds": list(kinds)},
            separators=(",", ":"),
        )
        self._do(
            f"heartbeat into {CLUSTERS}",
            lambda: self.redis.eval(_HEARTBEAT, 1, CLUSTERS, cluster, value),  # type: ignore[no-untyped-call]
        )

    def now(self) -> float:
        """Redis's clock (TIME): what heartbeats are written in, so what they are read against."""
        # Asked of the node that holds the heartbeats (a script keyed on them): on a Redis Cluster,
        # the same clock that wrote them.
        secs, micros = self._do("read the time", lambda: self.redis.eval(_TIME, 1, CLUSTERS))
        return float(secs) + float(micros) / 1e6

    def ensure_group(self, cluster: str) -> None:
        """Create the stream and its group `agents` from the stream's start (requests queued before any
        agent ever ran are delivered too); an existing group is kept as it is."""
        key = REQUESTS.format(cluster)
        if key in self._groups:
            return
        try:
            self._do(
                f"create group {GROUP} on {key}",
                lambda: self.redis.xgroup_create(key, GROUP, id="0", mkstream=True),
            )
        except StreamsUnavailable as err:
            if "BUSYGROUP" not in str(err):
                raise
        self._groups.add(key)

    def _group_gone(self, err: ResponseError) -> bool:
        return "NOGROUP" in str(err)

    def read(self, cluster: str, consumer: str, count: int, block_ms: int) -> list[Entry]:
        """New entries for this consumer (XREADGROUP >), waiting up to `block_ms` for one."""
        key = REQUESTS.format(cluster)
        try:
            got = riding_out(
                self.redis,
                lambda: self.redis.xreadgroup(GROUP, consumer, {key: ">"}, count=count, block=block_ms),
            )
        except ResponseError as err:
            if self._group_gone(err):  # Redis restarted without the stream (no AOF): make it again
                self._groups.discard(key)
                self.ensure_group(cluster)
                return []
            raise StreamsUnavailable(f"Redis at {self.shown} failed to read {key}: {err}") from None
        except RedisError as err:
            raise StreamsUnavailable(f"Redis at {self.shown} failed to read {key}: {err}") from None
        entries: list[Entry] = []
        answer: list[Any] = got or []  # type: ignore[assignment]  # [[stream, [(id, fields), …]]]
        for _stream, items in answer:
            for entry_id, fields in items:
                if fields is None:  # trimmed away while pending
                    continue
                entries.append(self._entry(key, entry_id, fields, 1))
        return entries

    def claim(self, cluster: str, consumer: str, min_idle_s: float, count: int) -> list[Entry]:
        """XAUTOCLAIM entries idle longer than `min_idle_s` (their agent died or hung), with how many
        times each was delivered. Entries trimmed away meanwhile are dropped from the pending list."""
        key = REQUESTS.format(cluster)
        idle_ms = max(1, int(min_idle_s * 1000))
        try:
            got = riding_out(
                self.redis, lambda: self.redis.xautoclaim(key, GROUP, consumer, idle_ms, "0-0", count=count)
            )
        except ResponseError as err:
            if self._group_gone(err):
                self._groups.discard(key)
                self.ensure_group(cluster)
                return []
            raise StreamsUnavailable(f"Redis at {self.shown} failed to claim on {key}: {err}") from None
        except RedisError as err:
            raise StreamsUnavailable(f"Redis at {self.shown} failed to claim on {key}: {err}") from None
        items = got[1] if len(got) > 1 else []
        entries: list[Entry] = []
        for entry_id, fields in items:
            if not fields:
                continue
            entries.append(self._entry(key, entry_id, fields, self.deliveries(cluster, entry_id)))
        return entries

    def deliveries(self, cluster: str, entry_id: str) -> int:
        key = REQUESTS.format(cluster)
        rows = self._do(
            f"read the pending list of {key}",
            lambda: self.redis.xpending_range(key, GROUP, entry_id, entry_id, 1),
        )
        return int(rows[0]["times_delivered"]) if rows else 1

    def keep(self, cluster: str, consumer: str, entry_ids: list[str]) -> None:
        """Renew this consumer's hold on entries it is still working on (XCLAIM JUSTID resets their
        idle time without counting a delivery), so no other agent claims live work."""
        if not entry_ids:
            return
        key = REQUESTS.format(cluster)
        self._do(
            f"renew entries on {key}",
            lambda: self.redis.xclaim(key, GROUP, consumer, 0, list[Any](entry_ids), justid=True),
        )

    def ack(self, cluster: str, entry_id: str) -> None:
        key = REQUESTS.format(cluster)
        self._do(
            f"acknowledge {entry_id} on {key}",
            lambda: replicated(
                self.redis,
                key,
                lambda: self.redis.xack(key, GROUP, entry_id),
                lambda p: p.xack(key, GROUP, entry_id),
            ),
        )

    def bury(self, cluster: str, entry: Entry, reason: str) -> None:
        """Copy the entry to `gpubot:dead:<cluster>` with why, then acknowledge it.

        Two steps, not one MULTI: the two streams lie in different hash slots of a Redis Cluster
        (CROSSSLOT). Safe to repeat instead: an agent that dies between them leaves the entry
        pending, its redelivery buries it again, and the copy already made (same `entry` field,
        looked up among the dead stream's newest) is not made twice."""
        dead = DEAD.format(cluster)
        fields = {
            **entry.fields,
            "entry": entry.entry_id,
            "reason": reason[:500],
            "deliveries": str(entry.deliveries),
        }

        def copied() -> bool:
            recent: list[Any] = self.redis.xrevrange(dead, count=BURY_LOOKBACK) or []  # type: ignore[assignment]
            return any((f or {}).get("entry") == entry.entry_id for _id, f in recent)

        if entry.deliveries == 1 or not self._do(f"read {dead}", copied):
            self._do(
                f"move {entry.entry_id} to {dead}",
                lambda: self.redis.xadd(dead, fields, maxlen=DEAD_MAXLEN, approximate=True),  # type: ignore[arg-type]
            )
        self.ack(cluster, entry.entry_id)

    # --- observing ------------------------------------------------------------------------------

    def stats(self, cluster: str) -> QueueStats:
        key = REQUESTS.format(cluster)

        def run() -> QueueStats:
            pipe = self.redis.pipeline(transaction=False)
            pipe.xlen(key)
            pipe.xlen(DEAD.format(cluster))
            pipe.execute_command("XINFO", "GROUPS", key)
            pipe.xpending(key, GROUP)
            length, dead, groups, pending = pipe.execute(raise_on_error=False)
            lag = 0
            if isinstance(groups, list):
                for g in groups:
                    info = _pairs(g)
                    if info.get("name") == GROUP:
                        lag = int(info.get("lag") or 0)
            count, oldest = 0, 0.0
            if isinstance(pending, dict) and pending.get("pending"):
                count = int(pending["pending"])
                oldest = max(0.0, self.clock() - _entry_ms(str(pending["min"])) / 1000)
            return QueueStats(
                length=length if isinstance(length, int) else 0,
                waiting=lag,
                pending=count,
                oldest_pending_age_s=oldest,
                dead=dead if isinstance(dead, int) else 0,
            )

        return self._do(f"read the stats of {key}", run)  # type: ignore[no-any-return]


def _pairs(raw: Any) -> dict[str, Any]:
    """XINFO answers as a flat list (RESP2) or a dict."""
    if isinstance(raw, dict):
        return raw
    it = iter(raw)
    return {str(k): v for k, v in zip(it, it, strict=False)}
