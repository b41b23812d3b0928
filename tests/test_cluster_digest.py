"""The many-cluster digest over a REAL redis-server: one root, one part per cluster, a silent cluster missing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.streams import CLUSTERS
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import posts, wait_for


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(params=["single", "cluster"])
def server(request: pytest.FixtureRequest, slack: FakeSlack) -> Iterator[Any]:
    """A redis-server of its own, then the session's Redis Cluster flushed: the clusters registered
    are what the digest is about."""
    slack.reset()
    if request.param == "cluster":
        cluster = request.getfixturevalue("redis_cluster")
        cluster.client().flushdb()
        yield cluster
        return
    with RedisServer() as one:
        yield one


def test_one_root_a_part_per_live_cluster_once_and_the_silent_one_named_missing(
    slack: FakeSlack, server: Any, tmp_path: Path
) -> None:
    channel = "C0DIGESTMULTI"
    r = server.client()
    silent = {"version": "0.2.0", "last_seen": time.time() - 7200, "agent": "gone", "kinds": ["why"]}
    r.hset(CLUSTERS, "ap-1", json.dumps(silent))
    gw = inprocess_gateway(
        slack.url, server, GPUBOT_DIGEST_CHANNEL=channel, GPUBOT_DIGEST_PART_WAIT_SECONDS="1.5"
    )
    eu = cluster_scenario(tmp_path, "eu-1")
    with (
        inprocess_agent(slack.url, server, "eu-1", scenario=eu),
        inprocess_agent(slack.url, server, "eu-1", scenario=eu),  # two agents: the part is posted once
        inprocess_agent(slack.url, server, "us-1", scenario=cluster_scenario(tmp_path, "us-1", "us-")),
    ):
        wait_for("three clusters", lambda: len(gw.streams.clusters()) == 3)
        assert gw.roots.daily().value == "posted"
        assert gw.roots.daily().value == "already done"  # a second gateway, or a late fire: no second root
        roots = [c for c in posts(slack, channel) if not c.params.get("thread_ts")]
        assert len(roots) == 1
        head = json.dumps(roots[0].params["blocks"])
        assert "3 cluster(s): one part per cluster in this thread" in head
        assert "missing: `ap-1` (agent last seen 2 h ago): its agents are silent" in head
        parts = wait_for(
            "the two live parts",
            lambda: (
                (p := [c for c in posts(slack, channel) if c.params.get("thread_ts")]) and len(p) >= 2 and p
            ),
        )
        update = wait_for(
            "the root's check",
            lambda: [u for u in slack.calls_to("chat.update") if u.params.get("channel") == channel],
            timeout=10,
        )
    gw.shutdown(wait=False)
    assert len(parts) >= 2
    every = [c for c in posts(slack, channel) if c.params.get("thread_ts")]  # after the wait: no late repeat
    titles = sorted(b["text"]["text"] for c in every for b in c.params["blocks"] if b["type"] == "header")
    assert [t.rsplit(" · ", 1)[1] for t in titles] == ["cluster eu-1", "cluster us-1"]  # once each
    assert "missing: `ap-1`: no part came in time" in json.dumps(update[-1].params["blocks"])
