"""A click acts only on a walk of its own channel, and digest buttons only on digests the bot posted
(issue 10, item 7): signed clicks against `gpubot serve --http`.

Adversarial inputs: a user in channel B pressing `walk_all` with channel A's
walk id, an operator in B pressing `uncordon_node` on A's walk, a forged
`digest-…|gpu-7` value no digest carried, and a real digest's button replayed
from another channel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import OPERATOR, BotProcess, scenario_bot, told, wait_for

A, B = "C0CHANNELA", "C0CHANNELB"


@pytest.fixture(scope="module")
def bot(slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    with scenario_bot(slack.url, tmp_path_factory.mktemp("crossed")) as proc:
        yield proc


def _buttons(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        e for b in message.get("blocks") or [] if b.get("type") == "actions" for e in b.get("elements", [])
    ]


def _walk_in(slack: FakeSlack, bot: BotProcess, channel: str) -> tuple[str, str]:
    """Start a walk in `channel`; (its walk id, the ts of a layer message with buttons)."""
    assert bot.command("why ml/trainer-0", channel=channel)[0] == 200

    def layer() -> tuple[str, str] | None:
        for m in slack.messages.get(channel, []):
            for button in _buttons(m):
                if button.get("action_id") == "walk_all":
                    return button["value"], m["ts"]
        return None

    return wait_for(f"a layer message in {channel}", layer, explain=bot.log)


def _final(update: dict[str, Any]) -> bool:
    """A root update of channel A made when its walk had ended (see handlers.blocks.root_message)."""
    blocks = update.get("blocks")
    if isinstance(blocks, str):
        blocks = json.loads(blocks)
    return update.get("channel") == A and any(
        "*Verdict*" in json.dumps(b) or "Every layer that ran is OK" in json.dumps(b) for b in blocks or []
    )


def _posted_in(slack: FakeSlack, channel: str) -> int:
    return len(slack.messages.get(channel, []))


def test_a_click_from_another_channel_does_nothing(bot: BotProcess, slack: FakeSlack) -> None:
    walk_id, ts = _walk_in(slack, bot, A)
    # Settled once the root's last update is in (the verdict or all-OK section follows the track only then).
    wait_for("the walk to settle", lambda: [u for u in slack.calls_to("chat.update") if _final(u.params)])
    before = _posted_in(slack, A)
    # The same walk's buttons, pressed from channel B (a forged or copied payload).
    assert bot.click("walk_all", walk_id, user="U0INTRUDER", channel=B, message_ts=ts)[0] == 200
    assert bot.click("uncordon_node", walk_id, user=OPERATOR, channel=B, message_ts=ts)[0] == 200
    wait_for("both clickers told", lambda: told(slack, "U0INTRUDER") and told(slack, OPERATOR))
    assert "another channel" in told(slack, "U0INTRUDER")[-1]
    assert "another channel" in told(slack, OPERATOR)[-1]
    assert _posted_in(slack, A) == before and _posted_in(slack, B) == 0
    assert not [c for c in slack.calls_to("chat.postMessage") if "uncordon" in json.dumps(c.params)]


def test_a_forged_digest_button_creates_no_walk(bot: BotProcess, slack: FakeSlack) -> None:
    assert bot.click("digest_diagnose", "digest-20261129T090000Z|gpu-7", user="U0FORGER", channel=B)[0] == 200
    wait_for("the forger told", lambda: told(slack, "U0FORGER"))
    assert "not a digest this bot posted" in told(slack, "U0FORGER")[-1]
    assert _posted_in(slack, B) == 0


def test_a_real_digest_button_works_in_its_channel_and_nowhere_else(
    bot: BotProcess, slack: FakeSlack
) -> None:
    channel = "C0DIGEST"
    assert bot.command("digest", channel=channel)[0] == 200

    def digest() -> tuple[str, str] | None:
        for m in slack.messages.get(channel, []):
            for button in _buttons(m):
                if button.get("action_id") == "digest_diagnose":
                    return button["value"], m["ts"]
        return None

    value, ts = wait_for("the digest", digest, explain=bot.log)
    assert bot.click("digest_diagnose", value, user="U0ELSEWHERE", channel=B, message_ts=ts)[0] == 200
    wait_for("the click from elsewhere refused", lambda: told(slack, "U0ELSEWHERE"))
    assert _posted_in(slack, B) == 0
    did = value.split("|")[0]
    unflagged = f"{did}|gpu-2"  # a node the digest did not flag
    assert (
        bot.click("digest_diagnose", unflagged, user="U0UNFLAGGED", channel=channel, message_ts=ts)[0] == 200
    )
    wait_for("the unflagged node refused", lambda: told(slack, "U0UNFLAGGED"))
    assert "not flagged" in told(slack, "U0UNFLAGGED")[-1]
    before = _posted_in(slack, channel)
    assert bot.click("digest_diagnose", value, user="U0DIGESTER", channel=channel, message_ts=ts)[0] == 200
    wait_for(
        "the diagnose walk's root in the digest's thread", lambda: _posted_in(slack, channel) > before + 1
    )
    assert bot.log_path.read_text().count("Traceback") == 0
