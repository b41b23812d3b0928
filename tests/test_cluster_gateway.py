"""The gateway over a REAL redis-server: routing, the ephemeral answers, clicks back to their walk's cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.cluster.gateway import Gateway
from bot.cluster.streams import CLUSTERS, REQUESTS, Request
from handlers.walkstate import Walk
from layers.findings import Target
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import OPERATOR, action_body, dispatch, posts, slash_body, told, wait_for

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module", params=["single", "cluster"])
def redis_at(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A redis-server of this module's own (the registered clusters are what these tests are about),
    then the session's 3-master Redis Cluster (flushed before each test, as the server is)."""
    if request.param == "cluster":
        yield request.getfixturevalue("redis_cluster")
        return
    with RedisServer() as server:
        yield server


@pytest.fixture
def clean(redis_at: Any, slack: FakeSlack) -> Any:
    redis_at.client().flushdb()
    slack.reset()
    return redis_at


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def gateway(slack: FakeSlack, clean: Any) -> Iterator[Gateway]:
    gw = inprocess_gateway(slack.url, clean)
    yield gw
    gw.shutdown(wait=False)


def beat(server: Any, cluster: str, ago_s: float = 0.0, version: str = "0.2.0") -> None:
    value = {"version": version, "last_seen": time.time() - ago_s, "agent": "test-agent", "kinds": ["why"]}
    server.client().hset(CLUSTERS, cluster, json.dumps(value))


def command(gw: Gateway, text: str, user: str = "U0ASKER", channel: str = "C0GW") -> str:
    response = dispatch(gw, slash_body(text, user, channel))
    assert response.status == 200
    return str(json.loads(response.body)["text"])


def queued(server: Any, cluster: str) -> list[dict[str, Any]]:
    raw = server.client().xrange(REQUESTS.format(cluster))
    return [Request.from_fields(fields).body | {"kind": fields["kind"]} for _, fields in raw]


def test_one_cluster_may_be_left_out(gateway: Gateway, clean: Any) -> None:
    beat(clean, "eu-1")
    text = command(gateway, "why ml/trainer-0")
    assert text == "walking the layers for ml/trainer-0 on cluster `eu-1`…"
    (body,) = queued(clean, "eu-1")
    assert body["kind"] == "why" and (body["namespace"], body["pod"]) == ("ml", "trainer-0")
    assert body["reply"] == {"channel": "C0GW", "user": "U0ASKER"} and len(body["walk_id"]) == 16


def test_the_cluster_is_named_by_prefix_or_flag(gateway: Gateway, clean: Any) -> None:
    beat(clean, "eu-1")
    beat(clean, "us-1")
    assert command(gateway, "why us-1/ml/trainer-0").endswith("on cluster `us-1`…")
    assert command(gateway, "why trainer-0 -n ml --cluster eu-1").endswith("on cluster `eu-1`…")
    assert [b["pod"] for b in queued(clean, "us-1")] == ["trainer-0"]
    assert [b["namespace"] for b in queued(clean, "eu-1")] == ["ml"]


def test_several_clusters_and_none_named_gets_the_list_and_queues_nothing(
    gateway: Gateway, clean: Any
) -> None:
    beat(clean, "eu-1")
    beat(clean, "us-1", ago_s=600)
    text = command(gateway, "why ml/trainer-0")
    assert text.startswith(
        "This bot serves several clusters: name one, as `/gpu why <cluster>/<namespace>/<pod>`"
    )
    assert "• `eu-1` · gpubot 0.2.0 · last seen 0 s ago" in text
    assert "• `us-1` · gpubot 0.2.0 · :warning: silent for 10 min" in text
    unknown = command(gateway, "why ap-1/ml/trainer-0")
    assert unknown.startswith(":warning: no cluster `ap-1` is registered.\n*Clusters* (2)")
    assert queued(clean, "eu-1") == [] and queued(clean, "us-1") == [] and queued(clean, "ap-1") == []


def test_no_cluster_registered_says_how_to_start_one(gateway: Gateway) -> None:
    assert command(gateway, "why ml/trainer-0").startswith(
        "No cluster has registered yet: start `gpubot serve --role agent`"
    )


def test_a_silent_cluster_is_answered_at_once_and_the_request_kept(gateway: Gateway, clean: Any) -> None:
    beat(clean, "eu-1", ago_s=95)
    text = command(gateway, "why eu-1/ml/trainer-0")
    assert text == (
        "walking the layers for ml/trainer-0 on cluster `eu-1`…\n"
        ":warning: cluster `eu-1`'s agent was last seen 95 s ago: the request is queued and runs as soon as "
        "an agent of that cluster is back."
    )
    assert len(queued(clean, "eu-1")) == 1


