"""A replica SIGKILLed mid cordon or mid must-gather holds nothing for long (REAL `gpubot serve`
replicas, SIGKILL, a REAL redis-server, the fake Kubernetes API through the real client).

A button's action is a lease while it runs (renewed by the process that runs
it) and a durable record only once done. Killed, the replica stops renewing:
within the lease a click on the surviving replica runs the action, rather than
"already cordoned from this thread" or "a must-gather … is already in this
thread" for an action nobody finished (the spec: a dead holder stalls a
request under a minute, the survivor finishes it). Behind a gateway, the
other agent of the cluster finishes it without a second click: it takes the
dead agent's stream entry over, and the dead lease has lapsed by then.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.cluster_harness import cluster_scenario
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import OPERATOR, BotProcess, bot_env, posts, stop_together, told, wait_for

PLUGIN_LOG = r"/pods/nvidia-device-plugin-daemonset-x7k2p/log"
NODE_PATCH = r"^/api/v1/nodes/[^/]+$"


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKubeAPI]:
    from bot.sources.scenario import build_sources, load_scenario

    snapshot, _ = build_sources(load_scenario(cluster_scenario(tmp_path, "buttons")))
    with serve(snapshot) as api:
        yield api


def _texts(slack: FakeSlack, channel: str) -> list[str]:
    return [str(c.params.get("text")) for c in posts(slack, channel)]


@pytest.mark.parametrize("button", ["cordon_node", "must_gather"])
def test_a_replica_killed_mid_action_leaves_it_to_the_survivor(
    slack: FakeSlack, redis_server: RedisServer, kube: FakeKubeAPI, tmp_path: Path, button: str
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/11"
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    channel = f"C0KILLED{button.upper().replace('_', '')}"
    env = bot_env(slack.url, REDIS_URL=url, GPUBOT_CLAIM_IDLE_SECONDS="3")  # leases of 1.5 s
    one, two = (
        BotProcess(["--kubeconfig", kube.kubeconfig], env, tmp_path / f"replica-{n}.log", ready=False)
        for n in "12"
    )
    try:
        for p in (one, two):
            p.wait_ready(timeout=60)
        assert one.command("why ml/trainer-0", channel=channel)[0] == 200
        layer5 = wait_for(
            "layer 5",
            lambda: [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")],
        )
        thread = str(layer5[0].params["thread_ts"])
        walk_id = next(
            e["value"] for b in layer5[0].params["blocks"] if b["type"] == "actions" for e in b["elements"]
        )
        # The action hangs in its first Kubernetes call: the cordon's PATCH, the bundle's log read.
        if button == "cordon_node":
            kube.fail(NODE_PATCH, method="PATCH", delay=20.0, times=1)
        else:
            kube.fail(PLUGIN_LOG, delay=20.0, times=1)
        kw = {"user": OPERATOR, "channel": channel, "message_ts": thread, "block_id": "layer5_actions"}
        assert one.click(button, walk_id, **kw)[0] == 200
        wait_for(
            "the action running on replica 1",
            lambda: r.keys(f"gpubot:walk:{walk_id}:claim:{button.split('_')[0]}*"),
            explain=one.log,
        )
        time.sleep(0.5)  # well inside the call that hangs
        os.kill(one.proc.pid, signal.SIGKILL)
        one.proc.wait(timeout=5)
        killed_at = time.monotonic()

        def result() -> list[str]:
            return [
                t
                for t in _texts(slack, channel)
                if (button == "cordon_node" and t.startswith(f"<@{OPERATOR}> cordoned `"))
                or (button == "must_gather" and t.startswith("must-gather of `") and "attached" in t)
            ]

        # The operator clicks again on replica 2 (Slack sends a click once) until the dead lease lapses.
        while not result() and time.monotonic() - killed_at < 60:
            assert two.click(button, walk_id, **kw)[0] == 200
            deadline = time.monotonic() + 4
            while not result() and time.monotonic() < deadline:
                time.sleep(0.1)
        wait_for("the action finished by the survivor", result, timeout=30, explain=two.log)
        assert time.monotonic() - killed_at < 60
        time.sleep(1.0)  # a second run would land by now
        assert len(result()) == 1
    finally:
        stop_together([p for p in (one, two) if p.proc.poll() is None])


def test_an_agent_killed_mid_must_gather_is_finished_by_the_other_without_a_click(
    slack: FakeSlack, redis_server: RedisServer, kube: FakeKubeAPI, tmp_path: Path
) -> None:
    """Two agents of one cluster behind a gateway: the one collecting the bundle is SIGKILLed; the
    other takes its stream entry over (after the claim-idle time) and, the dead lease lapsed by
    then, attaches the bundle itself: nobody clicks again, nothing is attached twice."""
    from bot.cluster.streams import GROUP, REQUESTS
    from tests.cluster_harness import agent_env, gateway_env

    url = redis_server.url.rsplit("/", 1)[0] + "/10"
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    channel = "C0KILLEDAGENTGATHER"
    gw = BotProcess(["--role", "gateway"], gateway_env(slack.url, url), tmp_path / "gw.log", ready=False)
    agents = [
        BotProcess(
            ["--role", "agent", "--kubeconfig", kube.kubeconfig],
            agent_env(slack.url, url, "kg"),
            tmp_path / f"agent-{n}.log",
            ready=False,
        )
        for n in "ab"
    ]
    procs = [gw, *agents]
    try:
        for p in procs:
            p.wait_ready(timeout=60)
        wait_for("the cluster registered", lambda: r.hexists("gpubot:clusters", "kg"))
        assert gw.command("why ml/trainer-0", channel=channel)[0] == 200
        layer5 = wait_for(
            "layer 5",
            lambda: [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")],
            timeout=30,
        )
        thread = str(layer5[0].params["thread_ts"])
        walk_id = next(
            e["value"] for b in layer5[0].params["blocks"] if b["type"] == "actions" for e in b["elements"]
        )
        kube.fail(PLUGIN_LOG, delay=30.0, times=1)  # the bundle's read of the plugin log hangs
        kw = {"user": OPERATOR, "channel": channel, "message_ts": thread, "block_id": "layer5_actions"}
        assert gw.click("must_gather", walk_id, **kw)[0] == 200
        wait_for("the must-gather running", lambda: r.keys(f"gpubot:walk:{walk_id}:claim:must_gather:*"))
        rows = wait_for(
            "its entry pending", lambda: r.xpending_range(REQUESTS.format("kg"), GROUP, "-", "+", 5)
        )
        holder = int(str(rows[-1]["consumer"]).rsplit("-", 1)[1])
        victim = next(a for a in agents if a.proc.pid == holder)
        survivor = next(a for a in agents if a is not victim)
        os.kill(victim.proc.pid, signal.SIGKILL)
        victim.proc.wait(timeout=5)
        killed_at = time.monotonic()

        def attached() -> list[str]:
            return [t for t in _texts(slack, channel) if t.startswith("must-gather of `") and "attached" in t]

        wait_for("the bundle attached by the survivor", attached, timeout=60, explain=survivor.log)
        assert time.monotonic() - killed_at < 60
        time.sleep(1.0)  # a second bundle would land by now
        assert len(attached()) == 1
        assert not [t for t in told(slack, OPERATOR) if "already in this thread" in t]
    finally:
        stop_together([p for p in procs if p.proc.poll() is None])
