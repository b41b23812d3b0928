"""Two `gpubot serve` processes on one real Redis: the same webhook delivered to both opens one thread,
either replica carries the incident on, and a restart loses none of it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.alertmanager import alert, body
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import BotProcess, bot_env, post, wait_for, write_scenario

TOKEN = "replica-alert-token-0123456789ab"
CHANNEL = "C0REPLICAALERTS"
XID = {"Hostname": "gpu-7", "gpu": "3", "UUID": "GPU-0f3c2a91"}
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def roots(slack: FakeSlack) -> list[str]:
    return [
        json.dumps(c.params.get("blocks"))
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def lines(slack: FakeSlack) -> list[str]:
    return [
        str(c.params.get("text"))
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and c.params.get("thread_ts")
    ]


def test_two_replicas_receiving_the_same_webhook_open_one_thread_and_survive_a_restart(
    slack: FakeSlack, redis_server: RedisServer, tmp_path: Path
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/8"
    redis.Redis.from_url(url).flushdb()
    env = bot_env(slack.url, REDIS_URL=url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL)
    args = ["--scenario", str(write_scenario(tmp_path))]
    a = BotProcess(args, env, tmp_path / "a.log")
    b = BotProcess(args, env, tmp_path / "b.log")
    try:
        # Both get the same notification at the same moment, several times over (an HA pair resending).
        data = body(
            [alert("GPUXidError", **XID), alert("GPUPodPending", namespace="ml", pod="trainer-0")]
        ).decode()
        answers: list[int] = []

        def deliver(bot: BotProcess) -> None:
            answers.append(post(bot.url + "/alertmanager", data, HEADERS)[0])

        threads = [threading.Thread(target=deliver, args=(bot,)) for bot in (a, b, a, b, a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert answers == [200] * 6
        wait_for("two incident roots", lambda: len(roots(slack)) >= 2, explain=lambda: a.log() + b.log())
        wait_for(
            "both walks' verdicts",
            lambda: (
                sum(
                    "Verdict" in json.dumps(c.params.get("blocks"))
                    for c in slack.calls_to("chat.update")
                    if c.params.get("channel") == CHANNEL
                )
                >= 4
            ),
        )
        got = roots(slack)
        assert len(got) == 2  # one per subject (node gpu-7, pod ml/trainer-0), not one per delivery
        assert sum("gpu-7" in r and "GPUXidError" in r for r in got) == 1
        assert sum("ml/trainer-0" in r for r in got) == 1
        assert not any("still firing" in t for t in lines(slack))  # duplicates within the window add nothing

        # Restart A; the resolved notification goes to it, the incident it never saw in memory closes.
        assert a.stop() == 0
        a = BotProcess(args, env, tmp_path / "a2.log")
        resolved = body([alert("GPUXidError", "resolved", **XID)]).decode()
        assert post(a.url + "/alertmanager", resolved, HEADERS)[0] == 200
        wait_for(
            "gpu-7's root resolved in place",
            lambda: any(
                "Resolved at" in json.dumps(c.params.get("blocks"))
                and "gpu-7" in json.dumps(c.params.get("blocks"))
                for c in slack.calls_to("chat.update")
            ),
            explain=a.log,
        )
        assert len(roots(slack)) == 2
        # And B, which opened neither thread in particular, adds to the pod's.
        repeat_later = body(
            [
                alert("GPUPodPending", namespace="ml", pod="trainer-0"),
                alert("GPUXidError", severity="critical", namespace="ml", pod="trainer-0"),
            ]
        ).decode()
        assert post(b.url + "/alertmanager", repeat_later, HEADERS)[0] == 200
        wait_for(
            "the pod's second alert line", lambda: any("firing too" in t for t in lines(slack)), explain=b.log
        )
        assert len(roots(slack)) == 2
    finally:
        a.stop()
        b.stop()