def test_clusters_lists_version_and_last_seen(gateway: Gateway, clean: Any) -> None:
    beat(clean, "eu-1", version="0.2.0")
    beat(clean, "us-1", ago_s=7300, version="0.1.9")
    assert command(gateway, "clusters") == (
        "*Clusters* (2)\n• `eu-1` · gpubot 0.2.0 · last seen 0 s ago\n• `us-1` · gpubot 0.1.9 · :warning: silent for 2 h"
    )


def test_bad_commands_get_the_usage_and_queue_nothing(gateway: Gateway, clean: Any) -> None:
    beat(clean, "eu-1")
    assert command(gateway, "why EU/ml/trainer-0").startswith(":warning: invalid cluster name 'EU'")
    assert command(gateway, "why eu-1/ml/Trainer_0").startswith(":warning: invalid pod name 'Trainer_0'")
    assert queued(clean, "eu-1") == []


def test_a_click_goes_to_its_walks_cluster_whoever_clicks(
    gateway: Gateway, clean: Any, slack: FakeSlack
) -> None:
    beat(clean, "eu-1")
    beat(clean, "us-1")
    walk = Walk(
        "walkclick0001", Target("ml", "trainer-0"), "C0GW", "U0ASKER", "1.1", None, 0.0, cluster="us-1"
    )
    gateway.state.set("walk:walkclick0001", walk.to_dict(), 60)
    response = dispatch(
        gateway, action_body("layer_descend", "walkclick0001", user="U0OTHER", channel="C0GW")
    )
    assert response.status == 200
    (body,) = wait_for("the click queued", lambda: queued(clean, "us-1"))
    assert body["kind"] == "click" and body["click"]["action_id"] == "layer_descend"
    assert body["click"]["user"] == "U0OTHER" and body["reply"]["thread_ts"] == "1.1"
    assert queued(clean, "eu-1") == []
    # A digest row's button names its cluster in the digest id.
    dispatch(gateway, action_body("digest_diagnose", "digest-20261129T090000Z-eu-1|gpu-7", user="U0OTHER"))
    (row,) = wait_for("the digest click queued", lambda: queued(clean, "eu-1"))
    assert row["click"]["value"] == "digest-20261129T090000Z-eu-1|gpu-7"


def test_a_click_on_an_unknown_walk_is_answered(gateway: Gateway, clean: Any, slack: FakeSlack) -> None:
    beat(clean, "eu-1")
    dispatch(gateway, action_body("walk_all", "walkgone00001", user="U0LATE"))
    (text,) = wait_for("the answer", lambda: told(slack, "U0LATE"))
    assert text == ":hourglass: this walk (`walkgone00001`) is no longer known: run /gpu why again."
    assert queued(clean, "eu-1") == []


def test_redis_down_is_said_in_the_ack(slack: FakeSlack) -> None:
    with RedisServer() as server:
        gw = inprocess_gateway(slack.url, server.url)
        beat(server, "eu-1")
        gw.streams.clusters()
    try:
        assert command(gw, "why eu-1/ml/trainer-0").startswith(
            ":x: the request could not be queued: the bot's Redis is unreachable (Redis at test failed to read gpubot:clusters:"
        )
        assert gw.ready()[0] is False
    finally:
        gw.shutdown(wait=False)


def test_commands_and_clicks_reach_the_agents_with_their_own_data(
    gateway: Gateway, clean: Any, slack: FakeSlack, tmp_path: Path
) -> None:
    eu, us = cluster_scenario(tmp_path, "eu-1"), cluster_scenario(tmp_path, "us-1", prefix="us-")
    with (
        inprocess_agent(slack.url, clean, "eu-1", scenario=eu),
        inprocess_agent(slack.url, clean, "us-1", scenario=us),
    ):
        wait_for("both registered", lambda: len(gateway.streams.clusters()) == 2)
        command(gateway, "why us-1/ml/trainer-0", channel="C0GWUS")
        command(gateway, "why eu-1/ml/trainer-0", channel="C0GWEU")
        us_root = wait_for("us-1's layer 5", lambda: _layer(slack, "C0GWUS", 5))
        eu_root = wait_for("eu-1's layer 5", lambda: _layer(slack, "C0GWEU", 5))
        us_text, eu_text = str(us_root.params["blocks"]), str(eu_root.params["blocks"])
        assert "us-gpu-7" in us_text and "us-gpu-7" not in eu_text and "gpu-7" in eu_text
        blocks = _layer(slack, "C0GWUS", 1).params["blocks"]
        walk_id = next(b for b in blocks if b["type"] == "actions")["elements"][0]["value"]
        dispatch(gateway, action_body("walk_all", walk_id, user="U0OTHER", channel="C0GWUS"))
        wait_for("the remaining layers on us-1", lambda: _layer(slack, "C0GWUS", 4))
    assert all(
        not p.params["text"].startswith("Layer")
        for p in posts(slack, "C0GWUS")
        if not p.params.get("thread_ts")
    )


