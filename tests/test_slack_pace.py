"""Slack's pace (spec interfaces.md, issue 20): posts to one channel about one a second, in order.

Through the real Poster and slack_sdk against the fake Slack, which stamps each
call's arrival. A channel may take a short burst (BURST posts, as Slack allows:
a walk's root and first layers never wait), then one a second. Other channels
are not held up by a busy one.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator

import pytest

from bot.ops.config import ConfigError, load_config
from bot.slack.pace import BURST, ChannelPacer
from bot.slack.post import Poster
from tests.fakes.slack_api import FakeSlack, serve_slack

TOKEN = "xoxb-0000-pace-test"
BUSY, QUIET = "C0BUSY", "C0QUIET"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_sixteen_posts_from_four_threads_go_out_in_order_a_second_apart_and_other_channels_wait_not(
    slack: FakeSlack,
) -> None:
    poster = Poster(TOKEN, slack.url, pace_s=1.0)
    asked: list[str] = []
    asked_lock = threading.Lock()

    def sender(k: int) -> None:
        time.sleep(0.05 * k)  # the threads ask in a known order at first
        for j in range(4):
            text = f"t{k}-{j}"
            with asked_lock:
                asked.append(text)
            poster.post(BUSY, text)

    threads = [threading.Thread(target=sender, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    quiet: list[float] = []
    time.sleep(3.0)  # the busy channel's queue is long now
    for _ in range(3):
        started = time.monotonic()
        poster.post(QUIET, "not held up")
        quiet.append(time.monotonic() - started)
    for t in threads:
        t.join(timeout=60)
    busy = [c for c in slack.calls_to("chat.postMessage") if c.params["channel"] == BUSY]
    texts = [c.params["text"] for c in busy]
    assert sorted(texts) == sorted(asked) and len(texts) == 16
    # FIFO: the order they arrived in is the order they were asked for, each thread's own included.
    assert texts == asked
    # Past the burst, a second apart: and never more than BURST - 1 ahead of one a second.
    gaps = [b.at - a.at for a, b in itertools.pairwise(busy)]
    assert min(gaps[BURST - 1 :]) >= 0.95, gaps
    assert all(c.at - busy[0].at >= (k - BURST + 1) * 0.95 for k, c in enumerate(busy)), gaps
    # The quiet channel's posts (within its own burst) went out at once.
    assert max(quiet) < 0.5, quiet


def test_a_pacer_of_zero_waits_for_nothing() -> None:
    pacer = ChannelPacer(0.0)
    started = time.monotonic()
    for _ in range(50):
        with pacer.turn(BUSY):
            pass
    assert time.monotonic() - started < 0.1


def test_a_post_that_fails_still_frees_its_channel(slack: FakeSlack) -> None:
    poster = Poster(TOKEN, slack.url, attempts=1, pace_s=0.2)
    slack.fail("chat.postMessage", 404, times=1)
    with pytest.raises(Exception, match="refused"):
        poster.post(BUSY, "refused")
    started = time.monotonic()
    poster.post(BUSY, "next")
    assert time.monotonic() - started < 1.0


def test_a_pacer_lets_a_burst_through_then_one_per_interval() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    pacer = ChannelPacer(1.0, burst=3, clock=lambda: now[0], sleep=sleep)
    for _ in range(5):
        with pacer.turn(BUSY):
            pass
    assert slept == [1.0, 1.0]  # three at once, then one a second
    now[0] += 10  # idle: the burst is back, never more than it
    for _ in range(4):
        with pacer.turn(BUSY):
            pass
    assert slept == [1.0, 1.0, 1.0]


def test_the_bot_runs_at_slack_s_pace_unless_told_otherwise() -> None:
    assert load_config({}).slack_pace_s == 1.0
    assert load_config({"GPUBOT_SLACK_CHANNEL_PACE_SECONDS": "0"}).slack_pace_s == 0.0
    with pytest.raises(ConfigError, match="GPUBOT_SLACK_CHANNEL_PACE_SECONDS"):
        load_config({"GPUBOT_SLACK_CHANNEL_PACE_SECONDS": "11"})
