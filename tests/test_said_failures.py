"""An unexpected exception after Slack's ack is always said (issue 9 item 11; spec: "a person never
waits on 'walking…' forever").

One test per entry point, each injecting an error no backend explains (a KeyError, as a renderer
or a fact builder with a bug would raise) into the real code path: the bot in-process (build_app),
signed requests through Bolt, the real Poster against the fake Slack Web API. Each asserts where
it is said (the walk's thread when there is one, else an ephemeral to whoever asked), that the
walk id is in it, and that the log has the error once with its traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.slack.httpserver import Request
from bot.slack.scheduler import DigestJob
from bot.slack.state import MemoryState
from tests.alertmanager import alert, body
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.slack_harness import (
    BOT_TOKEN,
    action_body,
    dispatch,
    inprocess_bot,
    posts,
    slash_body,
    told,
    wait_for,
    write_scenario,
)

ALERT_TOKEN = "said-failures-alert-token-0123456789"
BUG = "'allocatable'"  # the injected KeyError's text


class Bug(KeyError):
    """Stands for a programming error deep in a walk (a renderer, a fact builder)."""


def boom(*_args: Any, **_kw: Any) -> Any:
    raise Bug("allocatable")


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def bot(slack: FakeSlack, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[Any]:
    caplog.set_level(logging.INFO)
    b = inprocess_bot(
        slack.url,
        write_scenario(tmp_path),
        GPUBOT_ALERT_TOKEN=ALERT_TOKEN,
        GPUBOT_ALERT_CHANNEL="C0SAIDALERT",
    )
    try:
        yield b
    finally:
        b.shutdown(wait=True)


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], Bug)]


def assert_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    found = tracebacks(caplog)
    assert len(found) == 1, [r.getMessage() for r in found]


def said_unexpected(text: str, walk_id: str) -> None:
    assert "unexpected error (Bug: " + BUG in text, text
    assert walk_id in text, text


def walk_id_from(slack: FakeSlack, channel: str) -> str:
    """The walk id from the root's buttons' values, or from the ephemeral that named it."""
    for call in slack.calls:
        if call.params.get("channel") != channel:
            continue
        for block in call.params.get("blocks") or []:
            for el in block.get("elements", []) if isinstance(block, dict) else []:
                if isinstance(el, dict) and el.get("action_id") == "walk_all":
                    return str(el["value"])
    raise AssertionError(f"no walk id in {channel}")


def roots(slack: FakeSlack, channel: str) -> list[dict[str, Any]]:
    """The channel's top-level messages as the fake Slack keeps them (ts, metadata)."""
    return [m for m in list(slack.messages.get(channel, [])) if not m.get("thread_ts")]


def root_updates(slack: FakeSlack, channel: str) -> list[Call]:
    return [c for c in slack.calls_to("chat.update") if c.params.get("channel") == channel]


# --- /gpu why -----------------------------------------------------------------------------------


