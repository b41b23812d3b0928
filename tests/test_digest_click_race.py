"""A digest row's button pressed while Slack's answer to the digest post is still on its way.

People see the message as soon as Slack has it; the bot learns its ts only from the answer. A click
in between used to be refused as "not a digest this bot posted in this channel" (and made CI flaky
on a loaded machine). The fake Slack keeps the message at once and answers late (`lose_answers`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import (
    action_body,
    dispatch,
    inprocess_bot,
    posts,
    slash_body,
    told,
    wait_for,
    write_scenario,
)

CHANNEL = "C0DIGESTRACE"


@pytest.fixture
def bot(slack: FakeSlack, tmp_path: Path) -> Iterator[Any]:
    b = inprocess_bot(slack.url, write_scenario(tmp_path))
    try:
        yield b
    finally:
        b.shutdown(wait=True)


def _diagnose_value(message: dict[str, Any]) -> str:
    return next(
        el["value"]
        for b in message["blocks"]
        if b.get("type") == "actions"
        for el in b["elements"]
        if el["action_id"] == "digest_diagnose"
    )


def test_a_click_before_slack_answered_the_digest_post_diagnoses_the_node(bot: Any, slack: FakeSlack) -> None:
    slack.lose_answers("chat.postMessage", 3.0)  # the digest's post: kept at once, answered in 3 s
    dispatch(bot, slash_body("digest", user="U0DIGESTER", channel=CHANNEL))
    shown = wait_for("the digest in the channel", lambda: list(slack.messages.get(CHANNEL, [])))[0]
    dispatch(
        bot,
        action_body(
            "digest_diagnose",
            _diagnose_value(shown),
            user="U0ONCALL",
            channel=CHANNEL,
            message_ts=shown["ts"],
        ),
    )
    walk = wait_for(
        "the node's walk in the digest's thread",
        lambda: [c for c in posts(slack, CHANNEL, shown["ts"]) if str(c.params["text"]).startswith("Layer ")],
        timeout=20,
    )
    assert walk
    assert not [t for t in told(slack, "U0ONCALL") if "not a digest this bot posted" in t]


def test_a_forged_value_for_a_digest_never_posted_here_is_still_refused(bot: Any, slack: FakeSlack) -> None:
    dispatch(bot, slash_body("digest", user="U0DIGESTER", channel=CHANNEL))
    shown = wait_for("the digest", lambda: list(slack.messages.get(CHANNEL, [])))[0]
    value = _diagnose_value(shown)
    dispatch(
        bot,
        action_body("digest_diagnose", value, user="U0FORGER", channel="C0ELSEWHERE", message_ts=shown["ts"]),
    )
    said = wait_for("the forger told", lambda: told(slack, "U0FORGER"))
    assert "not a digest this bot posted in this channel" in said[-1]
