"""What the gateway answers Slack within its 3 s: queued, not queued, or not queued yet.

A command is acknowledged within ACK_BUDGET_S whatever Redis does. With one
Redis (`single`) what Redis has not done by then is said as "could not be
queued". With Sentinel or a Redis Cluster a master switch is expected and can
outlast the budget (down-after-milliseconds plus an election): the ack then
says the request is not queued *yet*, the gateway keeps trying for
QUEUE_PATIENCE_S, and tells the asker once if it never was.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

# Slack drops an ack after 3 s; the gate's replay record (bot/slack/replay_record.py, 0.4 s) comes first.
ACK_BUDGET_S = 1.8
# A request carries the Redis time by which it must be queued (`queue_by`): the moment the gateway
# stops waiting for it, less this margin, so that an XADD Redis takes in time is answered in time.
QUEUE_MARGIN_S = 0.3
QUEUE_DOWN = (
    ":x: the request could not be queued: the bot's Redis is unreachable ({}). Try again in a moment."
)
# Sentinel and Cluster modes, past the ack budget: Redis is switching master, the request goes on.
QUEUE_LATER = (
    ":hourglass: {doing} as soon as the bot's Redis answers again (it is switching "
    "master): the request is not queued yet; it will be within {s:g} s, or you are told that it could not be."
)
# An XADD a slow Redis took in time, whose answer came after the ack had said it could not be queued.
QUEUED_AFTER_ALL = (
    ":information_source: Redis took your last request after all (it was slow, not down): its answer follows."
)
# Covers a Sentinel down-after-milliseconds up to ~25 s plus an election (the docs advise 5 to 10 s).
QUEUE_PATIENCE_S = 30.0


class Budget(threading.Event):
    """Set once the gateway has stopped waiting (the ack said "could not be queued"); `until` is when
    it stops (time.monotonic), so what is queued says by when Redis must have taken it."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.until = time.monotonic() + seconds

    def queue_by(self, redis_now: float, read_at: float) -> float:
        """The Redis time matching `until` less the margin, from a Redis time read at `read_at`."""
        return redis_now + (self.until - QUEUE_MARGIN_S - read_at)


@dataclass(frozen=True)
class Queued:
    """What became of a command: the text to answer, and whether it is on its cluster's stream."""

    text: str
    queued: bool
