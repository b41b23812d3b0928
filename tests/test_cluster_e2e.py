"""Many clusters end to end: a gateway and agents as separate `gpubot serve` processes.

Each agent reads its own fake Kubernetes API server (the real kubernetes client
over a kubeconfig), all post to one fake Slack Web API, and a REAL redis-server
(append-only file on) carries the streams. The gateway is given a kubeconfig
of a third fake API server, which must see no request at all. Intervals are
tight through settings (heartbeat 0.2 s, takeover after 3 s idle), never
sleeps of a minute. The faults: an agent SIGKILLed mid-walk, while Slack holds
the answer to a post it took (another agent of its cluster finishes the walk and
posts nothing twice; the restarted agent does too), the gateway restarted
with requests queued, Redis restarted mid-stream.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.streams import GROUP, REQUESTS
from bot.sources.scenario import build_sources, load_scenario
from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.redis_topologies import RedisClusterServer
from tests.services import RedisServer
from tests.slack_harness import BotProcess, posts, start_together, stop_together, told, wait_for

PLUGIN_LOG = r"/pods/nvidia-device-plugin-daemonset-x7k2p/log"


@pytest.fixture(scope="module", params=["single", "cluster"])
def redis_aof(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One redis-server, or a 3-master Redis Cluster (GPUBOT_REDIS_MODE=cluster): the suite runs on both."""
    folder = tmp_path_factory.mktemp(f"redis-{request.param}")
    server: Any = RedisServer(aof_dir=folder) if request.param == "single" else RedisClusterServer(folder)
    with server:
        yield server


@pytest.fixture(scope="module")
def slack(redis_aof: Any) -> Iterator[FakeSlack]:
    """Per Redis shape: each run of the suite sees only its own posts."""
    with serve_slack() as fake:
        yield fake


def _kube(folder: Path, cluster: str, prefix: str = "") -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(cluster_scenario(folder, cluster, prefix)))
    with serve(snapshot) as api:
        yield api


@pytest.fixture(scope="module")
def kube_eu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    yield from _kube(tmp_path_factory.mktemp("eu"), "eu-1")


