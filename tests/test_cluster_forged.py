"""Requests the gateway queues are authenticated end to end (REAL redis-server, the real agent).

Whoever can write to Redis must not act as an operator: a cordon click
written with XADD as an operator, unsigned or signed with another key, a copy
of a genuine entry, and an entry older than the replay window each cordon
nothing and post nothing; they are counted and kept in the dead stream. The
same click signed with the gateway's key cordons (the check, not something
else, is what stopped the others).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.kinds import click_request, why_request
from bot.cluster.signing import REPLAY_WINDOW_S, RequestSigner
from bot.cluster.streams import DEAD, REQUESTS, ClusterStreams, Request
from bot.ops.metrics import REGISTRY
from handlers.clicks import Click
from tests.cluster_harness import SIGNER, cluster_scenario, fresh_cluster, inprocess_agent
from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import posts, wait_for

OPS = "U0OPS0001"


@pytest.fixture
def streams(redis_any: Any, slack: FakeSlack) -> Iterator[ClusterStreams]:
    slack.reset()  # run on both Redis shapes: each run's channels as new
    client = redis_any.client()
    yield ClusterStreams(client, shown="test", signer=SIGNER)
    client.close()


def _forged_count(cluster: str) -> float:
    got = REGISTRY.get_sample_value(
        "gpubot_stream_requests_total", {"cluster": cluster, "kind": "unreadable", "outcome": "forged"}
    )
    return got or 0.0


def _cordoned(slack: FakeSlack, channel: str) -> list[str]:
    return [str(c.params["text"]) for c in posts(slack, channel) if "cordoned" in str(c.params["text"])]


def test_forged_replayed_and_stale_requests_do_nothing_and_a_signed_one_runs(
    slack: FakeSlack, redis_any: Any, streams: ClusterStreams, tmp_path: Path
) -> None:
    c, channel = fresh_cluster("forge"), "C0FORGED"
    raw = redis_any.client()
    key = REQUESTS.format(c)
    streams.queue(c, why_request("walkforged0001", "ml", "trainer-0", channel, "U0ASKER", "0.2.0"))
    with inprocess_agent(
        slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c), GPUBOT_OPERATORS=OPS
    ):
        layer5 = wait_for(
            "the walk",
            lambda: [x for x in posts(slack, channel) if str(x.params["text"]).startswith("Layer 5 (")],
        )
        thread = str(layer5[0].params["thread_ts"])
        posted_before = len(posts(slack, channel))
        click = Click("cordon_node", "walkforged0001", OPS, channel, "layer5_actions", thread, thread)
        fields = click_request(click, thread, "0.2.0").fields()
        raw.xadd(key, fields)  # 1: not signed at all
        raw.xadd(key, RequestSigner("another-key-" + "x" * 32).sign(key, fields))  # 2: another key
        raw.xadd(key, SIGNER.sign(REQUESTS.format("other-cluster"), fields))  # 3: signed for another stream
        (genuine_id, genuine), *_ = raw.xrange(key, count=1)
        raw.xadd(key, genuine)  # 4: a copy of the genuine why request (same nonce)
        stale = Request("click", json.loads(fields["body"]), queued_at=time.time() - REPLAY_WINDOW_S - 60)
        raw.xadd(key, SIGNER.sign(key, stale.fields()))  # 5: signed, but past the replay window
        wait_for("all five dropped", lambda: raw.xlen(DEAD.format(c)) == 5, timeout=20)
        time.sleep(0.5)  # anything they would have posted would be in by now
        assert _cordoned(slack, channel) == []
        assert len(posts(slack, channel)) == posted_before  # no "asked by", no refusal, nothing
        reasons = sorted(f["reason"] for _, f in raw.xrange(DEAD.format(c)))
        assert [r.split(":", 1)[0] for r in reasons] == ["forged"] * 5
        joined = " | ".join(reasons)
        assert "not signed" in joined and "signature does not hold" in joined
        assert f"a replay of entry {genuine_id}" in joined and "past the replay window" in joined
        assert _forged_count(c) == 5
        # The same click, signed by the gateway's key: it cordons.
        streams.queue(c, click_request(click, thread, "0.2.0"))
        done = wait_for("the signed cordon", lambda: _cordoned(slack, channel), timeout=20)
    assert done[0].startswith(f"<@{OPS}> cordoned")
    assert streams.stats(c).pending == 0
