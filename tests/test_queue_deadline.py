"""A request a stalled Redis takes after the ack said "could not be queued" is never run (REAL redis-server).

The gateway stamps each request with the Redis time by which it must be queued
(`queue_by`: when it stops waiting, less a margin). A primary SIGSTOPped with
the gateway's XADD in its socket takes it at SIGCONT, long after the asker was
told it could not be queued: the agent sees the entry's id (Redis's clock when
it took it) past `queue_by`, moves it to the dead stream and runs nothing. One
taken in time runs as usual.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.acks import QUEUE_MARGIN_S, Budget
from bot.cluster.kinds import why_request
from bot.cluster.streams import DEAD, ClusterStreams
from tests.cluster_harness import SIGNER, cluster_scenario, fresh_cluster, inprocess_agent
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import posts, told, wait_for


def _fives(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")]


def test_an_xadd_taken_after_its_deadline_is_buried_unrun_and_one_in_time_runs(
    slack: FakeSlack, tmp_path: Path
) -> None:
    slack.reset()
    with RedisServer() as server:
        c = fresh_cluster("late")
        streams = ClusterStreams(server.client(), shown="test", signer=SIGNER)
        now = streams.now()
        budget = Budget(1.0)
        by = budget.queue_by(now, time.monotonic())
        assert now < by < now + 1.0 - QUEUE_MARGIN_S + 0.05
        in_time = why_request("walkintime0001", "ml", "trainer-0", "C0INTIME", "U0INTIME", "0.3.0")
        late = why_request("walklate000001", "ml", "trainer-0", "C0LATE", "U0LATE", "0.3.0")
        streams.queue(c, replace(in_time, body={**in_time.body, "queue_by": round(by, 3)}))
        # The XADD sent while the server is stopped: taken at SIGCONT, past its deadline.
        assert server.proc is not None
        os.kill(server.proc.pid, signal.SIGSTOP)
        try:
            stamped = replace(late, body={**late.body, "queue_by": round(by, 3)})
            sent = threading.Thread(target=lambda: streams.queue(c, stamped), daemon=True)
            sent.start()
            time.sleep(1.5)  # past `by`
        finally:
            os.kill(server.proc.pid, signal.SIGCONT)
        sent.join(timeout=10)
        with inprocess_agent(slack.url, server.url, c, scenario=cluster_scenario(tmp_path, c)):
            wait_for("the walk in time", lambda: len(_fives(slack, "C0INTIME")) == 1, timeout=60)
            dead = server.client()
            wait_for("the late one buried", lambda: dead.xlen(DEAD.format(c)) == 1, timeout=30)
            time.sleep(1.0)
        reason = dead.xrange(DEAD.format(c))[0][1]["reason"]
    assert "queued after its deadline" in reason
    assert posts(slack, "C0LATE") == [] and told(slack, "U0LATE") == []  # never run, not said twice


def test_a_call_to_a_stalled_server_is_bounded_in_total_not_per_retry(stalled_url: str) -> None:
    """Before: 5 s socket timeout, then up to 6 retries of it (30 s and more) for a gateway's or agent's
    client. Now one socket timeout: a try that timed out is not made again past the retry budget."""
    import redis

    from bot.slack.redisconn import REQUEST_TIMEOUT_S, RETRY_BUDGET_S, RedisTarget, connect

    client = connect(RedisTarget(stalled_url.replace("http://", "redis://") + "/0"), ride_out_restarts=True)
    started = time.monotonic()
    with pytest.raises(redis.RedisError):
        client.get("anything")
    took = time.monotonic() - started
    assert REQUEST_TIMEOUT_S * 0.9 <= took < RETRY_BUDGET_S + 0.5, took
