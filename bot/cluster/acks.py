"""What the gateway answers Slack within its 3 s: queued, not queued, or not queued yet.

A command is acknowledged within ACK_BUDGET_S whatever Redis does. With one
Redis (`single`) what Redis has not done by then is said as "could not be
queued". With Sentinel or a Redis Cluster a master switch is expected and can
outlast the budget (down-after-milliseconds plus an election): the ack then
says the request is not queued *yet*, the gateway keeps trying for
QUEUE_PATIENCE_S, and tells the asker once if it never was.
"""

from __future__ import annotations

from dataclasses import dataclass

ACK_BUDGET_S = 2.5  # Slack drops an ack after 3 s
QUEUE_DOWN = (
    ":x: the request could not be queued: the bot's Redis is unreachable ({}). Try again in a moment."
)
# Sentinel and Cluster modes, past the ack budget: Redis is switching master, the request goes on.
QUEUE_LATER = (
    ":hourglass: {doing} as soon as the bot's Redis answers again (it is switching "
    "master): the request is not queued yet; it will be within {s:g} s, or you are told that it could not be."
)
# Covers a Sentinel down-after-milliseconds up to ~25 s plus an election (the docs advise 5 to 10 s).
QUEUE_PATIENCE_S = 30.0


@dataclass(frozen=True)
class Queued:
    """What became of a command: the text to answer, and whether it is on its cluster's stream."""

    text: str
    queued: bool
