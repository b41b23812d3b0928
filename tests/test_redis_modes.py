"""GPUBOT_REDIS_MODE on real Redis shapes: a plain client at a cluster node is refused at start, and
every setting of the modes is one line when wrong (a REAL 3-master Redis Cluster)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.cluster.streams import DEAD, REQUESTS, ClusterStreams, Entry, Request
from bot.ops.config import ConfigError, load_config
from bot.slack.redisconn import RedisTarget, connect
from tests.cluster_harness import REQUEST_KEY, SIGNER
from tests.redis_topologies import RedisClusterServer

ROOT = Path(__file__).resolve().parents[1]
BASE = {
    "SLACK_BOT_TOKEN": "xoxb-1-2-abc",
    "GPUBOT_CLUSTER_NAME": "eu-1",
    "GPUBOT_REQUEST_KEY": REQUEST_KEY,
}


@pytest.fixture
def cluster(redis_cluster: RedisClusterServer) -> RedisClusterServer:
    """The session's 3-master cluster (tests/conftest.py): one for the whole suite."""
    return redis_cluster


def _serve(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "bot.serve", "--role", "agent", "--scenario", "xid79-fell-off-bus"],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_plain_client_at_a_cluster_node_is_refused_at_start(cluster: RedisClusterServer) -> None:
    out = _serve({**BASE, "REDIS_URL": cluster.url})
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith(
        f"gpubot: REDIS_URL {cluster.url} is a Redis Cluster node: set GPUBOT_REDIS_MODE=cluster"
    )


def test_burying_on_a_cluster_spans_no_two_slots(cluster: RedisClusterServer) -> None:
    """`gpubot:requests:<c>` and `gpubot:dead:<c>` are in different slots: no MULTI over both (CROSSSLOT)."""
    client = connect(RedisTarget(cluster.url, mode="cluster"))
    streams = ClusterStreams(client, signer=SIGNER)
    streams.ensure_group("bury-1")
    streams.queue("bury-1", Request("why", {"reply": {}}))
    (entry,) = streams.read("bury-1", "c1", 1, 100)
    assert client.keyslot(REQUESTS.format("bury-1")) != client.keyslot(DEAD.format("bury-1"))
    streams.bury("bury-1", entry, "test")
    again = Entry(entry.entry_id, entry.fields, 2, entry.request)  # a redelivery after dying in between
    streams.bury("bury-1", again, "test")
    assert streams.stats("bury-1").dead == 1 and streams.stats("bury-1").pending == 0


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"GPUBOT_REDIS_MODE": "sharded"}, "GPUBOT_REDIS_MODE must be single, cluster or sentinel"),
        ({"GPUBOT_REDIS_MODE": "sentinel"}, "GPUBOT_REDIS_MODE=sentinel needs REDIS_SENTINELS"),
        (
            {
                "GPUBOT_REDIS_MODE": "sentinel",
                "REDIS_SENTINELS": "s0:26379,nope",
                "REDIS_SENTINEL_MASTER": "m",
            },
            "REDIS_SENTINELS: 'nope' is not host:port",
        ),
        ({"REDIS_SENTINELS": "s0:26379"}, "REDIS_SENTINELS is set but GPUBOT_REDIS_MODE is not sentinel"),
        ({"GPUBOT_REQUEST_KEY": "hunter2abc"}, "GPUBOT_REQUEST_KEY is too short (10 characters)"),
        ({"GPUBOT_REQUEST_KEY": ""}, "GPUBOT_REQUEST_KEY is not set: the agent signs (gateway) or checks"),
    ],
)
def test_each_bad_redis_setting_is_one_line(env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**BASE, "REDIS_URL": "redis://r:6379/0", **env}, need_slack=True, role="agent")
    assert str(err.value).startswith(line) and "\n" not in str(err.value)
    assert "hunter2" not in str(err.value)  # a key is never echoed


def test_sentinel_mode_needs_no_redis_url() -> None:
    cfg = load_config(
        {
            **BASE,
            "GPUBOT_REDIS_MODE": "sentinel",
            "REDIS_SENTINELS": "10.0.0.1:26379,[fd00::2]:26379",
            "REDIS_SENTINEL_MASTER": "gpubot",
            "REDIS_SENTINEL_PASSWORD": "s3cret",
        },
        need_slack=True,
        role="agent",
    )
    assert cfg.redis_sentinels == (("10.0.0.1", 26379), ("fd00::2", 26379))
    assert "s3cret" not in repr(cfg) and REQUEST_KEY not in repr(cfg)


def test_sentinels_that_do_not_answer_fail_fast_in_one_short_line() -> None:
    """Every discovery asks each Sentinel once (redis-py's default retries a dead one for 3 s first,
    18 s over the client's retries): a dead Sentinel costs no ack its 3 s, and the error is one line."""
    import time

    from bot.slack.redisconn import RedisTarget, connect
    from bot.slack.state import RedisState
    from handlers.ports import StateUnavailable
    from tests.services import free_port

    dead = (("127.0.0.1", free_port()), ("127.0.0.1", free_port()))
    target = RedisTarget(None, mode="sentinel", sentinels=dead, master="gpubot-master")
    started = time.monotonic()
    with pytest.raises(StateUnavailable) as err:
        RedisState(None, target=target).get("anything")
    assert time.monotonic() - started < 3.0
    assert "No master found for 'gpubot-master' (no Sentinel answered with a master)" in str(err.value)
    assert "ConnectionPool" not in str(err.value) and len(str(err.value)) < 400
    assert connect(target) is not None  # nothing is asked until a command is sent
