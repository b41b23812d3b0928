"""Heartbeats are in Redis's clock, not the agent's (REAL redis-server, the real gateway).

An agent whose clock runs 10 minutes fast, then dies, must not read "last
seen 0 s ago" for ten minutes; one 2 minutes slow must not read "2 min ago"
while it is alive; a heartbeat of NaN or 1e18 (written by anyone with Redis
access) never reads "0 s ago".
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.cluster.gateway import Gateway
from bot.cluster.streams import CLUSTERS, ClusterStreams
from tests.cluster_harness import SIGNER, inprocess_gateway
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import dispatch, slash_body


@pytest.fixture(params=["single", "cluster"])
def gateway(slack: FakeSlack, request: pytest.FixtureRequest) -> Iterator[tuple[Gateway, Any]]:
    """Over a redis-server of its own, and over the session's Redis Cluster (flushed first): there
    the clock read (TIME) must be the node's that holds the heartbeats."""
    with contextlib.ExitStack() as stack:
        if request.param == "cluster":
            server: Any = request.getfixturevalue("redis_cluster")
            server.client().flushdb()
        else:
            server = stack.enter_context(RedisServer())
        gw = inprocess_gateway(slack.url, server)
        yield gw, server
        gw.shutdown(wait=False)


def _agent_streams(server: Any, skew_s: float) -> ClusterStreams:
    """An agent's streams whose machine clock is `skew_s` off."""
    return ClusterStreams(server.client(), clock=lambda: time.time() + skew_s, signer=SIGNER)


def _listing(gw: Gateway) -> str:
    body = json.loads(dispatch(gw, slash_body("clusters", "U0ASKER", "C0BEAT")).body)
    return str(body["text"])


def test_a_fast_agent_that_died_and_a_slow_one_alive_read_true_ages(
    gateway: tuple[Gateway, Any],
) -> None:
    gw, url = gateway
    _agent_streams(url, +600).heartbeat("fast-1", "fast-agent", "0.2.0", ("why",))
    _agent_streams(url, -120).heartbeat("slow-1", "slow-agent", "0.2.0", ("why",))
    listing = _listing(gw)
    assert "• `fast-1` · gpubot 0.2.0 · last seen 0 s ago" in listing
    assert "• `slow-1` · gpubot 0.2.0 · last seen 0 s ago" in listing  # alive: not "2 min ago"
    time.sleep(2.2)  # fast-1 is dead now; slow-1 beats again
    _agent_streams(url, -120).heartbeat("slow-1", "slow-agent", "0.2.0", ("why",))
    seen = gw.streams.clusters()
    now = gw.streams.now()
    assert 2.0 <= seen["fast-1"].silent_for(now) < 10  # not "0 s" for the ten minutes it ran ahead
    assert seen["slow-1"].silent_for(now) < 1.5


@pytest.mark.parametrize("bad", ["NaN", "1e18", "Infinity"])
def test_a_heartbeat_that_cannot_be_one_never_reads_just_now(gateway: tuple[Gateway, Any], bad: str) -> None:
    gw, url = gateway
    raw = '{"version": "0.2.0", "last_seen": ' + bad + ', "agent": "x", "kinds": ["why"]}'
    url.client().hset(CLUSTERS, "odd-1", raw)
    listing = _listing(gw)
    assert "• `odd-1` · gpubot 0.2.0 · :warning: silent for an unknown time" in listing
    assert "0 s ago" not in listing
    body = json.loads(dispatch(gw, slash_body("why odd-1/ml/trainer-0", "U0ASKER", "C0BEAT")).body)
    assert "cluster `odd-1`'s agent was last seen an unknown time ago" in body["text"]
