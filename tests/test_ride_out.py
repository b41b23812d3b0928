"""How long a state store rides out a Redis Cluster switching: the gateway's within Slack's 3 s,
an agent's longer (a restarted cluster agrees on its slots again in seconds on a loaded host:
test_cluster_e2e's restart once took longer than the gateway's 2.5 s, and a layer's record was lost)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from redis.exceptions import ClusterDownError

from bot.cluster.roles import AGENT_RIDE_OUT_S
from bot.slack.redisconn import RIDE_OUT_S, RedisTarget
from bot.slack.state import RedisState
from handlers.ports import StateUnavailable


def down_for(seconds: float, then: Any) -> Any:
    """A call that meets "The cluster is down" for `seconds`, then answers as `then` does."""
    until = time.monotonic() + seconds

    def call() -> Any:
        if time.monotonic() < until:
            raise ClusterDownError("The cluster is down")
        return then()

    return call


def store(redis_cluster: Any, ride_out_s: float) -> RedisState:
    return RedisState(None, target=RedisTarget(redis_cluster.url, mode="cluster"), ride_out_s=ride_out_s)


def test_an_agents_store_rides_out_a_switch_longer_than_the_gateways(redis_cluster: Any) -> None:
    agent = store(redis_cluster, AGENT_RIDE_OUT_S)
    agent.set("ride-out:k", {"v": 1}, 60)
    assert agent._do("read", down_for(RIDE_OUT_S + 1.0, lambda: agent.get("ride-out:k"))) == {"v": 1}


def test_the_gateways_store_gives_up_within_slacks_three_seconds(redis_cluster: Any) -> None:
    gateway = store(redis_cluster, RIDE_OUT_S)
    started = time.monotonic()
    with pytest.raises(StateUnavailable, match="cluster is down"):
        gateway._do("read", down_for(RIDE_OUT_S + 5.0, lambda: None))
    assert time.monotonic() - started < 3.0
