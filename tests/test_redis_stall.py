"""A stalled Redis is not a refused one: SIGSTOP of a REAL `redis-server` during a burst of commands.

A frozen primary (a full disk, a GC pause on a managed Redis, a VM paused)
accepts connections and answers nothing. Through `gpubot serve` (one process)
and through a gateway with an agent, in each shape (one server, a Redis
Cluster shard's primary, the Sentinel-monitored primary), a burst sent while
it is stopped is answered within Slack's 3 s, each ack timed on its own, and
after SIGCONT every request is counted exactly once: queued and answered once,
or refused (the ack, or one later line, said it could not be queued) and never
run. /readyz says unready while the stall lasts.
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
from tests.fakes.slack_api import FakeSlack
from tests.redis_topologies import RedisClusterServer, SentinelSet
from tests.services import RedisServer, ServiceUnavailable
from tests.slack_harness import BotProcess, bot_env, get, posts, stop_together, told, wait_for, write_scenario

# Real processes, a stall, a Sentinel election and a settle: more than the suite's default 120 s each.
pytestmark = pytest.mark.timeout(300)
REFUSED = re.compile(r"could not be queued|was not started")
STOPPED = re.compile(r"^:x: walk `\w+` stopped:")
BURST = 6
ACK_LIMIT_S = 3.0
STALL_S = 6.0  # longer than every budget on the request path
CLUSTER = "stall-1"


class Topology:
    """The server (or set) and the pid to SIGSTOP: the one primary the requests' keys live on."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.server: Any
        if kind == "single":
            self.server = RedisServer()
        elif kind == "cluster":
            self.server = RedisClusterServer(workdir / "redis")
        else:
            self.server = SentinelSet(workdir / "redis", down_after_ms=1000)

    def __enter__(self) -> Topology:
        self.server.__enter__() if self.kind != "single" else self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kind == "single":
            self.server.stop()
        else:
            self.server.__exit__(*exc)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.kind == "sentinel":
            env.pop("REDIS_URL", None)
        env.update(self.server.env)
        return env

    def master_moved(self) -> bool:
        return bool(self.kind == "sentinel" and self.server.master_port() != self.server.data_ports[0])

    def stalled_pid(self) -> int:
        """The primary holding the cluster's request stream (and most of what a request touches)."""
        if self.kind == "single":
            return int(self.server.proc.pid)
        if self.kind == "sentinel":
            port = self.server.master_port()
            return int(self.server.data[self.server.data_ports.index(port)].pid)
        client = self.server.client()
        node = client.get_node_from_key(f"gpubot:requests:{CLUSTER}")
        return int(self.server.procs[self.server.ports.index(int(node.port))].pid)


@pytest.fixture(params=["single", "cluster", "sentinel"])
def topology(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Topology]:
    try:
        with Topology(request.param, tmp_path) as t:
            yield t
    except ServiceUnavailable as err:
        pytest.skip(str(err))


def _burst(bot: BotProcess, tag: str) -> list[tuple[float, int, str]]:
    """BURST commands at once (Slack sends them concurrently), each to its own channel."""
    out: list[tuple[float, int, str]] = [(0.0, 0, "")] * BURST

    def one(i: int) -> None:
        started = time.monotonic()
        try:
            status, body = bot.command("why ml/trainer-0", user=f"U0{tag}{i}", channel=f"C0{tag}{i:02d}")
            text = str(json.loads(body)["text"]) if status == 200 else body
        except OSError as err:
            status, text = 0, f"no answer: {err}"
        out[i] = (time.monotonic() - started, status, text)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(BURST)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    return out


def _roots(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in posts(slack, channel) if not c.params.get("thread_ts")]


