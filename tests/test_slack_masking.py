"""Nothing said to Slack carries a token (issue 10, item 3): `gpubot serve --http` against a fake Slack.

Slack's error texts can echo the request: an HTML 500 from a proxy quoting
`Authorization: Bearer xoxb-…`, or a JSON `error` with the same. Those reasons
reach ephemeral replies and thread posts; cluster text (a log line holding a
token) reaches the layer messages. Every text, block and file sent must pass the
log's masking, and the log must not hold the token either.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import yaml

from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import BotProcess, scenario_bot, scenario_doc, told, wait_for

ECHOED = "xoxb-9999-8888-EchoedBotToken"
LOGGED = "xoxp-7777-6666-TokenInAPodLog"
PROXY_500 = (
    "<html><body><h1>502 Bad Gateway</h1><pre>upstream request: POST /api/chat.postMessage\n"
    f"Authorization: Bearer {ECHOED}\nContent-Type: application/json</pre></body></html>"
)


@pytest.fixture(scope="module")
def bot(slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    folder = tmp_path_factory.mktemp("masking")
    doc = scenario_doc()
    key = next(iter(doc["logs"]))
    doc["logs"][key] = doc["logs"][key].replace("Xid=79", f"Xid=79 (reported with token={LOGGED})", 1)
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with scenario_bot(slack.url, folder, path) as proc:
        yield proc


def _sent(slack: FakeSlack) -> str:
    return json.dumps([c.params for c in slack.calls], default=str)


def test_a_proxy_error_echoing_the_token_is_masked_in_the_ephemeral_reply(
    bot: BotProcess, slack: FakeSlack
) -> None:
    slack.reset()
    slack.fail("chat.postMessage", 502, times=4, body=PROXY_500)
    assert bot.command("why ml/trainer-0", user="U0PROXY")[0] == 200
    answer = wait_for("the failure told to the user", lambda: told(slack, "U0PROXY"), explain=bot.log)
    assert "could not post" in answer[0]
    assert ECHOED not in _sent(slack) and "<masked>" in answer[0]
    assert ECHOED not in bot.log_path.read_text()


def test_a_json_error_echoing_the_token_is_masked_in_the_ephemeral_reply(
    bot: BotProcess, slack: FakeSlack
) -> None:
    slack.reset()
    slack.fail(
        "chat.postMessage", 200, body={"ok": False, "error": f"invalid_auth (Authorization: Bearer {ECHOED})"}
    )
    assert bot.command("why ml/trainer-0", user="U0JSON")[0] == 200
    answer = wait_for("the failure told to the user", lambda: told(slack, "U0JSON"), explain=bot.log)
    assert ECHOED not in _sent(slack) and "<masked>" in answer[0]
    assert ECHOED not in bot.log_path.read_text()


def test_a_token_in_cluster_text_is_masked_in_the_thread(bot: BotProcess, slack: FakeSlack) -> None:
    slack.reset()
    assert bot.command("why ml/trainer-0", user="U0THREAD")[0] == 200
    wait_for(
        "the card layer's message",
        lambda: [c for c in slack.calls_to("chat.postMessage") if "Xid" in json.dumps(c.params)],
        explain=bot.log,
    )
    sent = _sent(slack)
    assert "Xid" in sent and LOGGED not in sent
    assert LOGGED not in bot.log_path.read_text()
