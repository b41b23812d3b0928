"""One burst of signed `/gpu why` commands sent at once, and when each walk reached the fake Slack.

Shared by benchmarks/slack_bench.py (one bot) and benchmarks/cluster_bench.py (the gateway): every
command goes to its own channel from its own thread, released together by a barrier; the ack is
each command's HTTP round trip, then the fake Slack is polled until every walk posted layer 5.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

WALK_DEADLINE_S = 120


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def layer_at(slack: Any, channel: str, layer: int) -> float | None:
    """When the fake Slack received the walk's `Layer N (` message in `channel`, if it did."""
    for c in slack.calls_to("chat.postMessage"):
        if c.params.get("channel") == channel and str(c.params.get("text", "")).startswith(
            f"Layer {layer} ("
        ):
            return float(c.at)
    return None


@dataclass
class Burst:
    acks: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    first: list[float] = field(default_factory=list)  # command sent → its layer-1 message
    lost: list[str] = field(default_factory=list)  # channels without layer 1 or layer 5


def fire_burst(url: str, slack: Any, bodies: dict[str, str]) -> Burst:
    """POST each channel's signed slash-command body to `url` at once; wait for every walk's layer 5."""
    from tests.slack_harness import post, sign

    out = Burst()
    sent: dict[str, float] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(len(bodies))

    def fire(channel: str, body: str) -> None:
        headers = sign(body)
        barrier.wait()
        t0 = time.monotonic()
        status, _ = post(url, body, headers, timeout=30)
        took = time.monotonic() - t0
        with lock:
            sent[channel] = t0
            out.acks.append(took)
            out.statuses.append(status)

    threads = [threading.Thread(target=fire, args=cb) for cb in bodies.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deadline = time.monotonic() + WALK_DEADLINE_S
    while time.monotonic() < deadline and any(layer_at(slack, c, 5) is None for c in bodies):
        time.sleep(0.05)
    for c in bodies:
        at1, at5 = layer_at(slack, c, 1), layer_at(slack, c, 5)
        if at1 is not None:
            out.first.append(at1 - sent[c])
        if at1 is None or at5 is None:
            out.lost.append(c)
    return out
