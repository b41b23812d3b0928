"""While Redis is unreachable the gateway still answers Slack within its 3 s (REAL redis-server).

Killed (connections refused) or stalled (a socket that accepts and never
answers, as a Redis switching master or behind a dead load balancer does),
the ack says the request could not be queued: never "no cluster is
registered", never past Slack's 3 s.
"""

from __future__ import annotations

import json
import os
import signal
import time

import redis

from bot.cluster.streams import CLUSTERS
from tests.cluster_harness import inprocess_gateway
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import dispatch, slash_body, told, wait_for


def _timed_ack(gw: object, text: str) -> tuple[float, str]:
    started = time.monotonic()
    response = dispatch(gw, slash_body(text, "U0ASKER", "C0DOWN"))
    return time.monotonic() - started, str(json.loads(response.body)["text"])


def test_a_killed_redis_is_said_within_three_seconds(slack: FakeSlack) -> None:
    with RedisServer() as server:
        gw = inprocess_gateway(slack.url, server.url)
        value = {"version": "0.2.0", "last_seen": time.time(), "agent": "a", "kinds": ["why"]}
        redis.Redis.from_url(server.url).hset(CLUSTERS, "down-1", json.dumps(value))
        assert _timed_ack(gw, "why down-1/ml/trainer-0")[1].startswith("walking the layers")
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait(timeout=5)
        took, text = _timed_ack(gw, "why down-1/ml/trainer-0")
        gw.shutdown(wait=False)
    assert took < 3.0
    assert text.startswith(":x: the request could not be queued: the bot's Redis is unreachable")
    assert "registered" not in text


def test_a_stalled_redis_is_said_within_three_seconds(slack: FakeSlack, stalled_url: str) -> None:
    gw = inprocess_gateway(slack.url, stalled_url.replace("http://", "redis://") + "/0")
    try:
        for command in ("why down-1/ml/trainer-0", "clusters"):
            took, text = _timed_ack(gw, command)
            assert took < 3.0, (command, took)
            assert "registered" not in text
        assert _timed_ack(gw, "why down-1/ml/trainer-0")[1].startswith(
            ":x: the request could not be queued: the bot's Redis is unreachable (Redis did not answer within 1.8 s)"
        )
    finally:
        gw.shutdown(wait=False)


def test_behind_sentinel_a_request_past_the_budget_is_acked_then_told_once_if_never_queued(
    slack: FakeSlack,
) -> None:
    """GPUBOT_REDIS_MODE=sentinel, no Sentinel answering: the ack (within 3 s) says the request is not
    queued yet; once the gateway's patience is spent the asker is told, once, that it could not be."""
    from tests.services import free_port

    dead = f"127.0.0.1:{free_port()}"
    gw = inprocess_gateway(
        slack.url,
        "",
        GPUBOT_REDIS_MODE="sentinel",
        REDIS_SENTINELS=dead,
        REDIS_SENTINEL_MASTER="gpubot-master",
    )
    gw.patience_s = 4.0  # 30 s in production: past the 2.5 s ack budget either way
    try:
        took, text = _timed_ack(gw, "why down-1/ml/trainer-0")
        assert took < 3.0
        assert text.startswith(":hourglass: walking the layers for ml/trainer-0 as soon as the bot's Redis")
        said = wait_for_told(slack, "U0ASKER", "could not be queued", timeout=20)
        time.sleep(1.0)
        assert said == [t for t in told(slack, "U0ASKER") if "could not be queued" in t]
        assert len(said) == 1 and "registered" not in said[0]
    finally:
        gw.shutdown(wait=False)


def wait_for_told(slack: FakeSlack, user: str, part: str, timeout: float) -> list[str]:
    return wait_for(
        f"{user} told {part!r}", lambda: [t for t in told(slack, user) if part in t], timeout=timeout
    )
