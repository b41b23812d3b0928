"""Slack's pace: posts to one channel go out about one a second, in the order they were asked for.

Slack allows `chat.postMessage` "1 message per second to a specific channel,
with short bursts above that allowed", and answers a faster sender with 429.
`ChannelPacer.turn(channel)` is held around each post: callers for one channel
take tickets and go one at a time, first come first served (a post starts only
after the previous one finished, so a retried post keeps its place). Each lane
is a token bucket: `burst` posts may go at once, then one per `interval_s`.
So a walk's root and its first layers (three posts) never wait, while a storm
or a flood into one channel goes out at one a second. Other channels have
lanes of their own and wait for nothing.

With Redis (REDIS_URL) the bucket is shared by every replica and every
cluster's agent: `shared(channel)` reserves the channel's next slot in Redis
(one key per channel, a GCRA in one script on Redis's clock) and says how long to wait for it, so N processes posting into
one channel go out at Slack's pace together, not N times it. The FIFO turn
stays per process. A Redis that fails the reservation falls back to the
process's own bucket (and 429s with Retry-After, which the retry handlers
honour: bot/slack/retries.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

log = logging.getLogger("gpubot.slack")
PACE_S = 1.0  # Slack's "about one message per second per channel" for chat.postMessage
BURST = 3  # posts one channel may take at once: a walk's root, layer 1 and its last layer
MAX_QUEUED = 200  # posts waiting for one channel's turn, past which a new one is dropped (0: no bound)
MAX_IDLE_LANES = 1024  # lanes of channels nobody is posting to are dropped past this many


@dataclass
class _Lane:
    cond: threading.Condition = field(default_factory=threading.Condition)
    issued: int = 0  # the next ticket
    serving: int = 0  # the ticket whose turn it is
    tokens: float = BURST  # posts that may start now; one more every interval, up to the burst
    filled_at: float = 0.0  # monotonic time `tokens` was last brought up to date
    waiting: int = 0  # callers holding a ticket not yet done
    dropped: int = 0  # posts refused since the channel was last told


class ChannelBacklog(Exception):
    """A post refused because its channel already has `max_queued` posts waiting: said once in the
    channel by the next post that goes out (bot/slack/post.py), never silently."""


class ChannelPacer:
    """One lane per channel: FIFO turns, `burst` at once then `interval_s` apart. `interval_s` 0
    turns pacing off."""

    def __init__(
        self,
        interval_s: float = PACE_S,
        *,
        burst: int = BURST,
        max_queued: int = MAX_QUEUED,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if interval_s < 0:
            raise ValueError("interval_s must not be negative")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.interval_s = interval_s
        self.burst = burst
        self.max_queued = max_queued
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}
        # (channel, interval_s, burst) -> seconds to wait for the slot it reserved across replicas
        self.shared: Callable[[str, float, int], float] | None = None

    @contextmanager
    def turn(self, channel: str) -> Iterator[None]:
        """Wait for this channel's turn and slot; the post runs inside the block."""
        if self.interval_s <= 0:
            yield
            return
        lane = self._lane(channel)
        if self.max_queued and lane.waiting > self.max_queued:
            with self._lock:
                lane.waiting -= 1
                lane.dropped += 1
            raise ChannelBacklog(
                f"{self.max_queued} posts to this channel are already waiting for Slack's pace"
            )
        with lane.cond:
            ticket = lane.issued
            lane.issued += 1
            while lane.serving != ticket:
                lane.cond.wait()
        try:
            if self._shared_wait(channel):
                yield
                return
            now = self._clock()
            tokens = min(self.burst, lane.tokens + (now - lane.filled_at) / self.interval_s)
            if tokens < 1:
                self._sleep((1 - tokens) * self.interval_s)
                now, tokens = self._clock(), 1.0
            lane.tokens, lane.filled_at = tokens - 1, now  # only the lane's turn holder writes these
            yield
        finally:
            with lane.cond:
                lane.serving += 1
                lane.cond.notify_all()
            with self._lock:
                lane.waiting -= 1

    def take_dropped(self, channel: str) -> int:
        """Posts to `channel` dropped since the last call (0 when none): the caller says them once."""
        with self._lock:
            lane = self._lanes.get(channel)
            if lane is None or not lane.dropped:
                return 0
            dropped, lane.dropped = lane.dropped, 0
            return dropped

    def _shared_wait(self, channel: str) -> bool:
        """Wait for the slot reserved in Redis (True); False when there is no shared pace or it failed."""
        if self.shared is None:
            return False
        try:
            wait = self.shared(channel, self.interval_s, self.burst)
        except Exception as err:  # the store's one line; the process's own bucket paces this post
            log.warning("shared Slack pace unavailable, pacing this process alone: %s", err)
            return False
        if wait > 0:
            self._sleep(wait)
        return True

    def _lane(self, channel: str) -> _Lane:
        with self._lock:
            lane = self._lanes.get(channel)
            if lane is None:
                if len(self._lanes) >= MAX_IDLE_LANES:
                    now = self._clock()
                    for name, old in list(self._lanes.items()):
                        full = old.tokens + (now - old.filled_at) / self.interval_s >= self.burst
                        if old.waiting == 0 and full:
                            del self._lanes[name]
                lane = self._lanes[channel] = _Lane(tokens=self.burst, filled_at=self._clock())
            lane.waiting += 1  # under the registry's lock: a lane being waited on is never dropped
            return lane


# A GCRA on Redis's clock. KEYS[1] holds the channel's next free slot (ms); ARGV: the interval and the
# burst's tolerance (ms). Returns the wait (ms) for the slot this post reserved.
_PACE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local wait = tat - tolerance - now
if wait < 0 then wait = 0 end
redis.call('SET', KEYS[1], tat + interval, 'PX', tat + interval - now + tolerance + 1000)
return wait
"""


def share(pacer: ChannelPacer, store: object) -> None:
    """Pace `pacer`'s channels together with every replica through `store` when it is Redis (its
    `script`, through a wrapper's `inner`); process memory keeps the pace per process."""
    for candidate in (store, getattr(store, "inner", None)):
        script = getattr(candidate, "script", None)
        if callable(script):

            def wait(
                channel: str, interval_s: float, burst: int, run: Callable[..., object] = script
            ) -> float:
                interval = max(1, round(interval_s * 1000))
                # One key per channel, its name in a hash tag: one slot of a Redis Cluster.
                key = f"pace:{{{channel[:80]}}}"
                got = run(
                    f"reserve a post to {channel[:80]}", _PACE, key, interval, interval * max(0, burst - 1)
                )
                return float(got) / 1000  # type: ignore[arg-type]

            pacer.shared = wait
            return
