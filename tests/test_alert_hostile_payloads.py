"""`gpubot serve` (a subprocess, real redis-server, the fake Slack) against payloads no Alertmanager
sends but anyone holding the token, or a broken proxy, can (issue 20, items 4 and 10), and its
stale sweep running on its own timer (item 1).

Expectations, written before running:
- `truncatedAlerts` that is not a whole number from 0 to 2^53 (1e20 written out, negative,
  fractional, a string, NaN, Infinity) is a 400 saying so, answered at once: 16 of them at
  once on a bot allowed 16 connections leave /healthz, the webhook and /slack/events answering;
- a lone surrogate (`\\ud800` written as a JSON escape, valid JSON but not encodable as UTF-8)
  in a label or an annotation is replaced by U+FFFD: the thread opens, no 500;
- with GPUBOT_ALERT_STALE_HOURS small, an incident nobody resolves is closed as stale by the
  running process, its root updated in place.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.alertmanager import alert, payload
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import BotProcess, bot_env, get, post, sign, slash_body, wait_for, write_scenario

TOKEN = "hostile-alert-token-0123456789abcdef"
CHANNEL = "C0HOSTILE"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
XID = {"Hostname": "gpu-7", "gpu": "0"}


@pytest.fixture(scope="module")
def bot(
    slack: FakeSlack, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    folder = tmp_path_factory.mktemp("hostile-alerts")
    env = bot_env(
        slack.url,
        REDIS_URL=redis_server.url,
        GPUBOT_ALERT_TOKEN=TOKEN,
        GPUBOT_ALERT_CHANNEL=CHANNEL,
        GPUBOT_HTTP_MAX_CONNECTIONS="16",
        GPUBOT_HTTP_TIMEOUT_S="5",
        GPUBOT_ALERT_STALE_HOURS="0.001",  # 3.6 s: the sweep runs every second
    )
    proc = BotProcess(["--scenario", str(write_scenario(folder))], env, folder / "bot.log")
    try:
        yield proc
    finally:
        proc.stop()


def webhook(bot: Any, data: bytes | str, timeout: float = 10.0) -> tuple[int, str]:
    text = data.decode() if isinstance(data, bytes) else data
    return post(bot.url + "/alertmanager", text, HEADERS, timeout=timeout)


def roots(slack: FakeSlack) -> list[Any]:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


ABSURD = [
    "100000000000000000000",  # 1e20, written out: a whole number Python would count to forever
    "18446744073709551616",  # 2^64
    "1e20",
    "-1",
    "2.5",
    '"7"',
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
]


def _with_truncated(raw: str) -> str:
    doc = json.dumps({**payload([alert("GPUXidError", **XID)]), "truncatedAlerts": 0})
    return doc.replace('"truncatedAlerts": 0', f'"truncatedAlerts": {raw}')


def test_absurd_truncated_counts_are_refused_at_once_and_leave_every_route_answering(bot: Any) -> None:
    bodies = [_with_truncated(ABSURD[i % len(ABSURD)]) for i in range(16)]
    bodies[:6] = [_with_truncated("100000000000000000000")] * 6
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda b: webhook(bot, b, timeout=20), bodies))
    assert all(code == 400 for code, _ in answers), answers
    assert all("truncatedAlerts" in text or "not JSON" in text for _, text in answers), answers
    assert time.monotonic() - started < 10
    # Nothing holds a connection slot: health, Slack's endpoint and the webhook all answer.
    assert get(bot.url + "/healthz")[0] == 200
    body = slash_body("help")
    assert post(bot.url + "/slack/events", body, sign(body))[0] == 200
    assert webhook(bot, json.dumps(payload([alert("GPUXidError", "resolved", **XID)])))[0] == 200
    metrics = get(bot.url + "/metrics")[1]
    assert 'gpubot_alert_webhooks_total{code="400"} 16.0' in metrics


def test_a_lone_surrogate_in_labels_and_annotations_is_cleaned_and_the_thread_opens(
    bot: Any, slack: FakeSlack
) -> None:
    slack.reset()
    a = alert("GPUXidError", summary="Xid 79 SURROGATE on GPU 0", Hostname="gpu-7", gpu="0", team="ml")
    raw = json.dumps(payload([a]))
    # JSON escapes as a proxy re-encoding Latin-1 badly, or a hostile sender, would write them.
    raw = (
        raw.replace('"ml"', '"ml\\ud800"')
        .replace("SURROGATE", "\\udfff")
        .replace('"GPUXidError"', '"GPUXid\\ud800Error"', 1)
    )
    assert "\\ud800" in raw and "\\udfff" in raw
    code, text = webhook(bot, raw.encode("ascii"))
    assert code == 200, (text, bot.log())
    root = wait_for("the incident's root", lambda: roots(slack), explain=bot.log)
    assert "\ufffd" in str(root[0].params.get("blocks")) or "\\ufffd" in str(root[0].params.get("blocks"))
    code, _ = webhook(bot, raw.replace('"firing"', '"resolved"').encode("ascii"))
    assert code == 200


def test_an_incident_nobody_resolves_is_closed_as_stale_by_the_running_bot(
    bot: Any, slack: FakeSlack
) -> None:
    slack.reset()
    code, _ = webhook(bot, json.dumps(payload([alert("GPURowRemapFailure", **XID)])))
    assert code == 200
    wait_for("the incident's root", lambda: roots(slack), explain=bot.log)

    def stale_update() -> list[Any]:
        return [c for c in slack.calls_to("chat.update") if "Closed as stale" in str(c.params.get("blocks"))]

    wait_for("the root to say stale", stale_update, timeout=30, explain=bot.log)
    time.sleep(2.5)  # two more sweeps: it is closed once, said once
    assert len(stale_update()) == 1
    assert 'gpubot_alert_incidents_total{event="stale"} 1.0' in get(bot.url + "/metrics")[1]


def test_stale_hours_out_of_range_stop_start_up_with_one_line(slack: FakeSlack, tmp_path: Path) -> None:
    import subprocess
    import sys

    for bad in ("0", "abc", "1000", "nan"):
        env = bot_env(
            slack.url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL, GPUBOT_ALERT_STALE_HOURS=bad
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bot.serve",
                "--http",
                "--port",
                "18099",
                "--scenario",
                str(write_scenario(tmp_path)),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[1],
        )
        assert done.returncode != 0
        lines = [x for x in done.stderr.strip().splitlines() if x]
        assert len(lines) == 1 and "GPUBOT_ALERT_STALE_HOURS" in lines[0], done.stderr
