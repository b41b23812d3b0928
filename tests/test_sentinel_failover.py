"""A Sentinel failover in the middle of 50 requests (REAL primary, replica and 3 Sentinels; REAL
`gpubot serve` gateway and agent processes in GPUBOT_REDIS_MODE=sentinel).

Two switches: `SENTINEL FAILOVER` (planned: the old master turns replica and
refuses writes with READONLY) and the primary SIGKILLed (nothing answers at
its address until the Sentinels agree it is down, after
down-after-milliseconds, and elect the replica: here 3 s, longer than the
gateway's ack budget). Either way every `/gpu why` is acknowledged within
Slack's 3 s; every one is queued (at once, or as soon as the new master
answers: the ack then says so) and walked exactly once (one root, one
layer 5); nobody is told it could not be queued; both processes follow the new
master without a restart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
from tests.fakes.slack_api import FakeSlack
from tests.redis_topologies import SentinelSet
from tests.services import ServiceUnavailable
from tests.slack_harness import BotProcess, posts, stop_together, told, wait_for

REQUESTS = 50
SWITCH_AT = 20
USER = "U0ASKER"


@pytest.fixture(params=["sentinel-failover", "primary-killed"])
def switch(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, SentinelSet]]:
    # SIGKILL: 3 s before the Sentinels call it down, so the switch outlasts the 2.5 s ack budget.
    down_after = 1000 if request.param == "sentinel-failover" else 3000
    try:
        with SentinelSet(tmp_path / "redis", down_after_ms=down_after) as s:
            yield request.param, s
    except ServiceUnavailable as err:
        pytest.skip(str(err))


def _env(base: dict[str, str], s: SentinelSet) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k != "REDIS_URL"}  # the Sentinels name the master
    env.update(s.env)
    return env


def test_a_failover_mid_burst_answers_every_request_once(
    switch: tuple[str, SentinelSet], slack: FakeSlack, tmp_path: Path
) -> None:
    how, s = switch
    slack.reset()
    scenario = cluster_scenario(tmp_path, "sen-1")
    gw = BotProcess(
        ["--role", "gateway"], _env(gateway_env(slack.url, s.url), s), tmp_path / "gw.log", ready=False
    )
    agent = BotProcess(
        ["--role", "agent", "--scenario", str(scenario)],
        _env(agent_env(slack.url, s.url, "sen-1"), s),
        tmp_path / "agent.log",
        ready=False,
    )
    procs = [gw, agent]
    try:
        for p in procs:
            p.wait_ready()
        r = s.client()
        wait_for("the cluster registered", lambda: r.hexists("gpubot:clusters", "sen-1"))
        first_master = s.master_port()
        acks: list[tuple[float, str]] = []
        for i in range(REQUESTS):
            if i == SWITCH_AT:
                s.failover() if how == "sentinel-failover" else s.kill_primary()
            started = time.monotonic()
            status, body = gw.command("why ml/trainer-0", user=USER, channel=f"C0SEN{i:02d}")
            acks.append(
                (time.monotonic() - started, str(json.loads(body)["text"]) if status == 200 else body)
            )
            time.sleep(0.08)  # a burst over about five seconds: the switch lands in its middle
        wait_for("the new master", lambda: s.master_port() != first_master, timeout=20)
        assert max(t for t, _ in acks) < 3.0, acks
        now = [i for i, (_, text) in enumerate(acks) if text.startswith("walking the layers")]
        later = [i for i, (_, text) in enumerate(acks) if text.startswith(":hourglass: walking the layers")]
        assert len(now) + len(later) == REQUESTS, acks  # none refused: a refused write is sent again
        if how == "primary-killed":
            assert later, acks  # the switch outlasted the budget: those acks said so

        def walked(i: int) -> bool:
            return any(str(c.params["text"]).startswith("Layer 5 (") for c in posts(slack, f"C0SEN{i:02d}"))

        wait_for(
            "every request walked",
            lambda: all(walked(i) for i in range(REQUESTS)),
            timeout=90,
            explain=lambda: agent.log()[-3000:] + gw.log()[-2000:],
        )
        time.sleep(1.0)  # a duplicate would land by now
        for i in range(REQUESTS):
            channel = f"C0SEN{i:02d}"
            roots = [c for c in posts(slack, channel) if not c.params.get("thread_ts")]
            fives = [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")]
            assert (len(roots), len(fives)) == (1, 1), channel
        assert not [t for t in told(slack, USER) if "could not be queued" in t]
        assert agent.proc.poll() is None and gw.proc.poll() is None  # followed it without a restart
    finally:
        stop_together([p for p in procs if p.proc.poll() is None])
