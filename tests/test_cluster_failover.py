"""A Redis Cluster shard's failover in the middle of 50 requests (REAL 3 primaries with a replica each,
REAL `gpubot serve` gateway and agent processes in GPUBOT_REDIS_MODE=cluster).

`CLUSTER FAILOVER` on the replica of the shard that holds the cluster's request
stream: the replica is promoted, the old primary becomes its replica (a rolling
upgrade, a managed maintenance). Clients follow MOVED and learn the slots
again; writes are held by a replica before they count (WAIT), so nothing the
switch discards was counted. Every `/gpu why` is acknowledged within Slack's
3 s and answered exactly once (one root, one layer 5), none lost, none posted
twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
from tests.fakes.slack_api import FakeSlack
from tests.redis_topologies import RedisClusterServer
from tests.services import ServiceUnavailable
from tests.slack_harness import BotProcess, posts, stop_together, told, wait_for

pytestmark = pytest.mark.timeout(300)
REQUESTS = 50
SWITCH_AT = 20
USER = "U0CFASKER"
CLUSTER = "cf-1"
STREAM = f"gpubot:requests:{CLUSTER}"


@pytest.fixture
def shards(tmp_path: Path) -> Iterator[RedisClusterServer]:
    try:
        with RedisClusterServer(tmp_path / "redis", replicas=1) as server:
            yield server
    except ServiceUnavailable as err:
        pytest.skip(str(err))


def test_a_shard_failover_mid_burst_answers_every_request_once(
    shards: RedisClusterServer, slack: FakeSlack, tmp_path: Path
) -> None:
    slack.reset()
    scenario = cluster_scenario(tmp_path, CLUSTER)
    env = {**gateway_env(slack.url, shards.url), **shards.env}
    gw = BotProcess(["--role", "gateway"], env, tmp_path / "gw.log", ready=False)
    agent = BotProcess(
        ["--role", "agent", "--scenario", str(scenario)],
        {**agent_env(slack.url, shards.url, CLUSTER), **shards.env},
        tmp_path / "agent.log",
        ready=False,
    )
    procs = [gw, agent]
    try:
        for p in procs:
            p.wait_ready()
        r = shards.client()
        wait_for("the cluster registered", lambda: r.hexists("gpubot:clusters", CLUSTER))
        first = shards.primary_of(STREAM)
        acks: list[tuple[float, str]] = []
        for i in range(REQUESTS):
            if i == SWITCH_AT:
                shards.failover(STREAM)
            started = time.monotonic()
            status, body = gw.command("why ml/trainer-0", user=USER, channel=f"C0CF{i:02d}")
            acks.append(
                (time.monotonic() - started, str(json.loads(body)["text"]) if status == 200 else body)
            )
            time.sleep(0.08)
        wait_for("the new primary", lambda: shards.primary_of(STREAM) != first, timeout=30)
        assert max(t for t, _ in acks) < 3.0, acks
        queued = [i for i, (_, t) in enumerate(acks) if t.startswith(("walking the layers", ":hourglass:"))]
        assert len(queued) == REQUESTS, acks  # none refused: a refused write is sent again

        def walked(i: int) -> bool:
            return any(str(c.params["text"]).startswith("Layer 5 (") for c in posts(slack, f"C0CF{i:02d}"))

        wait_for(
            "every request walked",
            lambda: all(walked(i) for i in range(REQUESTS)),
            timeout=120,
            explain=lambda: agent.log()[-3000:] + gw.log()[-2000:],
        )
        time.sleep(2.0)  # a duplicate would land by now
        twice = []
        for i in range(REQUESTS):
            channel = f"C0CF{i:02d}"
            roots = [c for c in posts(slack, channel) if not c.params.get("thread_ts")]
            layers = [
                str(c.params["text"])[:9]
                for c in posts(slack, channel)
                if c.params.get("thread_ts") and str(c.params["text"]).startswith("Layer ")
            ]
            if len(roots) != 1 or len(layers) != len(set(layers)):
                twice.append((channel, len(roots), layers))
        print(
            f"cluster failover: {REQUESTS - len(twice)} of {REQUESTS} answered once; max ack {max(t for t, _ in acks):.2f} s"
        )
        assert not twice, twice
        assert not [t for t in told(slack, USER) if "could not be queued" in t]
        assert agent.proc.poll() is None and gw.proc.poll() is None
    finally:
        stop_together([p for p in procs if p.proc.poll() is None])