def _layer(slack: FakeSlack, channel: str, layer: int) -> Any:
    found = [
        c
        for c in posts(slack, channel)
        if c.params.get("thread_ts") and c.params["text"].startswith(f"Layer {layer} (")
    ]
    return found[0] if found else None


def test_the_gateway_never_loads_the_kubernetes_client(slack: FakeSlack, clean: Any, tmp_path: Path) -> None:
    """Built and driven in a fresh interpreter: no kubeconfig read, the kubernetes package never imported."""
    kubeconfig = tmp_path / "kubeconfig"  # would be read by anything that opens cluster credentials
    kubeconfig.write_text("not: [a kubeconfig")
    code = f"""
import json, os, sys
os.environ["KUBECONFIG"] = {str(kubeconfig)!r}
from tests.cluster_harness import inprocess_gateway
from tests.slack_harness import dispatch, slash_body
gw = inprocess_gateway({slack.url!r}, {clean.url!r}, **{clean.env!r})
for text in ("why eu-1/ml/trainer-0", "clusters", "help", "digest"):
    assert dispatch(gw, slash_body(text)).status == 200
gw.shutdown()
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "bot"))))
"""
    beat(clean, "eu-1")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    modules = json.loads(out.stdout.splitlines()[-1])
    assert not [m for m in modules if m.startswith("kubernetes")]
    assert "bot.sources.kube" not in modules  # the adapter over the kubernetes client
    assert len(queued(clean, "eu-1")) == 2  # the walk, and the digest's part


def test_node_ledgers_and_run_diagnostics_go_to_the_nodes_cluster(
    gateway: Gateway, clean: Any, slack: FakeSlack, tmp_path: Path
) -> None:
    """`/gpu node CLUSTER/NODE` is read and posted by that cluster's agent; its Run diagnostics button
    names the cluster, so the click goes back there, and that agent re-checks the operator."""
    eu = cluster_scenario(tmp_path, "eu-1")
    us = cluster_scenario(tmp_path, "us-1", prefix="us-")
    diag = {"GPUBOT_DIAG_ENABLED": "true"}
    with (
        inprocess_agent(slack.url, clean, "eu-1", scenario=eu, **diag),
        inprocess_agent(slack.url, clean, "us-1", scenario=us, **diag),
    ):
        wait_for("both registered", lambda: len(gateway.streams.clusters()) == 2)
        assert "`eu-1`" in command(gateway, "node us-gpu-7", channel="C0NODE")  # two clusters: which?
        assert command(gateway, "node us-1/us-gpu-7", channel="C0NODE") == (
            "reading the ledger of us-gpu-7 on cluster `us-1`…"
        )
        (ledger,) = wait_for(
            "us-1's ledger",
            lambda: [c for c in posts(slack, "C0NODE") if str(c.params["text"]).startswith("Ledger of ")],
        )
        assert str(ledger.params["text"]).startswith("Ledger of us-gpu-7:")
        button = next(
            e
            for b in ledger.params["blocks"]
            if b["type"] == "actions"
            for e in b["elements"]
            if e["action_id"] == "run_diagnostics"
        )
        assert button["value"] == "diag|us-1/us-gpu-7|2|1"
        kw = {"channel": "C0NODE", "message_ts": str(ledger.params.get("ts") or "1795000001.000100")}
        dispatch(gateway, action_body("run_diagnostics", button["value"], user="U0NOTOPS", **kw))
        dispatch(gateway, action_body("run_diagnostics", button["value"], user=OPERATOR, **kw))
        refused = wait_for("the agent's refusal", lambda: told(slack, "U0NOTOPS"))
        ran = wait_for("the agent's answer", lambda: told(slack, OPERATOR))
    assert refused == [
        ":no_entry: Run diagnostics is for operators only (GPUBOT_OPERATORS, GPUBOT_OPERATOR_GROUPS)."
    ]
    # The operator's click reached us-1's agent, which read the bare node; a scenario runs no Job.
    assert ran == [":no_entry: this bot reads a scenario or bundle: it cannot run a Job"]
    assert queued(clean, "eu-1") == []  # nothing of it went to the other cluster


def test_node_takes_an_optional_cluster() -> None:
    from handlers.commands import CommandError, Node, answer_now, parse_command

    assert parse_command("node eu-1/gpu-7") == Node("gpu-7", "eu-1")
    assert parse_command("node gpu-7") == Node("gpu-7")
    for bad in ("node EU/gpu-7", "node a/b/gpu-7", "node eu-1/", "node eu-1/GPU_7"):
        with pytest.raises(CommandError):
            parse_command(bad)
    # A single-cluster bot asked for another cluster's node says so at once, reading nothing.
    assert "not `us-1`" in str(answer_now(Node("gpu-7", "us-1"), "eu-1"))
    assert answer_now(Node("gpu-7", "eu-1"), "eu-1") is None
