"""Fuzzing `POST /slack/events` of a real `gpubot serve --http` (issue 10).

Hypothesis writes bodies (bytes, forms, JSON payloads of any shape, block
actions with fields of the wrong type) and headers (signatures, timestamps,
content types), half of them signed with the real secret so they reach Bolt
and the bot's listeners. Every request must be answered within a second with
a status the bot means (never a dropped connection, never a 500), and the
bot's log must never hold a traceback.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.slack_api import serve_slack
from tests.slack_harness import SECRET, BotProcess, action_payload, bot_env, write_scenario

ANSWERS = {200, 400, 401, 404, 405, 411, 413}

_json: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["user", "channel", "container", "message", "actions", "team", "type", "trigger_id", "block_id", "value"]
)


@st.composite
def _click(draw: st.DrawFn) -> str:
    """A block_actions payload with some fields replaced by values of any type."""
    payload: dict[str, Any] = action_payload(
        draw(st.sampled_from(["layer_descend", "walk_all", "cordon_node", "must_gather", "digest_diagnose"])),
        draw(st.text(max_size=30)),
    )
    # The action's own fields first: a replaced `actions` has none.
    for key in sorted(draw(st.lists(_keys, max_size=3)), key=lambda k: k not in ("block_id", "value")):
        if key in ("block_id", "value"):
            payload["actions"][0][key] = draw(_json)
        else:
            payload[key] = draw(_json)
    return urlencode({"payload": json.dumps(payload)})


_bodies = st.one_of(
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    st.text(max_size=300),
    st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=5).map(urlencode),
    _json.map(lambda v: urlencode({"payload": json.dumps(v)})),
    _json.map(json.dumps),
    _click(),
)


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    folder = tmp_path_factory.mktemp("fuzz")
    with serve_slack() as slack:
        proc = BotProcess(["--scenario", str(write_scenario(folder))], bot_env(slack.url), folder / "bot.log")
        try:
            yield proc
        finally:
            proc.stop()


def _send(port: int, body: bytes, headers: dict[str, str]) -> int:
    head = "POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as conn:
        conn.sendall(head.encode("latin-1") + body)
        answer = b""
        while b"\r\n" not in answer:
            chunk = conn.recv(1024)
            if not chunk:
                break
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 "), f"no HTTP answer: {answer!r}"
    return int(answer.split(b" ", 2)[1])


_header_value = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=_bodies,
    signed=st.booleans(),
    content_type=st.sampled_from(
        ["application/x-www-form-urlencoded", "application/json", "text/plain", "multipart/form-data", ""]
    ),
    ts_shift=st.sampled_from([0, 0, -400, 400]),
    extra=st.dictionaries(
        st.sampled_from(["X-Slack-Signature", "X-Slack-Request-Timestamp", "X-Slack-Retry-Num"]),
        _header_value,
        max_size=2,
    ),
)
def test_every_fuzzed_request_is_answered_within_a_second(
    bot: BotProcess, body: str, signed: bool, content_type: str, ts_shift: int, extra: dict[str, str]
) -> None:
    raw = body.encode("utf-8") if signed else body.encode("latin-1", errors="replace")
    headers: dict[str, str] = {}
    if signed:  # over the exact bytes sent
        ts = str(int(time.time()) + ts_shift)
        mac = hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + raw, hashlib.sha256).hexdigest()
        headers = {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + mac}
    else:
        headers.update(extra)
    if content_type:
        headers["Content-Type"] = content_type
    started = time.monotonic()
    status = _send(bot.port, raw, headers)
    assert time.monotonic() - started < 1.0
    assert status in ANSWERS, status
    if not signed or ts_shift:
        assert status == 401


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=_click())
def test_every_signed_click_of_any_shape_is_answered_within_a_second(bot: BotProcess, body: str) -> None:
    """Clicks with `user`, `channel`, `message`, `block_id` … of the wrong type reach the listener."""
    raw = body.encode()
    ts = str(int(time.time()))
    mac = hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + raw, hashlib.sha256).hexdigest()
    headers = {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": "v0=" + mac,
        "Content-Type": "application/x-www-form-urlencoded",
    }
    started = time.monotonic()
    status = _send(bot.port, raw, headers)
    assert time.monotonic() - started < 1.0
    assert status in ANSWERS, status


def test_the_fuzzed_bot_logged_no_traceback(bot: BotProcess) -> None:
    """Runs after the fuzzing above (same module bot): the log is one line per event, no traceback."""
    text = bot.log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]
