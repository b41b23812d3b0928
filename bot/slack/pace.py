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

The pace is kept per process. Replicas (or many clusters' agents) posting
into one channel each keep their own pace; what they send together past
Slack's limit is answered 429 with a Retry-After, which the retry handlers
honour (bot/slack/retries.py), and storm control bounds the roots an alert
channel gets across every cluster (handlers/alert_storm.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PACE_S = 1.0  # Slack's "about one message per second per channel" for chat.postMessage
BURST = 3  # posts one channel may take at once: a walk's root, layer 1 and its last layer
MAX_IDLE_LANES = 1024  # lanes of channels nobody is posting to are dropped past this many


@dataclass
class _Lane:
    cond: threading.Condition = field(default_factory=threading.Condition)
    issued: int = 0  # the next ticket
    serving: int = 0  # the ticket whose turn it is
    tokens: float = BURST  # posts that may start now; one more every interval, up to the burst
    filled_at: float = 0.0  # monotonic time `tokens` was last brought up to date
    waiting: int = 0  # callers holding a ticket not yet done


class ChannelPacer:
    """One lane per channel: FIFO turns, `burst` at once then `interval_s` apart. `interval_s` 0
    turns pacing off."""

    def __init__(
        self,
        interval_s: float = PACE_S,
        *,
        burst: int = BURST,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if interval_s < 0:
            raise ValueError("interval_s must not be negative")
        if burst < 1:
            raise ValueError("burst must be at least 1")
        self.interval_s = interval_s
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._lanes: dict[str, _Lane] = {}

    @contextmanager
    def turn(self, channel: str) -> Iterator[None]:
        """Wait for this channel's turn and slot; the post runs inside the block."""
        if self.interval_s <= 0:
            yield
            return
        lane = self._lane(channel)
        with lane.cond:
            ticket = lane.issued
            lane.issued += 1
            while lane.serving != ticket:
                lane.cond.wait()
        try:
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