def test_a_bug_before_the_root_is_told_to_the_asker(
    bot: Any, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    bot.service.open_walk = boom  # reading the pod breaks: no root exists yet
    dispatch(bot, slash_body("why ml/trainer-0", user="U0EARLY", channel="C0SAIDEARLY"))
    text = wait_for("the answer", lambda: told(slack, "U0EARLY"))[0]
    assert "failed before it started" in text
    assert posts(slack, "C0SAIDEARLY") == []  # nothing in the channel, and no "walking…" root
    walk_id = text.split("walk `")[1].split("`")[0]
    said_unexpected(text, walk_id)
    assert_logged_once(caplog)


def test_a_renderer_bug_after_the_root_is_said_in_the_thread_and_on_the_root(
    bot: Any, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    channel = "C0SAIDRENDER"
    monkeypatch.setattr("handlers.walks.layer_message", boom)  # the first layer's message cannot be drawn
    dispatch(bot, slash_body("why ml/trainer-0", user="U0RENDER", channel=channel))
    root = wait_for("the root", lambda: roots(slack, channel))[0]
    walk_id = root["metadata"]["event_payload"]["key"].removesuffix(":root")
    in_thread = wait_for(
        "the failure in the thread",
        lambda: [c for c in posts(slack, channel, root["ts"]) if ":x:" in c.params["text"]],
    )
    said_unexpected(in_thread[0].params["text"], walk_id)
    last = wait_for(
        "the root marked stopped",
        lambda: [c for c in root_updates(slack, channel) if "Stopped" in json.dumps(c.params["blocks"])],
    )[-1]
    assert " …" not in json.dumps(last.params["blocks"])  # no longer "running"
    assert_logged_once(caplog)


def test_whatever_escapes_the_walk_service_is_told_to_the_asker(
    bot: Any, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    bot.service.start = boom  # the last resort: the worker pool's own catch
    body_ = slash_body("why ml/trainer-0", user="U0ESCAPE", channel="C0SAIDESCAPE")
    ack = json.loads(dispatch(bot, body_).body)["text"]
    assert ack == "walking the layers for ml/trainer-0…"
    text = wait_for("the answer", lambda: told(slack, "U0ESCAPE"))[0]
    assert text.startswith(":x: walk ") and "of ml/trainer-0 for U0ESCAPE failed" in text
    said_unexpected(text, text.split()[2])
    assert_logged_once(caplog)


# --- clicks ---------------------------------------------------------------------------------------


def _walked(bot: Any, slack: FakeSlack, channel: str) -> tuple[str, dict[str, Any]]:
    """A finished walk in `channel`: its id and the click fields of its first layer message."""
    dispatch(bot, slash_body("why ml/trainer-0", channel=channel))
    layer = wait_for(
        "a layer message",
        lambda: [c for c in posts(slack, channel) if str(c.params.get("text", "")).startswith("Layer 1 (")],
    )[0]
    wait_for(
        "the verdict",
        lambda: [c for c in root_updates(slack, channel) if "*Verdict*" in json.dumps(c.params["blocks"])],
    )
    return walk_id_from(slack, channel), {"channel": channel, "message_ts": layer.params["thread_ts"]}


def test_a_bug_in_a_button_is_said_in_the_walks_thread(
    bot: Any, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    channel = "C0SAIDCLICK"
    walk_id, kw = _walked(bot, slack, channel)
    monkeypatch.setattr("handlers.buttons.remaining", boom)
    dispatch(bot, action_body("walk_all", walk_id, user="U0CLICKER", **kw))
    said = wait_for(
        "the failure in the thread",
        lambda: [c for c in posts(slack, channel, kw["message_ts"]) if ":x:" in c.params["text"]],
    )[0]
    assert "walk all by U0CLICKER failed" in said.params["text"]
    said_unexpected(said.params["text"], walk_id)
    assert_logged_once(caplog)


def test_a_bug_before_a_clicks_walk_is_read_is_told_to_the_clicker(
    bot: Any, slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    bot.service.load = boom
    dispatch(bot, action_body("layer_descend", "0123456789abcdef", user="U0EARLYCLICK", channel="C0SAIDC2"))
    text = wait_for("the answer", lambda: told(slack, "U0EARLYCLICK"))[0]
    assert "*layer descend* failed" in text
    said_unexpected(text, "0123456789abcdef")
    assert posts(slack, "C0SAIDC2") == []
    assert_logged_once(caplog)


# --- the digest ----------------------------------------------------------------------------------


def test_a_bug_in_gpu_digest_is_told_to_the_asker(
    bot: Any, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("bot.slack.digest_post.post_digest", boom)
    dispatch(bot, slash_body("digest", user="U0DIGESTER", channel="C0SAIDDIGEST"))
    text = wait_for("the answer", lambda: told(slack, "U0DIGESTER"))[0]
    assert text.startswith(":x: the digest failed: unexpected error (Bug: " + BUG), text
    assert posts(slack, "C0SAIDDIGEST") == []
    assert_logged_once(caplog)


def test_a_bug_in_a_digest_diagnose_walk_is_said_in_the_digest_thread(
    bot: Any, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    channel = "C0SAIDDIAG"
    dispatch(bot, slash_body("digest", channel=channel))
    digest = wait_for("the digest", lambda: posts(slack, channel))[0]
    value = next(
        el["value"]
        for b in digest.params["blocks"]
        if b.get("type") == "actions"
        for el in b["elements"]
        if el["action_id"] == "digest_diagnose"
    )
    ts = roots(slack, channel)[0]["ts"]
    monkeypatch.setattr("handlers.walks.layer_message", boom)
    dispatch(bot, action_body("digest_diagnose", value, user="U0ONCALL", channel=channel, message_ts=ts))
    said = wait_for(
        "the failure in the digest's thread",
        lambda: [c for c in posts(slack, channel, ts) if "unexpected error" in c.params["text"]],
    )[0]
    walk_id = value.replace("|", ".")
    said_unexpected(said.params["text"], walk_id)
    assert_logged_once(caplog)


def test_a_crashed_daily_digest_is_said_in_its_channel(
    slack: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    from zoneinfo import ZoneInfo

    from bot.slack.post import Poster

    poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01)
    job = DigestJob(
        collect=boom, poster=poster, channel="C0SAIDDAILY", store=MemoryState(), tz=ZoneInfo("UTC")
    )
    with pytest.raises(Bug):  # still raised: APScheduler logs it with its traceback
        job()
    said = posts(slack, "C0SAIDDAILY")
    assert len(said) == 1
    assert said[0].params["text"].startswith(":x: the GPU fleet digest for ")
    assert "unexpected error (Bug: " + BUG in said[0].params["text"]


# --- alerts ---------------------------------------------------------------------------------------


def test_a_bug_in_an_alerts_walk_is_said_in_the_incident_thread(
    bot: Any, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("handlers.walks.layer_message", boom)
    hook = body([alert("GPUXidError", Hostname="gpu-7")])
    headers = {"authorization": f"Bearer {ALERT_TOKEN}", "content-type": "application/json"}
    assert bot.alerts(Request("POST", "/alertmanager", "", headers, hook)).status == 200
    root = wait_for("the incident root", lambda: roots(slack, "C0SAIDALERT"))[0]
    said = wait_for(
        "the failure in the incident thread",
        lambda: [
            c for c in posts(slack, "C0SAIDALERT", root["ts"]) if "unexpected error" in c.params["text"]
        ],
    )[0]
    assert "the walk stopped" in said.params["text"]
    assert "unexpected error (Bug: " + BUG in said.params["text"]
    assert_logged_once(caplog)
