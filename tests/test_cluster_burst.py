"""A burst of 500 commands across 5 clusters through the gateway, one cluster slow: the others are not held up.

Real gateway (signed requests through Bolt), real agents, a REAL redis-server;
four clusters read scenario files, the slow one reads a fake Kubernetes API
that takes 1 s per request. Each cluster's requests queue on its own stream
and only its own agents read it, so a slow cluster's backlog never delays the
others: every command of the four fast clusters is answered while most of the
slow cluster's are still waiting.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from bot.sources.scenario import build_sources, load_scenario
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.kube_api import serve
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import dispatch, slash_body, wait_for

FAST = ("eu-1", "eu-2", "us-1", "us-2")
SLOW = "ap-1"
PER_CLUSTER = 100


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def answered(slack: FakeSlack, cluster: str) -> int:
    return sum(
        1
        for c in slack.calls_to("chat.postEphemeral")
        if str(c.params.get("user", "")).startswith(f"U0{cluster.replace('-', '').upper()}")
        and "was not found" in str(c.params.get("text"))
    )


def test_a_slow_cluster_does_not_delay_the_others(slack: FakeSlack, tmp_path: Path) -> None:
    with RedisServer() as redis_server, ExitStack() as stack:
        snapshot, _ = build_sources(load_scenario(cluster_scenario(tmp_path, SLOW)))
        slow_api = stack.enter_context(serve(snapshot))
        slow_api.fail(r"^/api", delay=1.0)
        for name in FAST:
            stack.enter_context(
                inprocess_agent(slack.url, redis_server.url, name, scenario=cluster_scenario(tmp_path, name))
            )
        stack.enter_context(
            inprocess_agent(slack.url, redis_server.url, SLOW, kubeconfig=slow_api.kubeconfig)
        )
        gw = inprocess_gateway(slack.url, redis_server.url)
        stack.callback(gw.shutdown, False)
        wait_for("five clusters registered", lambda: len(gw.streams.clusters()) == 5)
        commands = [
            (cluster, f"U0{cluster.replace('-', '').upper()}{i:03d}")
            for i in range(PER_CLUSTER)
            for cluster in (*FAST, SLOW)
        ]
        started = time.monotonic()
        acks: list[float] = []
        lock = threading.Lock()

        def send(batch: list[tuple[str, str]]) -> None:
            for cluster, user in batch:
                t = time.monotonic()
                response = dispatch(gw, slash_body(f"why {cluster}/ml/absent-{user.lower()}", user=user))
                assert response.status == 200 and "on cluster" in response.body
                with lock:
                    acks.append(time.monotonic() - t)

        senders = [threading.Thread(target=send, args=(commands[i::10],)) for i in range(10)]
        for s in senders:
            s.start()
        for s in senders:
            s.join()
        assert len(acks) == 500
        wait_for(
            "every fast cluster's commands answered",
            lambda: all(answered(slack, c) == PER_CLUSTER for c in FAST),
            timeout=60,
        )
        fast_done = time.monotonic() - started
        slow_by_then = answered(slack, SLOW)
        stats = gw.streams.stats(SLOW)
    assert slow_by_then < PER_CLUSTER / 2, (fast_done, slow_by_then)  # the slow backlog was still there
    assert stats.waiting + stats.pending >= PER_CLUSTER / 2
    assert all(answered(slack, c) == PER_CLUSTER for c in FAST)  # each answered once, none lost
