"""A bound on the posts waiting for one channel's pace, with what was dropped said once (REAL Poster, fake
Slack Web API).

Twelve posts into one channel at once, paced 0.2 s apart, at most four waiting:
the posts past the bound are refused at once (ChannelBacklog, never queued),
the others go out in the pace, and the channel is told once how many were
dropped. Another channel waits for nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from bot.slack.pace import ChannelBacklog
from bot.slack.post import Poster
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import BOT_TOKEN

POSTS = 12
MAX_QUEUED = 4


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_posts_past_the_channel_bound_are_dropped_and_said_once(slack: FakeSlack) -> None:
    poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01, pace_s=0.2)
    poster.pace.burst = 1
    poster.pace.max_queued = MAX_QUEUED
    outcomes: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(POSTS)

    def one(k: int) -> None:
        start.wait()
        try:
            poster.post("C0BACKLOG", f"post {k}")
            got = "posted"
        except ChannelBacklog:
            got = "dropped"
        with lock:
            outcomes.append(got)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(POSTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    dropped = outcomes.count("dropped")
    assert dropped >= POSTS - MAX_QUEUED - 1 and outcomes.count("posted") == POSTS - dropped, outcomes
    texts = [
        str(c.params["text"])
        for c in slack.calls_to("chat.postMessage")
        if c.params["channel"] == "C0BACKLOG"
    ]
    notes = [t for t in texts if "were dropped" in t]
    assert len(notes) == 1 and notes[0].startswith(f":warning: {dropped} message(s)"), notes
    assert len(texts) == POSTS - dropped + 1
    poster.post("C0BACKLOG", "later")  # nothing dropped since: nothing said again
    assert (
        len([c for c in slack.calls_to("chat.postMessage") if "were dropped" in str(c.params["text"])]) == 1
    )
