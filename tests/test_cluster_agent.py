"""An agent over a REAL redis-server and a REAL 3-master Redis Cluster: at-least-once from the stream, once in Slack, poison and unknown kinds."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.kinds import why_request
from bot.cluster.streams import DEAD, REQUESTS, ClusterStreams, Request
from bot.slack.leases import LeaseKeeper, LeasingStore
from bot.slack.state import RedisState
from tests.cluster_harness import SIGNER, cluster_scenario, fresh_cluster, inprocess_agent, state_of
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import posts, told, wait_for


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def streams(redis_any: Any, slack: FakeSlack) -> Iterator[ClusterStreams]:
    """On one server and on a Redis Cluster (each test's channels and users as new: Slack reset)."""
    slack.reset()
    client = redis_any.client()
    yield ClusterStreams(client, shown="test", signer=SIGNER)
    client.close()


def root_posts(slack: FakeSlack, channel: str) -> list[object]:
    return [c for c in posts(slack, channel) if not c.params.get("thread_ts")]


def layer_posts(slack: FakeSlack, channel: str, layer: int) -> list[object]:
    return [
        c
        for c in posts(slack, channel)
        if c.params.get("thread_ts") and c.params["text"].startswith(f"Layer {layer} (")
    ]


def test_a_queued_walk_is_posted_once_then_acknowledged(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("eu"), "C0AGENTWALK"
    req = why_request("walkagent00001", "ml", "trainer-0", channel, "U0ASKER", "0.2.0")
    streams.queue(c, req)  # queued before any agent of the cluster ever ran
    with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c)):
        wait_for("layer 5", lambda: layer_posts(slack, channel, 5))
        wait_for(
            "the entry acknowledged", lambda: streams.stats(c).pending == 0 and streams.stats(c).waiting == 0
        )
        # The same request again (a takeover of an entry whose agent died before XACK): not run twice.
        streams.queue(c, req)
        wait_for(
            "the repeat acknowledged", lambda: streams.stats(c).pending == 0 and streams.stats(c).waiting == 0
        )
    assert len(root_posts(slack, channel)) == 1
    assert len(layer_posts(slack, channel, 1)) == 1 and len(layer_posts(slack, channel, 5)) == 1
    root = root_posts(slack, channel)[0]
    assert f"cluster `{c}`" in json.dumps(root.params.get("blocks"))  # type: ignore[attr-defined]
    stored = state_of(redis_any).get("walk:walkagent00001")
    assert stored is not None and stored["cluster"] == c


def test_an_unknown_kind_is_said_with_the_agents_version_and_the_next_request_runs(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("old"), "C0OLDAGENT"
    newer = Request("explain", {"reply": {"channel": channel, "user": "U0NEWER"}}, sender_version="0.3.0")
    streams.queue(c, newer)
    streams.queue(c, why_request("walkagent00002", "ml", "trainer-0", channel, "U0NEWER", "0.3.0"))
    with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c)) as agent:
        said = wait_for("the refusal", lambda: [t for t in told(slack, "U0NEWER") if "explain" in t])
        wait_for("the walk after it", lambda: layer_posts(slack, channel, 1))
        version = agent.agent.version
    assert said == [
        f":warning: cluster `{c}`'s agent (gpubot {version}) does not know requests of kind `explain` "
        "(queued by gpubot 0.3.0): nothing was done. Upgrade the agent to the gateway's version."
    ]
    assert streams.stats(c).pending == 0 and streams.stats(c).dead == 0  # acknowledged, not retried


def test_a_poison_entry_fails_five_times_then_goes_to_the_dead_stream_and_is_said(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("poison"), "C0POISON"
    # Corrupt stored state for this walk: every delivery fails reading it.
    redis_any.client(decode=False).set("gpubot:walk:walkpoison0001", json.dumps(["not", "a", "walk"]))
    streams.queue(c, why_request("walkpoison0001", "ml", "trainer-0", channel, "U0POISON", "0.2.0"))
    fast = {"GPUBOT_CLAIM_IDLE_SECONDS": "0.4", "GPUBOT_HEARTBEAT_SECONDS": "0.05"}
    with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c), **fast):
        said = wait_for(
            "the give-up", lambda: [t for t in told(slack, "U0POISON") if "gave up" in t], timeout=20
        )
    assert said[0].startswith(f":x: cluster `{c}` gave up on this request (`why`, id `")
    assert "after 5 failed attempts: TypeError" in said[0] and f"`gpubot:dead:{c}`" in said[0]
    s = streams.stats(c)
    assert (s.pending, s.dead) == (0, 1)
    ((_, dead),) = redis_any.client().xrange(DEAD.format(c))
    assert dead["deliveries"] == "5" and dead["kind"] == "why"
    assert root_posts(slack, channel) == []


def test_a_malformed_request_is_buried_at_once(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("bad"), "C0BADREQ"
    streams.queue(
        c,
        Request(
            "why",
            {"walk_id": "w", "namespace": "ML", "pod": "x", "reply": {"channel": channel, "user": "U0BAD"}},
        ),
    )
    raw = redis_any.client(decode=False)
    raw.xadd(REQUESTS.format(c), {"junk": "1"})
    with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c)):
        said = wait_for("the refusal", lambda: told(slack, "U0BAD"))
        wait_for("both buried", lambda: streams.stats(c).dead == 2)
    assert "after 1 attempt: the request is malformed: invalid namespace 'ML'" in said[0]
    assert streams.stats(c).pending == 0


def test_leases_are_renewed_while_their_work_runs_and_expire_after(redis_server: RedisServer) -> None:
    store = RedisState(redis_server.url, prefix=f"{fresh_cluster('lease')}:")
    keeper = LeaseKeeper(store, lease_s=0.6)  # renewed every 0.1 s: slack for a loaded machine
    leased = LeasingStore(store, keeper)
    with keeper.work():
        assert leased.set_if_absent("walk:w:claim:layer:5", {"by": "a"}, 0.6)
        assert leased.set_if_absent("walk:w:claim:must_gather:n", {"by": "a"}, 3600)  # not a lease
        assert keeper.held() == 1
        for _ in range(10):
            time.sleep(0.1)
            keeper.renew()
        assert store.get("walk:w:claim:layer:5") == {"by": "a"}  # alive past its 0.6 s
    assert keeper.held() == 0
    time.sleep(0.8)
    assert store.get("walk:w:claim:layer:5") is None  # work over: it expired on its own
    assert store.get("walk:w:claim:must_gather:n") == {"by": "a"}
