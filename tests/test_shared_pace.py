"""Two replicas share one Slack pace through Redis (REAL redis-server, REAL Poster, fake Slack Web API).

Each Poster is a replica's own (its own ChannelPacer, its own Redis client);
both post into one channel at once. Paced each alone they send twice Slack's
rate together (the control); sharing the bucket in Redis, the posts that
reach Slack never exceed the pace: in any stretch of time at most `burst`
plus one per interval.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bot.slack.pace import share
from bot.slack.post import Poster
from bot.slack.state import RedisState
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import BOT_TOKEN

INTERVAL_S = 0.25
BURST = 3
PER_REPLICA = 10


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def _over_pace(times: list[float]) -> list[tuple[int, int, float]]:
    """Stretches [i, j] holding more posts than the pace allows (40 ms of slack for the network)."""
    times = sorted(times)
    return [
        (i, j, times[j] - times[i])
        for i in range(len(times))
        for j in range(i + 1, len(times))
        if j - i + 1 > BURST + (times[j] - times[i] + 0.04) / INTERVAL_S
    ]


def _send(slack: FakeSlack, url: str, channel: str, shared: bool) -> list[float]:
    posters = []
    for _ in range(2):
        poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01, pace_s=INTERVAL_S)
        poster.pace.burst = BURST
        if shared:
            share(poster.pace, RedisState(url))
        posters.append(poster)

    def replica(poster: Poster, r: int) -> None:
        for k in range(PER_REPLICA):
            poster.post(channel, f"replica {r} post {k}")

    threads = [threading.Thread(target=replica, args=(p, r)) for r, p in enumerate(posters)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return [c.at for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == channel]


def test_two_replicas_posting_into_one_channel_never_exceed_the_pace_together(slack: FakeSlack) -> None:
    with RedisServer() as server:
        alone = _send(slack, server.url, "C0PACEALONE", shared=False)
        together = _send(slack, server.url, "C0PACESHARED", shared=True)
    assert len(alone) == len(together) == 2 * PER_REPLICA
    assert _over_pace(alone)  # the control: each replica's own pace, twice Slack's rate together
    assert not _over_pace(together), _over_pace(together)[:5]
    span = max(together) - min(together)
    assert span >= (2 * PER_REPLICA - BURST) * INTERVAL_S - 0.1, span
