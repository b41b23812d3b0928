"""`gpubot serve --role agent`: one cluster's worker, fed by its Redis Stream.

It reads `gpubot:requests:<cluster>` in the consumer group `agents` and runs
each request through the same walk service and button handlers as the single
process (bot/slack/app.py `build_services`), posting to Slack itself. Delivery is
at-least-once from the stream and effectively-once in Slack:

- an entry is acknowledged (XACK) only once its work is posted, and marked
  done in the state store first (`request:<id>:done`), so an entry whose agent
  died between the two is acknowledged without running again;
- walk ids are chosen by the gateway, so a walk taken over mid-way resumes
  where its thread stands instead of starting a second root; and every post
  that must appear once (the root, each layer, a digest part) records its
  intent first, so a takeover finds in Slack what its dead agent posted
  (bot/cluster/once.py);
- entries idle past the claim-idle time (their agent died) are taken over with
  XAUTOCLAIM, by another agent of the cluster or this one after a restart;
  entries still being worked on are renewed (XCLAIM JUSTID) so nobody takes
  live work, and the walk's own claims are short leases (bot/cluster/leases.py);
- an entry delivered `MAX_FAILURES` times without being acknowledged is poison:
  it moves to `gpubot:dead:<cluster>` and the thread (or the asker) is told;
- an entry Redis took after the time it carries (`queue_by`: a stalled Redis
  took the gateway's XADD after the ack had said "could not be queued") is
  never run: it moves to the dead stream, unsaid (the asker was told);
- a request kind this agent does not know (a newer gateway) is answered with
  this agent's version and acknowledged, never retried.

It reads only as many entries as it has free workers, so a slow cluster's
agents never hoard entries another agent of the cluster could run.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bot.cluster import stream_metrics as metrics
from bot.cluster.kinds import BadRequest, delivery
from bot.cluster.once import OncePoster
from bot.cluster.signing import REPLAY_WINDOW_S, age_problem
from bot.cluster.streams import ClusterStreams, Entry, Request, StreamsUnavailable
from bot.ops.logs import walk_scope
from bot.ops.version import gpubot_version
from bot.slack.leases import LeaseKeeper
from handlers.escape import escape
from handlers.ports import StateStore, StateUnavailable
from handlers.walkclaims import CLAIM_S

log = logging.getLogger("gpubot.agent")

MAX_FAILURES = 5  # the spec: a failed post is tried 5 times, then said once and kept in the dead stream
DONE_TTL_S = 2 * 86400  # longer than any entry stays pending
RETRY_S = 1.0  # after Redis failed: wait, then read again (it may be restarting)

Handler = Callable[[Request], None]


def consumer_name() -> str:
    """Unique per process: a restarted agent is a new consumer and claims its old self's entries."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class AgentTiming:
    heartbeat_s: float = 10.0
    claim_idle_s: float = 60.0
    block_s: float = 1.0

    @property
    def lease_s(self) -> float:
        """A dead agent's leases must expire before its entries become claimable, and within the
        spec's minute whatever the claim-idle time (bot/slack/leases.py `lease_of`: the same)."""
        return min(CLAIM_S, self.claim_idle_s / 2)

    @property
    def tick_s(self) -> float:
        """How often live work is renewed: well inside both the lease and the claim-idle time."""
        return min(self.heartbeat_s, self.lease_s / 3)


