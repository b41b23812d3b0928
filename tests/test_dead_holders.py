"""Nothing waits on a dead holder (REAL `gpubot serve` processes, SIGKILL, a REAL redis-server).

SIGKILL runs no `finally`: the locks and claims a killed process held stay in
Redis until they lapse. Each must lapse within its lease (renewed while its
work runs) and the survivor must finish the work rather than drop it:

- an agent killed while posting an alert's incident root (Slack took the
  post, the agent never heard): the other agent of the cluster takes the
  entry over, finds the root, runs the walk and shows its verdict: one root,
  no "another replica is still posting it", nothing left "walking…";
- a single-process replica killed mid-walk, holding layer 5's claim: a click
  on the surviving replica runs layer 5 instead of answering "layer 5 has
  already been run for this walk" while it was never posted; Walk all does
  not skip it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.cluster.streams import GROUP, REQUESTS
from tests.alertmanager import alert, payload
from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import BotProcess, bot_env, posts, stop_together, told, wait_for

TOKEN = "am-token-dead-holders-0123456789"
CHANNEL = "C0DEADHOLDER"
PLUGIN_LOG = r"/pods/nvidia-device-plugin-daemonset-x7k2p/log"


def _deliver(url: str, alerts: list[dict[str, Any]]) -> int:
    import urllib.request

    req = urllib.request.Request(
        url + "/alertmanager",
        data=json.dumps(payload(alerts)).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(resp.status)


def _ready(procs: list[BotProcess]) -> list[BotProcess]:
    """Started together; a machine shared with other suites may take a while to start three."""
    for p in procs:
        p.wait_ready(timeout=60)
    return procs


def _kill(proc: BotProcess) -> None:
    os.kill(proc.proc.pid, signal.SIGKILL)
    proc.proc.wait(timeout=5)


def _roots(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in posts(slack, channel) if not c.params.get("thread_ts")]


def test_an_agent_killed_posting_an_alert_root_is_finished_by_the_other(
    slack: FakeSlack, redis_server: RedisServer, tmp_path: Path
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/13"
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    scenario = cluster_scenario(tmp_path, "dh")
    alerts_env = {"GPUBOT_ALERT_TOKEN": TOKEN, "GPUBOT_ALERT_CHANNEL": CHANNEL}
    gw_env = gateway_env(slack.url, url, **alerts_env)
    procs: list[BotProcess] = []
    try:
        procs = _ready(
            [
                BotProcess(["--role", "gateway"], gw_env, tmp_path / "gw.log", ready=False),
                *(
                    BotProcess(
                        ["--role", "agent", "--scenario", str(scenario)],
                        agent_env(slack.url, url, "dh"),
                        tmp_path / f"agent-{n}.log",
                        ready=False,
                    )
                    for n in "ab"
                ),
            ]
        )
        gw, a, b = procs
        wait_for("the cluster registered", lambda: r.hexists("gpubot:clusters", "dh"))
        slack.lose_answers("chat.postMessage", seconds=25)  # the root: Slack takes it, the agent waits
        assert _deliver(gw.url, [alert("GPUXidError", Hostname="gpu-7", cluster="dh", gpu="0")]) == 200
        wait_for("the root taken by Slack", lambda: _roots(slack, CHANNEL))
        rows = wait_for(
            "the entry pending", lambda: r.xpending_range(REQUESTS.format("dh"), GROUP, "-", "+", 5)
        )
        holder_pid = int(str(rows[0]["consumer"]).rsplit("-", 1)[1])
        victim, survivor = (a, b) if a.proc.pid == holder_pid else (b, a)
        assert victim.proc.pid == holder_pid
        _kill(victim)
        killed_at = time.monotonic()
        wait_for(
            "the walk's verdict on the root",
            lambda: (
                any(
                    "cluster `dh`" in json.dumps(u.params.get("blocks"))
                    and "walking the layers" not in json.dumps(u.params.get("blocks"))
                    for u in slack.calls_to("chat.update")
                )
                and r.xpending(REQUESTS.format("dh"), GROUP)["pending"] == 0
            ),
            timeout=40,
            explain=survivor.log,
        )
        assert time.monotonic() - killed_at < 60  # the spec: a dead holder stalls it under a minute
        assert len(_roots(slack, CHANNEL)) == 1  # found in Slack by its metadata, not posted again
        layer5 = [c for c in posts(slack, CHANNEL) if str(c.params["text"]).startswith("Layer 5 (")]
        assert len(layer5) == 1
        assert "still posting it" not in survivor.log_path.read_text()
        assert r.xlen("gpubot:dead:dh") == 0
    finally:
        stop_together([p for p in procs if p.proc.poll() is None])


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[FakeKubeAPI]:
    from bot.sources.scenario import build_sources, load_scenario

    snapshot, _ = build_sources(load_scenario(cluster_scenario(tmp_path, "replicas")))
    with serve(snapshot) as api:
        yield api


@pytest.mark.parametrize("button", ["layer_jump", "walk_all"])
def test_a_replica_killed_mid_layer_leaves_no_layer_taken_by_nobody(
    slack: FakeSlack, redis_server: RedisServer, kube: FakeKubeAPI, tmp_path: Path, button: str
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/14"
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    channel = f"C0DEADREP{button.upper().replace('_', '')}"
    env = bot_env(slack.url, REDIS_URL=url, GPUBOT_CLAIM_IDLE_SECONDS="3")  # leases of 1.5 s
    args = ["--kubeconfig", kube.kubeconfig]
    one, two = _ready([BotProcess(args, env, tmp_path / f"replica-{n}.log", ready=False) for n in "12"])
    try:
        kube.fail(PLUGIN_LOG, delay=10.0, times=1)  # layer 5 of the first walk hangs in its read
        status, _ = one.command("why ml/trainer-0", channel=channel)
        assert status == 200
        layer1 = wait_for(
            "layer 1",
            lambda: [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 1 (")],
        )
        walk_id = next(
            e["value"] for b in layer1[0].params["blocks"] if b["type"] == "actions" for e in b["elements"]
        )
        wait_for("layer 5 claimed", lambda: r.exists(f"gpubot:walk:{walk_id}:claim:layer:5"))
        _kill(one)  # holding layer 5's claim, its result neither stored nor posted
        root_ts = str(layer1[0].params["thread_ts"])
        kw = {"user": "U0SURVIVOR", "channel": channel, "message_ts": root_ts, "block_id": "layer1_actions"}
        status, _ = two.click(button, walk_id, **kw)
        assert status == 200
        layer5 = wait_for(
            "layer 5 run by the survivor",
            lambda: [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")],
            timeout=60,
            explain=two.log,
        )
        assert len(layer5) == 1
        assert not [t for t in told(slack, "U0SURVIVOR") if "layer 5 has already been run" in t]
    finally:
        stop_together([p for p in (one, two) if p.proc.poll() is None])