@pytest.fixture(scope="module")
def kube_us(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    yield from _kube(tmp_path_factory.mktemp("us"), "us-1", prefix="us-")


@pytest.fixture(scope="module")
def kube_gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    """Handed to the gateway as KUBECONFIG: it must never be asked anything."""
    yield from _kube(tmp_path_factory.mktemp("gw"), "gw")


class Fleet:
    """The processes of the module: started and restarted by the tests, all stopped at the end."""

    def __init__(self, slack: FakeSlack, redis: Any, folder: Path, kube_gw: FakeKubeAPI) -> None:
        self.slack, self.redis_url, self.folder, self.kube_gw = slack, redis.url, folder, kube_gw
        self.redis_env: dict[str, str] = dict(redis.env)
        self.procs: list[BotProcess] = []
        self.started = 0

    def gateway(self, ready: bool = True) -> BotProcess:
        # The digest root's check waits 5 s for the parts: on a loaded CI machine they take over 1.5 s.
        env = gateway_env(
            self.slack.url,
            self.redis_url,
            KUBECONFIG=self.kube_gw.kubeconfig,
            GPUBOT_DIGEST_PART_WAIT_SECONDS="5",
            **self.redis_env,
        )
        return self._start(["--role", "gateway"], env, "gateway", ready)

    def agent(self, cluster: str, kube: FakeKubeAPI, name: str, ready: bool = True) -> BotProcess:
        env = agent_env(self.slack.url, self.redis_url, cluster, **self.redis_env)
        env.pop("SLACK_SIGNING_SECRET")  # an agent hears nothing from Slack: it needs no signing secret
        return self._start(["--role", "agent", "--kubeconfig", kube.kubeconfig], env, name, ready)

    def _start(self, args: list[str], env: dict[str, str], name: str, ready: bool) -> BotProcess:
        self.started += 1
        proc = BotProcess(args, env, self.folder / f"{self.started:02d}-{name}.log", ready=ready)
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        stop_together(self.procs)


@pytest.fixture(scope="module")
def fleet(
    slack: FakeSlack,
    redis_aof: Any,
    kube_eu: FakeKubeAPI,
    kube_us: FakeKubeAPI,
    kube_gw: FakeKubeAPI,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    f = Fleet(slack, redis_aof, tmp_path_factory.mktemp("fleet"), kube_gw)
    try:
        # Started together, ready one after the other: the four start-ups overlap.
        procs: dict[str, Any] = {
            "gateway": f.gateway(ready=False),
            "eu-a": f.agent("eu-1", kube_eu, "eu-a", ready=False),
            "eu-b": f.agent("eu-1", kube_eu, "eu-b", ready=False),
            "us": f.agent("us-1", kube_us, "us", ready=False),
        }
        start_together(list(procs.values()))
        procs["fleet"] = f
        r = redis_aof.client()
        wait_for("both clusters registered", lambda: len(r.hgetall("gpubot:clusters")) == 2)
        yield procs
    finally:
        f.stop_all()


# --- helpers ----------------------------------------------------------------------------------


def roots(slack: FakeSlack, channel: str) -> list[Call]:
    return [c for c in posts(slack, channel) if not c.params.get("thread_ts")]


def thread_texts(slack: FakeSlack, channel: str) -> list[str]:
    return [c.params["text"] for c in posts(slack, channel) if c.params.get("thread_ts")]


def walked(slack: FakeSlack, channel: str) -> bool:
    return "Layer 5 (the card): fault" in thread_texts(slack, channel)


def ack_text(gw: BotProcess, text: str, channel: str, user: str = "U0ASKER") -> str:
    status, body = gw.command(text, user=user, channel=channel)
    assert status == 200, body
    return str(json.loads(body)["text"])


def holder_pid(server: Any, cluster: str) -> int:
    """The pid of the agent holding the cluster's one pending entry (consumer names are host-pid)."""
    r = server.client()
    rows = r.xpending_range(REQUESTS.format(cluster), GROUP, "-", "+", 10)
    assert len(rows) == 1, rows
    return int(str(rows[0]["consumer"]).rsplit("-", 1)[1])


def layer_one_recorded(slack: FakeSlack, server: Any, channel: str) -> bool:
    """Layer 1 is in the thread and marked posted (a durable fact, not its claim)."""
    layer1 = [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 1 (")]
    if not layer1:
        return False
    blocks = layer1[0].params["blocks"]
    walk_id = next(e["value"] for b in blocks if b["type"] == "actions" for e in b["elements"])
    return server.client().get(f"gpubot:walk:{walk_id}:posted:1") is not None


def one_walk_each(slack: FakeSlack, channel: str) -> None:
    assert len(roots(slack, channel)) == 1
    assert thread_texts(slack, channel) == ["Layer 1 (scheduling): fault", "Layer 5 (the card): fault"]


def _logs(fleet: dict[str, Any]) -> str:
    return "\n".join(f"--- {p.log_path.name}\n{p.log()[-1500:]}" for p in fleet["fleet"].procs)


# --- commands, buttons, digest -------------------------------------------------------------------


def test_each_cluster_answers_with_its_own_data(
    fleet: dict[str, Any], slack: FakeSlack, kube_gw: FakeKubeAPI
) -> None:
    gw: BotProcess = fleet["gateway"]
    assert (
        ack_text(gw, "why eu-1/ml/trainer-0", "C0E2EEU")
        == "walking the layers for ml/trainer-0 on cluster `eu-1`…"
    )
    assert ack_text(gw, "why trainer-0 -n ml --cluster us-1", "C0E2EUS").endswith("on cluster `us-1`…")
    wait_for("both walks", lambda: walked(slack, "C0E2EEU") and walked(slack, "C0E2EUS"), explain=gw.log)
    one_walk_each(slack, "C0E2EEU")
    one_walk_each(slack, "C0E2EUS")
    eu, us = (
        json.dumps(roots(slack, "C0E2EEU")[0].params["blocks"]),
        json.dumps(roots(slack, "C0E2EUS")[0].params["blocks"]),
    )
    assert "cluster `eu-1`" in eu and "`gpu-7`" in eu and "us-gpu" not in eu
    assert "cluster `us-1`" in us and "`us-gpu-7`" in us
    listing = ack_text(gw, "clusters", "C0E2EEU")
    assert listing.startswith("*Clusters* (2)\n• `eu-1` · gpubot ") and "• `us-1` · gpubot " in listing
    choose = ack_text(gw, "why ml/trainer-0", "C0E2EEU")
    assert choose.startswith("This bot serves several clusters: name one")
    assert kube_gw.count() == 0  # the gateway has no Kubernetes client at all


def test_a_button_runs_on_the_walks_cluster(
    fleet: dict[str, Any], slack: FakeSlack, kube_eu: FakeKubeAPI, kube_us: FakeKubeAPI
) -> None:
    gw: BotProcess = fleet["gateway"]
    channel = "C0E2EBTN"
    ack_text(gw, "why us-1/ml/trainer-0", channel)
    wait_for("the walk", lambda: walked(slack, channel))
    layer1 = next(c for c in posts(slack, channel) if c.params["text"].startswith("Layer 1 ("))
    walk_id = next(b for b in layer1.params["blocks"] if b["type"] == "actions")["elements"][0]["value"]
    eu_before = kube_eu.count()
    status, _ = gw.click(
        "walk_all", walk_id, user="U0CLICKER", channel=channel, message_ts=layer1.params["thread_ts"]
    )
    assert status == 200
    wait_for(
        "layers 2-4",
        lambda: (
            "Layer 4 (the driver and its versions): ok" in " ".join(thread_texts(slack, channel))
            or len(thread_texts(slack, channel)) >= 6
        ),
    )
    texts = thread_texts(slack, channel)
    assert any(t.startswith("<@U0CLICKER> walked the remaining layers (2, 3, 4)") for t in texts)
    assert sum(t.startswith("Layer 2 (") for t in texts) == 1
    assert kube_eu.count() == eu_before  # eu-1's agents were not asked


def test_the_digest_has_one_root_and_one_part_per_cluster(fleet: dict[str, Any], slack: FakeSlack) -> None:
    gw: BotProcess = fleet["gateway"]
    channel = "C0E2EDIGEST"
    assert ack_text(gw, "digest", channel) == "posting the GPU fleet digest of every cluster in this channel…"
    wait_for(
        "both parts",
        lambda: len([t for t in thread_texts(slack, channel) if t.startswith("GPU digest")]) == 2,
    )
    (root,) = roots(slack, channel)
    assert "2 cluster(s): one part per cluster in this thread" in root.params["text"]
    parts = [
        c
        for c in posts(slack, channel)
        if c.params.get("thread_ts") and c.params["text"].startswith("GPU digest")
    ]
    root_ts = {c.params["thread_ts"] for c in parts}
    assert len(parts) == 2 and len(root_ts) == 1  # both under the one root
    headers = sorted(
        b["text"]["text"] for c in parts for b in c.params["blocks"] if b.get("type") == "header"
    )
    assert [h.rsplit(" · ", 1)[1] for h in headers] == ["cluster eu-1", "cluster us-1"]
    # After the wait, the root says every part came.
    wait_for(
        "the root's check",
        lambda: [
            u
            for u in slack.calls_to("chat.update")
            if u.params.get("ts") in root_ts and "every cluster's part" in json.dumps(u.params.get("blocks"))
        ],
        timeout=20,
    )


# --- faults ------------------------------------------------------------------------------------


def test_an_agent_killed_mid_walk_is_taken_over_and_the_thread_has_one_of_each(
    fleet: dict[str, Any], slack: FakeSlack, kube_eu: FakeKubeAPI, redis_aof: Any
) -> None:
    """Killed at the worst point: Slack has taken layer 5's message, the agent has not heard so."""
    gw: BotProcess = fleet["gateway"]
    channel = "C0E2EKILL"
    kube_eu.fail(PLUGIN_LOG, delay=1.0, times=1)  # layer 5 waits: time to arm the lost answer
    ack_text(gw, "why eu-1/ml/trainer-0", channel)
    wait_for("layer 1 recorded", lambda: layer_one_recorded(slack, redis_aof, channel))
    slack.lose_answers("chat.postMessage", seconds=20)  # the next post, layer 5's: taken, answer held
    wait_for("layer 5 taken by Slack", lambda: walked(slack, channel))
    pid = holder_pid(redis_aof, "eu-1")
    victim = next(p for k, p in fleet.items() if k.startswith("eu-") and p.proc.pid == pid)
    os.kill(pid, signal.SIGKILL)
    victim.proc.wait(timeout=5)
    r = redis_aof.client()
    survivor = next(p for k, p in fleet.items() if k.startswith("eu-") and p is not victim)
    wait_for(
        "the walk finished by the other agent",
        lambda: r.xpending(REQUESTS.format("eu-1"), GROUP)["pending"] == 0,
        timeout=20,
        explain=survivor.log,
    )
    one_walk_each(slack, channel)  # layer 5 found in the thread by its metadata, not posted again
    assert "took over" in survivor.log_path.read_text()
    assert "Slack has it" in survivor.log_path.read_text()
    fleet["fleet"].procs.remove(victim)


def test_a_restarted_agent_and_a_restarted_gateway_lose_nothing(
    fleet: dict[str, Any], slack: FakeSlack, kube_us: FakeKubeAPI, redis_aof: Any
) -> None:
    """us-1's only agent is killed mid-walk; requests queue while it is down and the gateway restarts;
    the agent's restart (a new consumer) finishes its old self's walk and runs the queued ones."""
    f: Fleet = fleet["fleet"]
    channel = "C0E2ERESTART"
    kube_us.fail(PLUGIN_LOG, delay=4.0, times=1)
    ack_text(fleet["gateway"], "why us-1/ml/trainer-0", channel)
    wait_for("layer 1 recorded", lambda: layer_one_recorded(slack, redis_aof, channel))
    old: BotProcess = fleet["us"]
    assert holder_pid(redis_aof, "us-1") == old.proc.pid
    os.kill(old.proc.pid, signal.SIGKILL)
    old.proc.wait(timeout=5)
    f.procs.remove(old)
    wait_for(
        "us-1 silent", lambda: "silent" in ack_text(fleet["gateway"], "clusters", "C0E2EGWQ"), timeout=10
    )
    queued = [f"C0E2EGWQ{i}" for i in range(3)]
    for ch in queued:
        assert "last seen" in ack_text(fleet["gateway"], "why us-1/ml/trainer-0", ch)
    old_gw: BotProcess = fleet["gateway"]
    assert old_gw.stop() == 0
    f.procs.remove(old_gw)
    fleet["gateway"], fleet["us"] = start_together(
        [f.gateway(ready=False), f.agent("us-1", kube_us, "us-restarted", ready=False)]
    )
    for ch in [channel, *queued]:
        wait_for(f"the walk in {ch}", lambda ch=ch: walked(slack, ch), timeout=20, explain=fleet["us"].log)
        one_walk_each(slack, ch)
    assert "clusters" in ack_text(fleet["gateway"], "help", "C0E2EGWQ")  # the new gateway answers


def test_redis_restarted_mid_stream_loses_nothing_and_posts_nothing_twice(
    fleet: dict[str, Any], slack: FakeSlack, kube_eu: FakeKubeAPI, redis_aof: Any
) -> None:
    gw: BotProcess = fleet["gateway"]
    channels = [f"C0E2EAOF{i}" for i in range(4)]
    kube_eu.fail(PLUGIN_LOG, delay=2.0, times=2)  # two walks in flight, the others waiting in the stream
    for ch in channels:
        ack_text(gw, "why eu-1/ml/trainer-0", ch)
    r = redis_aof.client()
    wait_for("two in flight", lambda: r.xpending(REQUESTS.format("eu-1"), GROUP)["pending"] >= 2)
    redis_aof.restart(down_s=0.3)
    for ch in channels:
        wait_for(
            f"the walk in {ch}", lambda ch=ch: walked(slack, ch), timeout=30, explain=lambda: _logs(fleet)
        )
        one_walk_each(slack, ch)
    wait_for(
        "all acknowledged", lambda: r.xpending(REQUESTS.format("eu-1"), GROUP)["pending"] == 0, timeout=10
    )
    assert r.xlen("gpubot:dead:eu-1") == 0
    assert [t for t in told(slack, "U0ASKER") if "unreachable" in t] == []  # the restart was ridden out
