"""Socket Mode: `gpubot serve` (no --http) connects to a local WebSocket server and answers a command.

The fake Slack's `apps.connections.open` hands out the ws:// URL of an aiohttp
server on 127.0.0.1, which plays Slack's side: hello, then a slash-command
envelope; the bot must acknowledge the envelope and run the walk. One test
only: closing the built-in client costs seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.fakes.slack_socket import SlackSocket
from tests.slack_harness import (
    APP_TOKEN,
    BotProcess,
    bot_env,
    get,
    post,
    slash_body,
    wait_for,
    write_scenario,
)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_socket_mode_round_trip(slack: FakeSlack, tmp_path: Path) -> None:
    socket = SlackSocket()
    slack.socket_url = socket.url
    alert_token = "socket-alert-token-0123456789"
    env = bot_env(
        slack.url,
        SLACK_APP_TOKEN=APP_TOKEN,
        GPUBOT_ALERT_TOKEN=alert_token,
        GPUBOT_ALERT_CHANNEL="C0SOCKETALERTS",
    )
    env.pop("SLACK_SIGNING_SECRET")  # Socket Mode needs no signing secret
    bot = BotProcess(["--scenario", str(write_scenario(tmp_path))], env, tmp_path / "bot.log", http=False)
    try:
        assert socket.connected.wait(10)
        assert slack.calls_to("apps.connections.open")
        # /readyz says the connection is up once the client has taken the hello (its own thread,
        # a moment after the server sent it); there is no /slack/events in Socket Mode.
        wait_for("/readyz ready", lambda: get(bot.url + "/readyz") == (200, "ready\n"), explain=bot.log)
        assert get(bot.url + "/healthz")[0] == 200

        payload = dict(parse_qsl(slash_body("why ml/trainer-0", channel="C0SOCKET")))
        socket.send(
            {
                "envelope_id": "env-1",
                "type": "slash_commands",
                "accepts_response_payload": True,
                "payload": payload,
            }
        )
        ack = wait_for(
            "the envelope ack", lambda: [m for m in socket.received if m.get("envelope_id") == "env-1"]
        )
        assert ack[0]["payload"]["text"] == "walking the layers for ml/trainer-0…"
        wait_for(
            "the walk's layer 5 in the thread",
            lambda: [
                c
                for c in slack.calls_to("chat.postMessage")
                if c.params.get("channel") == "C0SOCKET"
                and str(c.params.get("text", "")).startswith("Layer 5 (")
            ],
        )
        # Alertmanager's webhook is on the same (health) port in Socket Mode: no public Slack endpoint needed.
        alert = {"status": "firing", "labels": {"alertname": "GPUXidError", "Hostname": "gpu-7"}}
        hook = json.dumps({"version": "4", "alerts": [alert]})
        auth = {"Authorization": f"Bearer {alert_token}", "Content-Type": "application/json"}
        assert post(bot.url + "/alertmanager", hook, auth)[0] == 200
        wait_for(
            "the alert's incident root",
            lambda: [
                c for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == "C0SOCKETALERTS"
            ],
        )
    finally:
        assert bot.stop() == 0
        socket.stop()
