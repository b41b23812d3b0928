"""Socket Mode envelopes pass the checks HTTP requests pass (bot/slack/gate.py).

The bot's Bolt app is connected by bot/slack/socketmode.py's handler, over
slack_sdk's built-in SocketModeClient, to a WebSocket server on 127.0.0.1
playing Slack (tests/fakes/slack_socket.py); the fake Slack Web API hands out
its URL. Envelopes are sent as Slack sends them: a duplicated envelope (same
envelope id, or Slack's redelivery with the same trigger id, or the same
click stamp) acts once; a malformed one is acknowledged, runs nothing, and is
logged once without a traceback. One connection for the module: closing the
client costs seconds.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl

import pytest

from bot.slack.gate import log as gate_log
from bot.slack.httpserver import RateLimitedLog
from bot.slack.transport import socket_mode
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.fakes.slack_socket import SlackSocket
from tests.slack_harness import (
    APP_TOKEN,
    action_payload,
    inprocess_bot,
    posts,
    slash_body,
    told,
    wait_for,
    write_scenario,
)

_ENVELOPES = itertools.count(1)


@pytest.fixture(scope="module")
def wired(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FakeSlack, SlackSocket, Any]]:
    socket = SlackSocket()
    with serve_slack() as slack:
        slack.socket_url = socket.url
        bot = inprocess_bot(slack.url, write_scenario(tmp_path_factory.mktemp("socket-gate")))
        handler = socket_mode(bot, APP_TOKEN)
        handler.connect()
        try:
            assert socket.connected.wait(10)
            yield slack, socket, handler
        finally:
            handler.close()
            bot.shutdown()
            socket.stop()


@pytest.fixture
def slack(wired: tuple[FakeSlack, SlackSocket, Any], caplog: pytest.LogCaptureFixture) -> FakeSlack:
    _, _, handler = wired
    handler.gate.refusals = RateLimitedLog(gate_log)  # each test sees its own first log line
    caplog.set_level(logging.INFO)
    return wired[0]


@pytest.fixture
def socket(wired: tuple[FakeSlack, SlackSocket, Any]) -> SlackSocket:
    return wired[1]


def envelope(kind: str, payload: Any, envelope_id: str | None = None) -> dict[str, Any]:
    return {
        "envelope_id": envelope_id or f"env-{next(_ENVELOPES)}",
        "type": kind,
        "accepts_response_payload": kind != "events_api",
        "payload": payload,
    }


def command(text: str, user: str, channel: str) -> dict[str, Any]:
    return envelope("slash_commands", dict(parse_qsl(slash_body(text, user=user, channel=channel))))


def click(payload: dict[str, Any]) -> dict[str, Any]:
    return envelope("interactive", payload)


def at_least(n: int, probe: Callable[[], list[Any]]) -> Callable[[], list[Any]]:
    """A wait_for probe that holds once `probe` has found `n` things."""
    return lambda: got if len(got := probe()) >= n else []


def acked(socket: SlackSocket, sent: dict[str, Any], times: int = 1) -> list[dict[str, Any]]:
    eid = sent["envelope_id"]
    return wait_for(f"{times} ack(s) of {eid}", at_least(times, lambda: socket.acks(eid)))


def refusal_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "gpubot.slack.events"]


def assert_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


def told_in(slack: FakeSlack, channel: str) -> list[str]:
    return [
        c.params["text"] for c in slack.calls_to("chat.postEphemeral") if c.params.get("channel") == channel
    ]


def roots(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in posts(slack, channel) if not c.params.get("thread_ts")]


# --- duplicates act once --------------------------------------------------------------------------


def test_the_same_command_envelope_twice_starts_one_walk(slack: FakeSlack, socket: SlackSocket) -> None:
    sent = command("why ml/trainer-0", "U0TWICE", "C0SOCKTWICE")
    socket.send(sent)
    socket.send(sent)  # the same envelope id: Slack's redelivery, or a replayed frame
    # Both acknowledged (the client works them concurrently, in either order); one ran.
    answers = [a.get("payload", {}).get("text") for a in acked(socket, sent, times=2)]
    assert sorted(answers, key=str) == [None, "walking the layers for ml/trainer-0…"]
    wait_for(
        "the walk's layer 5",
        lambda: [c for c in posts(slack, "C0SOCKTWICE") if "Layer 5 (" in c.params["text"]],
    )
    assert len(roots(slack, "C0SOCKTWICE")) == 1


def test_a_redelivered_command_with_a_new_envelope_id_runs_once(
    slack: FakeSlack, socket: SlackSocket
) -> None:
    sent = command("why ml/ghost-0", "U0REDELIVER", "C0SOCKRETRY")
    again = {**sent, "envelope_id": "env-retry-of-" + sent["envelope_id"], "retry_attempt": 1}
    socket.send(sent)
    socket.send(again)  # same payload (same trigger id), new envelope
    # A refused copy is acknowledged empty once the gate has refused it: nothing of it runs later.
    answers = [a.get("payload", {}).get("text") for a in (*acked(socket, sent), *acked(socket, again))]
    assert sorted(answers, key=str) == [None, "walking the layers for ml/ghost-0…"]
    wait_for("the answer", lambda: told(slack, "U0REDELIVER"))
    assert len(told(slack, "U0REDELIVER")) == 1


def test_a_click_with_the_same_action_ts_acts_once(
    slack: FakeSlack, socket: SlackSocket, caplog: pytest.LogCaptureFixture
) -> None:
    payload = action_payload("walk_all", "0123456789abcdef", user="U0DOUBLE", channel="C0SOCKOLD")
    socket.send(click(payload))
    # The same click (same user, button and action_ts) in a second envelope, with a fresh trigger id.
    socket.send(click({**payload, "trigger_id": payload["trigger_id"] + "-again"}))
    # A click's ack is empty either way: the gate's line says one copy was refused.
    wait_for("the refusal", lambda: [r for r in refusal_lines(caplog) if "replayed" in r.getMessage()])
    wait_for("the answer", lambda: told(slack, "U0DOUBLE"))
    assert len(told(slack, "U0DOUBLE")) == 1
    assert "no longer known" in told(slack, "U0DOUBLE")[0]


def test_two_clicks_of_the_same_button_at_different_times_both_act(
    slack: FakeSlack, socket: SlackSocket
) -> None:
    # The control: the replay record must not swallow a real second click.
    for stamp in ("1795000100.000001", "1795000101.000002"):
        payload = action_payload("walk_all", "0123456789abcdef", user="U0AGAIN", channel="C0SOCKOLD")
        payload["actions"][0]["action_ts"] = stamp
        socket.send(click(payload))
    wait_for("both answers", at_least(2, lambda: told(slack, "U0AGAIN")))


# --- malformed envelopes run nothing and are logged once ---------------------------------------------


def _set(path: tuple[str, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(payload: dict[str, Any]) -> None:
        where: Any = payload
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("name", "change", "clicker_told"),
    [
        # Bolt raises building its request from these: before the gate the envelope was never acked.
        ("channel as a number", _set(("channel",), 5), True),
        ("authorizations as text", _set(("authorizations",), "x"), True),
        ("no user", lambda p: p.pop("user"), False),
        ("user as a string", _set(("user",), "U0ASKER"), False),
        ("list block_id", _set(("actions", 0, "block_id"), ["layer1_actions"]), True),
        ("message as a string", _set(("message",), "1795000001.000100"), True),
        ("value as an object", _set(("actions", 0, "value"), {"walk": "x"}), True),
    ],
)
def test_a_malformed_click_envelope_runs_nothing_and_is_logged_once(
    slack: FakeSlack,
    socket: SlackSocket,
    caplog: pytest.LogCaptureFixture,
    name: str,
    change: Callable[[dict[str, Any]], None],
    clicker_told: bool,
) -> None:
    channel = "C0SOCKSHAPE" + str(sum(map(ord, name)))
    before = len(slack.calls)
    sent = []
    for _ in range(2):  # twice: still one log line (the second is counted into it)
        payload = action_payload("walk_all", "walk-0001", user="U0SHAPE", channel=channel)
        change(payload)
        sent.append(click(payload))
        socket.send(sent[-1])
    for one in sent:
        assert "payload" not in acked(socket, one)[0]  # acknowledged, so Slack does not redeliver it
    if clicker_told:
        answers = wait_for("the answers to the clicker", at_least(2, lambda: told_in(slack, channel)))
        assert len(answers) == 2 and all("nothing was done" in t for t in answers)
    ran = [c for c in slack.calls[before:] if c.method != "chat.postEphemeral"]
    assert ran == [], f"{name}: something ran"
    lines = refusal_lines(caplog)
    assert len(lines) == 1 and "wrong shape" in lines[0].getMessage(), [r.getMessage() for r in lines]
    assert_no_traceback(caplog)


@pytest.mark.parametrize(
    ("name", "message", "acked_id"),
    [
        ("not JSON", "{not json", None),
        ("a JSON list", "[1, 2]", None),
        (
            "payload as a list",
            '{"envelope_id": "env-list", "type": "interactive", "payload": [1]}',
            "env-list",
        ),
        (
            "payload as a number",
            '{"envelope_id": "env-num", "type": "slash_commands", "payload": 7}',
            "env-num",
        ),
    ],
)
def test_an_unreadable_socket_message_is_dropped_and_logged_once(
    slack: FakeSlack,
    socket: SlackSocket,
    caplog: pytest.LogCaptureFixture,
    name: str,
    message: str,
    acked_id: str | None,
) -> None:
    before = len(slack.calls)
    socket.send_raw(message)
    socket.send_raw(message)
    if acked_id is not None:
        wait_for("the acks", at_least(2, lambda: socket.acks(acked_id)))
    # Then a good command: it still runs (the connection and the client survived the junk).
    sent = command("help", "U0AFTER", "C0SOCKAFTER")
    socket.send(sent)
    assert "*Usage*" in acked(socket, sent)[0]["payload"]["text"]
    assert [c.method for c in slack.calls[before:]] == []
    lines = refusal_lines(caplog)
    assert len(lines) == 1 and "unreadable" in lines[0].getMessage(), [r.getMessage() for r in lines]
    assert_no_traceback(caplog)
