"""Operators and the cordon breaker are each cluster's own, through the gateway (REAL redis-server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions.cordon import BREAKER_LOCK, breaker_lock_name
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import action_body, dispatch, posts, slash_body, told, wait_for


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def _walk(slack: FakeSlack, channel: str) -> tuple[str, str]:
    msg = wait_for(
        "layer 5", lambda: [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")]
    )[0]
    walk_id = next(e["value"] for b in msg.params["blocks"] if b["type"] == "actions" for e in b["elements"])
    return str(msg.params["thread_ts"]), walk_id


def _cordon(gw: Any, slack: FakeSlack, cluster: str, user: str) -> None:
    channel = f"C0OPS{cluster.replace('-', '').upper()}"
    dispatch(gw, slash_body(f"why {cluster}/ml/trainer-0", channel=channel))
    root, walk_id = _walk(slack, channel)
    kw = {"channel": channel, "message_ts": root, "block_id": "layer5_actions"}
    dispatch(gw, action_body("cordon_node", walk_id, user=user, **kw))


def test_each_clusters_agent_applies_its_own_operators(slack: FakeSlack, tmp_path: Path) -> None:
    with RedisServer() as server:
        gw = inprocess_gateway(slack.url, server.url)
        with (
            inprocess_agent(slack.url, server.url, "eu-1", scenario=cluster_scenario(tmp_path, "eu-1"), GPUBOT_OPERATORS="U0EUOPS"),
            inprocess_agent(slack.url, server.url, "us-1", scenario=cluster_scenario(tmp_path, "us-1", "us-"), GPUBOT_OPERATORS="U0USOPS"),
        ):  # fmt: skip
            wait_for("both clusters", lambda: len(gw.streams.clusters()) == 2)
            _cordon(gw, slack, "us-1", "U0EUOPS")  # an eu-1 operator on a us-1 walk: refused there
            refused = wait_for("the refusal", lambda: told(slack, "U0EUOPS"))
            _cordon(gw, slack, "eu-1", "U0EUOPS")  # the same person on eu-1: an operator there
            audit = wait_for(
                "the cordon on eu-1",
                lambda: [
                    c
                    for c in posts(slack, "C0OPSEU1")
                    if str(c.params["text"]).startswith("<@U0EUOPS> cordoned")
                ],
            )
        gw.shutdown(wait=False)
    assert refused[0].startswith(":no_entry: only operators may use *cordon node*")
    assert "`gpu-7`" in audit[0].params["text"]
    assert not [
        c for c in posts(slack, "C0OPSUS1") if str(c.params["text"]).startswith("<@U0EUOPS> cordoned")
    ]


def test_the_breaker_lock_is_per_cluster() -> None:
    assert breaker_lock_name(None) == BREAKER_LOCK == "cordon-breaker"
    assert breaker_lock_name("eu-1") == "cordon-breaker:eu-1" != breaker_lock_name("us-1")
