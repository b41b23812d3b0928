"""A replica SIGKILLed while recording a large notification it already answered (issue 20, item 3).

Two `gpubot serve` processes share a real redis-server, the fake Kubernetes API and the fake
Slack. Replica A answers a notification of 600 alerts at once (it is kept in Redis,
handlers/alert_inbox.py) and is killed with SIGKILL while recording it (its pod list is held up
by the API). Expectations, written before running: replica B's timer finds the entry once A's
claim has expired (at most 60 s; here, with a small GPUBOT_ALERT_STALE_HOURS, seconds) and
records it: each subject's thread opens, once; nothing is left in the inbox.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.sources.scenario import build_sources, load_scenario
from tests.alertmanager import alert, payload
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import BotProcess, bot_env, post, wait_for, write_scenario

TOKEN = "inbox-kill-token-0123456789abcdef"
CHANNEL = "C0INBOXKILL"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(write_scenario(tmp_path)))
    with serve(snapshot) as api:
        yield api


def test_a_replica_killed_while_recording_a_large_notification_leaves_it_to_the_other(
    slack: FakeSlack, kube: FakeKubeAPI, redis_server: RedisServer, tmp_path: Path
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/10"
    r = redis.Redis.from_url(url)
    r.flushdb()
    slack.reset()
    env = bot_env(
        slack.url,
        REDIS_URL=url,
        GPUBOT_ALERT_TOKEN=TOKEN,
        GPUBOT_ALERT_CHANNEL=CHANNEL,
        GPUBOT_ALERT_STALE_HOURS="0.001",  # the timer ticks every second; claims last 5 s
    )
    args = ["--kubeconfig", kube.kubeconfig]
    a = BotProcess(args, env, tmp_path / "a.log")
    b = BotProcess(args, env, tmp_path / "b.log")
    try:
        # Batch pods deleted since (team-a), on gpu-7 and gpu-1: a pod list is how A maps them.
        many = [
            alert(
                "GPUXidError",
                Hostname=("gpu-7", "gpu-1")[i % 2],
                gpu=str(i % 8),
                namespace="team-a",
                pod=f"job-{i}",
            )
            for i in range(600)
        ]
        kube.fail("/namespaces/team-a/pods", delay=6.0, method="GET")
        code, text = post(
            a.url + "/alertmanager", json.dumps(payload(many)), {"Authorization": f"Bearer {TOKEN}"}
        )
        assert code == 200 and json.loads(text)["queued"], text
        wait_for("A to be listing team-a's pods", lambda: kube.count("/namespaces/team-a/pods") >= 1)
        a.proc.kill()  # SIGKILL: no finally, no cleanup
        a.proc.wait(timeout=10)
        kube.clear_faults()
        assert r.get("gpubot:alert:inbox") is not None  # the entry A left

        def roots() -> list[Any]:
            return [
                c
                for c in slack.calls_to("chat.postMessage")
                if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
            ]

        wait_for("B to record the entry", lambda: len(roots()) >= 2, timeout=40, explain=b.log)
        wait_for(
            "the inbox empty", lambda: json.loads(r.get("gpubot:alert:inbox") or b"{}") == {}, explain=b.log
        )
        time.sleep(2)  # more ticks of B: nothing more
        texts = [str(c.params.get("text")) for c in roots()]
        assert sum("gpu-7" in t for t in texts) == 1 and sum("gpu-1" in t for t in texts) == 1, texts
    finally:
        a.stop()
        b.stop()
        r.flushdb()
