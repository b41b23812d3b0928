"""The root message is posted once even when Slack's answer is lost (issue 10, item 6).

Slack takes the root's `chat.postMessage`, but its answer arrives after the
client's timeout: v0.1 retried and left a second root "walking…" forever.
Over real HTTP (the bot's own server, a signed `/gpu why`) against the fake
Slack, whose `conversations.history` returns what it took, with metadata
when asked, as Slack does.
"""

from __future__ import annotations

from pathlib import Path

from bot.slack.transport import start_http
from tests.fakes.slack_api import serve_slack
from tests.slack_harness import inprocess_bot, post, sign, slash_body, wait_for, write_scenario

CHANNEL = "C0SLOWSLACK"


def test_a_root_post_whose_answer_was_lost_is_not_posted_twice(tmp_path: Path) -> None:
    with serve_slack() as slack:
        gpubot = inprocess_bot(slack.url, write_scenario(tmp_path), timeout_s=1)
        server = start_http(gpubot, "127.0.0.1", 0, events=True)
        try:
            slack.lose_answers("chat.postMessage", seconds=2.0, times=1)  # the root: taken, answer lost
            body = slash_body("why ml/trainer-0", channel=CHANNEL)
            url = f"http://127.0.0.1:{server.server_address[1]}/slack/events"
            assert post(url, body, sign(body))[0] == 200
            wait_for(
                "the walk to finish (its root updated to done)",
                lambda: [
                    c for c in slack.calls_to("chat.update") if "walking" not in str(c.params.get("text"))
                ],
                timeout=30,
            )
        finally:
            server.shutdown()
            server.server_close()
            gpubot.shutdown()
        roots = [m for m in slack.messages.get(CHANNEL, []) if "thread_ts" not in m]
        assert len(roots) == 1, [m["text"] for m in roots]
        assert slack.calls_to("conversations.history"), "the retry did not look for the lost post"
        # Every update of the track went to the one root, so none stays "walking…".
        assert {c.params["ts"] for c in slack.calls_to("chat.update")} == {roots[0]["ts"]}
        layers = [m for m in slack.messages[CHANNEL] if m.get("thread_ts") == roots[0]["ts"]]
        assert layers, "the layers were not posted in the root's thread"
