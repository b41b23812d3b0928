"""In agent mode a failed Slack post is never acknowledged away (REAL redis-server, the real agent).

The alerts of a webhook reach an agent as a stream entry. When Slack refuses
the incident's root (every one of the Poster's own attempts), the entry is
left pending: another delivery (XAUTOCLAIM after the claim-idle time) posts
it. After 5 deliveries it is buried in `gpubot:dead:<cluster>` and said once
in the channel, never lost silently.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.kinds import alerts_request
from bot.cluster.streams import DEAD, ClusterStreams
from handlers.alerts import AlertSettings
from tests.alertmanager import alert, payload
from tests.cluster_harness import SIGNER, cluster_scenario, fresh_cluster, inprocess_agent
from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import posts, wait_for

QUICK = {"GPUBOT_CLAIM_IDLE_SECONDS": "0.6", "GPUBOT_HEARTBEAT_SECONDS": "0.1"}
ATTEMPTS = 4  # the Poster's own attempts per post (bot/slack/post.py)


@pytest.fixture
def streams(redis_any: Any, slack: FakeSlack) -> Iterator[ClusterStreams]:
    slack.reset()  # run on both Redis shapes: each run's channels as new
    client = redis_any.client()
    yield ClusterStreams(client, shown="test", signer=SIGNER)
    client.close()


def _queue(streams: ClusterStreams, cluster: str, channel: str) -> None:
    body = payload([alert("GPUXidError", Hostname="gpu-7", cluster=cluster, gpu="0")])
    streams.queue(cluster, alerts_request(body, AlertSettings(channel=channel), "0.2.0"))


def _roots(slack: FakeSlack, channel: str) -> list[str]:
    """Incident roots Slack took (the calls it refused are not messages)."""
    with slack._lock:
        kept = list(slack.messages.get(channel, []))
    return [
        json.dumps(m.get("blocks"))
        for m in kept
        if "thread_ts" not in m and "on node `gpu-7`" in json.dumps(m.get("blocks"))
    ]


def test_a_root_slack_refused_stays_pending_and_is_posted_by_the_next_delivery(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("refused"), "C0REFUSEDONCE"
    slack.fail("chat.postMessage", 500, times=ATTEMPTS)  # the whole first delivery's root post
    _queue(streams, c, channel)
    with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c), **QUICK):
        wait_for("the root, on a later delivery", lambda: _roots(slack, channel), timeout=20)
        wait_for(
            "the walk", lambda: [x for x in posts(slack, channel) if "Layer 5 (" in str(x.params["text"])]
        )
        wait_for("acknowledged", lambda: streams.stats(c).pending == 0, timeout=10)
    assert len(_roots(slack, channel)) == 1
    assert streams.stats(c).dead == 0


def test_after_five_refused_deliveries_it_is_kept_dead_and_said_once(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("refused5"), "C0REFUSEDFIVE"
    slack.fail("chat.postMessage", 500, times=5 * ATTEMPTS)  # every try of all five deliveries
    _queue(streams, c, channel)
    with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c), **QUICK):
        said = wait_for(
            "the give-up",
            lambda: [
                str(x.params["text"]) for x in posts(slack, channel) if "gave up" in str(x.params["text"])
            ],
            timeout=40,
        )
        wait_for("acknowledged", lambda: streams.stats(c).pending == 0, timeout=10)
    assert len(said) == 1 and f"`gpubot:dead:{c}`" in said[0] and "after 5 failed attempts" in said[0]
    ((_, dead),) = redis_any.client().xrange(DEAD.format(c))
    assert dead["kind"] == "alerts" and dead["deliveries"] == "5"
    assert _roots(slack, channel) == []
