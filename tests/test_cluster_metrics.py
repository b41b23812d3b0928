"""/metrics for the streams over a REAL redis-server: per-cluster depth, pending, oldest age, claims, dead."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from bot.cluster import stream_metrics
from bot.cluster.kinds import why_request
from bot.cluster.streams import ClusterStreams
from bot.ops import metrics
from bot.ops.metrics import REGISTRY
from tests.cluster_harness import SIGNER, cluster_scenario, fresh_cluster, inprocess_agent
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import wait_for


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def samples(cluster: str) -> dict[str, float]:
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics.render().decode()):
        for s in family.samples:
            if s.labels.get("cluster") == cluster and s.name.startswith("gpubot_stream_"):
                key = s.name + "".join(f",{k}={v}" for k, v in sorted(s.labels.items()) if k != "cluster")
                found[key] = s.value
    return found


def test_stream_gauges_and_claims_per_cluster(slack: FakeSlack, redis_any: Any, tmp_path: Path) -> None:
    c, other = fresh_cluster("metrics"), fresh_cluster("other")
    client = redis_any.client()
    streams = ClusterStreams(client, shown="test", signer=SIGNER)
    collector = stream_metrics.register(streams, lambda: [c, other])
    try:
        streams.ensure_group(c)
        for i in range(3):
            streams.queue(
                c, why_request(f"walkmetrics{i:04d}", "ml", "absent", "C0METRICS", "U0METRICS", "0.2.0")
            )
        streams.read(c, "agent-that-dies", 1, 100)  # taken, never acknowledged
        time.sleep(0.3)
        before = samples(c)
        assert before["gpubot_stream_length"] == 3
        assert before["gpubot_stream_waiting"] == 2 and before["gpubot_stream_pending"] == 1
        assert 0.3 <= before["gpubot_stream_oldest_pending_age_seconds"] < 10
        assert before["gpubot_stream_dead"] == 0
        assert samples(other)["gpubot_stream_length"] == 0  # a cluster that never queued anything
        fast = {"GPUBOT_CLAIM_IDLE_SECONDS": "0.4", "GPUBOT_HEARTBEAT_SECONDS": "0.05"}
        with inprocess_agent(slack.url, redis_any, c, scenario=cluster_scenario(tmp_path, c), **fast):
            stream_metrics.prime(c)
            wait_for(
                "all acknowledged", lambda: streams.stats(c).pending == 0 and streams.stats(c).waiting == 0
            )
            after = samples(c)
    finally:
        REGISTRY.unregister(collector)
        client.close()
    assert after["gpubot_stream_claims_total"] == 1  # the dead agent's entry, taken over
    assert after["gpubot_stream_requests_total,kind=why,outcome=done"] == 3
    assert after["gpubot_stream_pending"] == 0 and after["gpubot_stream_oldest_pending_age_seconds"] == 0