def _fives(slack: FakeSlack, channel: str) -> list[Any]:
    return [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 5 (")]


def _ready(bot: BotProcess) -> int:
    try:
        return get(bot.url + "/readyz", timeout=3)[0]
    except OSError:
        return 0


@pytest.mark.parametrize("roles", ["all", "gateway+agent"])
def test_a_stalled_primary_answers_every_request_within_3s_and_counts_each_once(
    roles: str, topology: Topology, slack: FakeSlack, tmp_path: Path
) -> None:
    slack.reset()
    if roles == "all":
        scenario = write_scenario(tmp_path)
        env = topology.env(bot_env(slack.url, REDIS_URL=topology.server.url))
        procs = [BotProcess(["--scenario", str(scenario)], env, tmp_path / "bot.log", ready=False)]
        front = procs[0]
    else:
        scenario = cluster_scenario(tmp_path, CLUSTER)
        gw_env = topology.env(gateway_env(slack.url, topology.server.url))
        ag_env = topology.env(agent_env(slack.url, topology.server.url, CLUSTER))
        front = BotProcess(["--role", "gateway"], gw_env, tmp_path / "gw.log", ready=False)
        agent = BotProcess(
            ["--role", "agent", "--scenario", str(scenario)], ag_env, tmp_path / "agent.log", ready=False
        )
        procs = [front, agent]
    tag = "ST"
    try:
        for p in procs:
            p.wait_ready()
        if roles != "all":
            r = topology.server.client()
            wait_for("the cluster registered", lambda: r.hexists("gpubot:clusters", CLUSTER))
        pid = topology.stalled_pid()
        os.kill(pid, signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            acks = _burst(front, tag)
            readyz_during = _ready(front)
            time.sleep(max(0.0, STALL_S - (time.monotonic() - stopped)))
        finally:
            os.kill(pid, signal.SIGCONT)
        print(f"{topology.kind}/{roles} acks:", [(round(t, 2), s, x[:60]) for t, s, x in acks])
        assert all(status == 200 for _, status, _ in acks), acks
        assert max(t for t, _, _ in acks) < ACK_LIMIT_S, acks
        # Unready while the stall lasts; behind Sentinel it may have ended already (the replica promoted).
        assert readyz_during == 503 or (topology.kind == "sentinel" and topology.master_moved()), (
            readyz_during
        )
        refused = {i for i, (_, _, x) in enumerate(acks) if "could not be queued" in x}
        walking = {
            i for i, (_, _, x) in enumerate(acks) if x.startswith(("walking the layers", ":hourglass:"))
        }
        assert refused | walking == set(range(BURST)), acks

        def refusals(i: int) -> list[str]:
            # "could not be queued" (a gateway), or, in one process, a walk acknowledged and then not
            # started because the state store did not answer: said once to the asker, never run.
            return [t for t in told(slack, f"U0{tag}{i}") if REFUSED.search(t)]

        def stops(i: int) -> list[str]:
            # One process: a walk whose root was posted and whose next write met the stall (a Redis
            # Cluster is down while a primary without replica is): told once, the root says so.
            return [t for t in told(slack, f"U0{tag}{i}") if STOPPED.search(t)]

        def settled(i: int) -> bool:
            return bool(i in refused or refusals(i) or stops(i) or _fives(slack, f"C0{tag}{i:02d}"))

        wait_for(
            "every request settled",
            lambda: all(settled(i) for i in range(BURST)),
            timeout=120,
            explain=lambda: "\n".join(p.log()[-2500:] for p in procs),
        )
        time.sleep(5.0)  # a late run of a refused request, or a duplicate, would land by now
        counts = []
        for i in range(BURST):
            channel = f"C0{tag}{i:02d}"
            said, stopped = refusals(i), stops(i)
            roots, fives = _roots(slack, channel), _fives(slack, channel)
            counts.append((i, len(said), len(stopped), len(roots), len(fives)))
            if stopped:
                assert roles == "all" and not said and len(stopped) == 1, (said, stopped)
                assert len(roots) <= 1 and not fives, (len(roots), len(fives))
            elif said or i in refused:
                assert (len(roots), len(fives)) == (0, 0), (i, acks[i], said, roots)  # refused: never run
                assert len(said) <= 1, said  # said once (the ack, or one line after it)
                assert not (said and i in refused), (acks[i], said)
            else:
                assert (len(roots), len(fives)) == (1, 1), (i, acks[i], len(roots), len(fives))
        ran = sum(1 for c in counts if c[4] == 1)
        cut = sum(1 for c in counts if c[2] == 1)
        print(
            f"{topology.kind}/{roles}: {ran} run once, {cut} stopped and said once, "
            f"{BURST - ran - cut} refused and never run; (i, refusals, stops, roots, layer 5): {counts}"
        )
        wait_for("ready again", lambda: _ready(front) == 200, timeout=60)
        # After the stall, a request is queued and answered once again.
        status, body = front.command("why ml/trainer-0", user="U0AFTER", channel="C0AFTER")
        assert status == 200 and "walking the layers" in json.loads(body)["text"], body
        wait_for("answered after", lambda: len(_fives(slack, "C0AFTER")) == 1, timeout=60)
    finally:
        stop_together([p for p in procs if p.proc.poll() is None])
