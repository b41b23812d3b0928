"""The lost-post lookup is opt-in (issue 22 item 4): GPUBOT_SLACK_HISTORY and the history manifest.

Against the fake Slack, through the real Poster and slack_sdk: Slack takes a root
post and its answer arrives after the client's timeout. Without the setting (the
default) no message is read (no `conversations.history` / `.replies` call): the
root is posted again, saying it may repeat the one above. With it, the lookup
finds the first post and nothing is posted twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bot.ops.config import ConfigError, load_config
from bot.slack.post import POSTED_AGAIN, Poster
from tests.fakes.slack_api import FakeSlack, serve_slack

TOKEN = "xoxb-0000-history-test"
CHANNEL = "C0LOSTROOT"
BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "walking…"}}]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def reads(slack: FakeSlack) -> list[str]:
    return [c.method for c in slack.calls if c.method in ("conversations.history", "conversations.replies")]


def test_without_the_setting_a_lost_root_is_posted_again_saying_so_and_nothing_is_read(
    slack: FakeSlack,
) -> None:
    slack.lose_answers("chat.postMessage", seconds=2.0, times=1)
    poster = Poster(TOKEN, slack.url, backoff_s=0.01, timeout_s=1)  # history off: the default
    ref = poster.post(CHANNEL, "root", BLOCKS, key="walk-1:root")
    first, second = slack.messages[CHANNEL]
    assert ref.ts == second["ts"] != first["ts"]  # the walk goes on under the second
    assert POSTED_AGAIN not in first["text"] and POSTED_AGAIN in second["text"]
    [call] = [c for c in slack.calls_to("chat.postMessage") if POSTED_AGAIN in str(c.params.get("text"))]
    sent = call.params["blocks"]
    blocks = json.loads(sent) if isinstance(sent, str) else sent
    assert blocks[:-1] == BLOCKS and POSTED_AGAIN in json.dumps(blocks[-1])
    assert reads(slack) == []


def test_without_the_setting_a_thread_reply_is_not_looked_for_either(slack: FakeSlack) -> None:
    slack.lose_answers("chat.postMessage", seconds=2.0, times=1)
    poster = Poster(TOKEN, slack.url, backoff_s=0.01, timeout_s=1)
    poster.post(CHANNEL, "layer 1", thread_ts="1795000001.000100", key="walk-1:layer1")
    assert poster.find_posted(CHANNEL, "1795000001.000100", "walk-1:layer1", 0.0) is None
    assert reads(slack) == []


def test_a_post_that_is_not_made_once_is_never_noted(slack: FakeSlack) -> None:
    """Without a key there is nothing to look for: the SDK's handlers retry it as any call."""
    slack.fail("chat.postMessage", 500, times=1)
    Poster(TOKEN, slack.url, backoff_s=0.01).post(CHANNEL, "a reply")
    assert [m["text"] for m in slack.messages[CHANNEL]] == ["a reply"]


def test_with_the_setting_the_lost_root_is_found_and_not_posted_twice(slack: FakeSlack) -> None:
    slack.lose_answers("chat.postMessage", seconds=2.0, times=1)
    poster = Poster(TOKEN, slack.url, backoff_s=0.01, timeout_s=1, history=True)
    ref = poster.post(CHANNEL, "root", BLOCKS, key="walk-2:root")
    [only] = slack.messages[CHANNEL]
    assert ref.ts == only["ts"] and POSTED_AGAIN not in only["text"]
    assert reads(slack) == ["conversations.history"]
    found = poster.find_posted(CHANNEL, None, "walk-2:root", 0.0)
    assert found is not None and found.ts == only["ts"]


def test_the_setting_is_off_unless_set_true() -> None:
    assert load_config({}).slack_history is False
    assert load_config({"GPUBOT_SLACK_HISTORY": "true"}).slack_history is True
    assert load_config({"GPUBOT_SLACK_HISTORY": "False"}).slack_history is False
    with pytest.raises(ConfigError, match="GPUBOT_SLACK_HISTORY must be true or false"):
        load_config({"GPUBOT_SLACK_HISTORY": "1"})