class Agent:
    def __init__(
        self,
        cluster: str,
        streams: ClusterStreams,
        store: StateStore,
        poster: OncePoster,
        handlers: Mapping[str, Handler],
        leases: LeaseKeeper,
        *,
        timing: AgentTiming | None = None,
        workers: int = 4,
        version: str | None = None,
        consumer: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cluster = cluster
        self.streams = streams
        self.store = store
        self.poster = poster
        self.handlers = dict(handlers)
        self.leases = leases
        self.timing = timing or AgentTiming()
        self.workers = workers
        self.version = version or gpubot_version()
        self.consumer = consumer or consumer_name()
        self.clock = clock
        self._active: dict[str, Entry] = {}
        self._lock = threading.Condition()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"gpubot-agent-{cluster}")
        self.redis_up = False
        self.beat_error: str | None = "no heartbeat written yet"  # readiness: an ACL may refuse HSET

    # --- the loops ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Until `stop`: heartbeat, take over idle entries, read new ones, run them on the pool."""
        ticker = threading.Thread(target=self._tick, args=(stop,), name="gpubot-agent-ticker", daemon=True)
        ticker.start()
        next_claim = 0.0
        while not stop.is_set():
            try:
                self.streams.ensure_group(self.cluster)
                free = self._wait_for_a_worker(stop)
                if free == 0:
                    continue
                entries: list[Entry] = []
                if time.monotonic() >= next_claim:
                    entries = self.streams.claim(self.cluster, self.consumer, self.timing.claim_idle_s, free)
                    next_claim = time.monotonic() + min(self.timing.claim_idle_s / 2, 5.0)
                    for e in entries:
                        metrics.record_claim(self.cluster)
                        log.info(
                            "took over %s (delivery %d) of cluster %s", e.entry_id, e.deliveries, self.cluster
                        )
                if not entries:
                    entries = self.streams.read(
                        self.cluster, self.consumer, free, int(self.timing.block_s * 1000)
                    )
                self.redis_up = True
                for entry in entries:
                    self._start(entry)
            except StreamsUnavailable as err:
                self.redis_up = False
                log.error("cluster %s: %s; retrying in %.0fs", self.cluster, err, RETRY_S)
                stop.wait(RETRY_S)
        ticker.join(timeout=self.timing.tick_s + 1)

    def _wait_for_a_worker(self, stop: threading.Event) -> int:
        with self._lock:
            if len(self._active) >= self.workers:
                self._lock.wait(timeout=self.timing.block_s)
            return 0 if stop.is_set() else max(0, self.workers - len(self._active))

    def _tick(self, stop: threading.Event) -> None:
        """Heartbeat every heartbeat_s; renew live entries and leases every tick."""
        last_beat = 0.0
        while True:
            try:
                if time.monotonic() - last_beat >= self.timing.heartbeat_s:
                    try:
                        self.streams.heartbeat(
                            self.cluster, self.consumer, self.version, tuple(sorted(self.handlers))
                        )
                    except StreamsUnavailable as err:
                        self.beat_error = str(err)
                        raise
                    self.beat_error = None
                    last_beat = time.monotonic()
                with self._lock:
                    live = list(self._active)
                self.streams.keep(self.cluster, self.consumer, live)
            except StreamsUnavailable as err:
                log.warning("cluster %s: heartbeat or renewal failed: %s", self.cluster, err)
            self.leases.renew()
            if stop.wait(self.timing.tick_s):
                return

    def _start(self, entry: Entry) -> None:
        with self._lock:
            self._active[entry.entry_id] = entry
        self._pool.submit(self._run, entry)

    def _run(self, entry: Entry) -> None:
        request_id = entry.request.request_id if entry.request else None
        with walk_scope(_walk_of(entry.request) or request_id):
            try:
                self.process(entry)
            except Exception:
                log.exception("entry %s of cluster %s failed unexpectedly", entry.entry_id, self.cluster)
            finally:
                with self._lock:
                    self._active.pop(entry.entry_id, None)
                    self._lock.notify_all()

    def drain(self, timeout_s: float) -> None:
        """Let running entries finish (bounded); what does not finish stays pending for a takeover."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._active and time.monotonic() < deadline:
                self._lock.wait(timeout=0.1)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # --- one entry ---------------------------------------------------------------------------

    def process(self, entry: Entry) -> str:
        """Run one entry; returns what became of it (also the gpubot_stream_requests_total outcome)."""
        outcome = self._process(entry)
        # A forged entry's kind is whatever its writer chose: not trusted as a label either.
        kind = entry.request.kind if entry.request and outcome != "forged" else "unreadable"
        metrics.record_request(self.cluster, kind, outcome)
        return outcome

    def _process(self, entry: Entry) -> str:
        if (forged := self._forged(entry)) is not None:
            # Nothing in it is trusted (the channel, the user): kept for the operators, said nowhere.
            log.error("entry %s of cluster %s dropped: %s", entry.entry_id, self.cluster, forged)
            try:
                self.streams.bury(self.cluster, entry, f"forged: {forged}")
            except StreamsUnavailable as err:
                log.error("entry %s could not be moved to the dead stream: %s", entry.entry_id, err)
            return "forged"
        req = entry.request
        if req is None:
            self._bury(entry, f"not a gpubot request: {entry.problem}")
            return "dead"
        if req.late(entry.entry_id):
            # Redis took it after the gateway stopped waiting (a stalled primary): the asker was told it
            # could not be queued, so it is never run; kept in the dead stream for the operators.
            self._bury(entry, f"queued after its deadline ({req.queue_by}): the asker was told it was not")
            return "late"
        if entry.deliveries > MAX_FAILURES:
            # Delivered that often and never acknowledged: it failed, or killed its agent, each time.
            self._give_up(entry, req, f"delivered {entry.deliveries - 1} times without finishing")
            return "dead"
        handler = self.handlers.get(req.kind)
        if handler is None:
            self._say(
                req,
                f":warning: cluster `{self.cluster}`'s agent (gpubot {escape(self.version)}) does not know "
                f"requests of kind `{escape(req.kind)}`"
                + (f" (queued by gpubot {escape(req.sender_version)})" if req.sender_version else "")
                + ": nothing was done. Upgrade the agent to the gateway's version.",
            )
            log.warning(
                "cluster %s: ignored request %s of unknown kind %r", self.cluster, req.request_id, req.kind
            )
            self._ack(entry)
            return "unknown_kind"
        done_key = f"request:{req.request_id}:done"
        try:
            if self.store.get(done_key) is not None:
                self._ack(entry)  # posted by an agent that died before acknowledging it
                return "repeated"
        except StateUnavailable as err:
            log.warning("request %s: done mark unread, running it: %s", req.request_id, err)
        try:
            with self.leases.work(), self.poster.scope(req.request_id), delivery(entry.deliveries):
                handler(req)
        except BadRequest as err:
            self._give_up(entry, req, f"the request is malformed: {err}", attempts=entry.deliveries)
            return "dead"
        except Exception as err:
            log.exception("request %s (%s) failed on delivery %d", req.request_id, req.kind, entry.deliveries)
            if entry.deliveries >= MAX_FAILURES:
                self._give_up(entry, req, f"{type(err).__name__}: {err}")
                return "dead"
            return "failed"  # left pending: taken over again after the claim-idle time
        try:
            self.store.set(done_key, {"at": self.clock(), "by": self.consumer}, DONE_TTL_S)
        except StateUnavailable as err:
            log.warning("request %s done but not marked so: %s", req.request_id, err)
        self._ack(entry)
        return "done"

    def _forged(self, entry: Entry) -> str | None:
        """Why the entry is not the gateway's own, fresh and first (None: it is)."""
        if entry.forged is not None:
            return entry.forged
        if self.streams.signer is None or entry.request is None:
            return None
        if (old := age_problem(entry.request.queued_at, self.clock())) is not None:
            return old
        # The nonce names its entry: a redelivery of the same entry passes, a copy in another fails.
        key = f"request:nonce:{entry.nonce}"
        try:
            if self.store.set_if_absent(key, entry.entry_id, 2 * REPLAY_WINDOW_S):
                return None
            seen = self.store.get(key)
        except StateUnavailable as err:
            raise StreamsUnavailable(f"the nonce of {entry.entry_id} could not be checked: {err}") from None
        return None if seen == entry.entry_id else f"a replay of entry {str(seen)[:40]}"

    def _ack(self, entry: Entry) -> None:
        try:
            self.streams.ack(self.cluster, entry.entry_id)
        except StreamsUnavailable as err:
            # Still pending: a takeover finds the done mark and only acknowledges it.
            log.error("entry %s not acknowledged: %s", entry.entry_id, err)

    def _give_up(self, entry: Entry, req: Request, why: str, attempts: int = MAX_FAILURES) -> None:
        self._bury(entry, why)
        tries = "1 attempt" if attempts == 1 else f"{attempts} failed attempts"
        self._say(
            req,
            f":x: cluster `{self.cluster}` gave up on this request (`{escape(req.kind)}`, id `{req.request_id}`) "
            f"after {tries}: {escape(why[:300])}. It is kept in `gpubot:dead:{self.cluster}` for the operators"
            + ("; run the command again once the cause is fixed." if req.reply.get("user") else "."),
        )

    def _bury(self, entry: Entry, why: str) -> None:
        log.error("entry %s of cluster %s moved to the dead stream: %s", entry.entry_id, self.cluster, why)
        try:
            self.streams.bury(self.cluster, entry, why)
        except StreamsUnavailable as err:
            log.error("entry %s could not be moved to the dead stream: %s", entry.entry_id, err)

    def _say(self, req: Request, text: str) -> None:
        """Tell the thread the request belongs to, else the person who asked, else its channel (an
        alert notification's: no thread and no person behind it, so the alert channel is told)."""
        reply = req.reply
        channel, user, thread = reply.get("channel"), reply.get("user"), reply.get("thread_ts")
        try:
            if channel and thread:
                self.poster.post(str(channel), text, thread_ts=str(thread))
            elif channel and user:
                self.poster.ephemeral(str(channel), str(user), text)
            elif channel:
                self.poster.post(str(channel), text)
            else:
                log.warning("request %s: nobody to tell: %s", req.request_id, text)
        except Exception as err:
            log.error("request %s: could not say %r: %s", req.request_id, text, err)


def _walk_of(req: Request | None) -> str | None:
    if req is None:
        return None
    walk = req.body.get("walk_id")
    return str(walk)[:64] if walk else None
