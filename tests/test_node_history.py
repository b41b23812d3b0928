"""Cordons, uncordons and bundles in the node's ledger (issue 21): who, when, which node, once.

The node is served by the fake Kubernetes API and read and patched by the real client; the
ledger is a real redis-server. `gpubot node NODE` (the CLI) and `/gpu node` (the fake Slack
Web API) show what the actions wrote after the node's annotations are gone.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.actions.cordon import uncordon
from bot.actions.history import record_action
from bot.cli.actions import cli_actor
from bot.cli.main import main
from bot.ledger.store import Ledger, RedisBackend
from bot.ops.config import load_config
from bot.slack.ledger_open import bot_ledger
from bot.slack.ledger_slack import post_node_ledger
from bot.slack.node_actions import ClusterNodeActions
from bot.slack.post import Poster
from bot.sources.kube import KubeCluster
from bot.sources.opener import Sources
from bot.sources.snapshot import SnapshotCluster
from layers.findings import Target
from layers.sources import NoTelemetry
from tests.bundle_scenario import node
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import serve_slack
from tests.services import RedisServer

NODE = "gpu-2"


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    nodes = [node(f"gpu-{i}", 8, 8) for i in range(6)]
    with serve(SnapshotCluster(nodes)) as fake:
        yield fake


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    redis.Redis.from_url(redis_server.url).flushdb()
    return redis_server.url


def _node_json(api: FakeKubeAPI, url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["node", NODE, "--format", "json", "--kubeconfig", api.kubeconfig, "--redis-url", url]) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_cli_cordon_uncordon_and_bundle_are_in_gpubot_node(
    api: FakeKubeAPI, url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = ["--kubeconfig", api.kubeconfig, "--redis-url", url]
    assert main(["cordon", NODE, "--reason", "Xid 79 on GPU 3", *src]) == 0
    assert main(["uncordon", NODE, *src]) == 0
    # A second uncordon changes nothing and writes nothing.
    assert main(["uncordon", NODE, *src]) == 0
    out = tmp_path / "b.tar.gz"
    assert main(["must-gather", "--node", NODE, "--out", str(out), *src]) == 0
    assert api.snapshot.get_node(NODE)["spec"].get("unschedulable") is not True
    events = _node_json(api, url, capsys)["events"]
    kinds = [e["kind"] for e in events]
    assert sorted(kinds) == ["bundle", "cordon", "uncordon"], events
    who = cli_actor()
    by_kind = {e["kind"]: e for e in events}
    assert all(e["actor"] == who for e in events)
    assert by_kind["cordon"]["detail"] == "Xid 79 on GPU 3"
    assert "b.tar.gz" in by_kind["bundle"]["detail"]
    assert by_kind["cordon"]["at"] <= by_kind["uncordon"]["at"] <= by_kind["bundle"]["at"]
    # `gpubot node` again, and its text form, add nothing: one entry each.
    assert [e["kind"] for e in _node_json(api, url, capsys)["events"]] == kinds
    assert main(["node", NODE, *src]) == 0
    text = capsys.readouterr().out
    assert f"uncordon          {who}" in text and f"bundle            {who}" in text


def test_the_same_action_written_twice_is_one_entry(url: str) -> None:
    ledger = Ledger(RedisBackend(redis.Redis.from_url(url, decode_responses=True)), 90)
    for at in (1_764_000_000.0, 1_764_000_030.0):  # a retried write, 30 s later
        assert record_action(ledger, NODE, "uncordon", at, "U0OPS", "uncordoned gpu-2") is None
    events, _gpus = ledger.read(NODE, now=1_764_000_100.0)
    assert [(e.kind, e.actor, e.at) for e in events] == [("uncordon", "U0OPS", 1_764_000_000.0)]


def test_a_failed_store_costs_the_entry_not_the_uncordon(api: FakeKubeAPI) -> None:
    k = KubeCluster.from_config(api.kubeconfig)
    down = Ledger(RedisBackend(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)), 90)
    main(["cordon", NODE, "--reason", "r", "--kubeconfig", api.kubeconfig])
    out = uncordon(k, k, NODE, actor="U0OPS", ledger=down)
    assert out.applied and "not written to the node's ledger" in out.message
    assert api.snapshot.get_node(NODE)["spec"].get("unschedulable") is not True


def test_slack_uncordon_and_bundle_show_in_gpu_node(api: FakeKubeAPI, url: str) -> None:
    cfg = load_config({"REDIS_URL": url})
    cluster = KubeCluster.from_config(api.kubeconfig)
    sources = Sources(
        cluster=cluster, writer=cluster, telemetry=NoTelemetry(now=1_764_000_000.0), description="fake"
    )
    actions = ClusterNodeActions(sources, cfg)
    assert actions.cordon(NODE, "U0OPS0001", "Xid 79").changed
    assert actions.uncordon(NODE, "U0OPS0002").changed
    bundle = actions.must_gather(NODE, Target(None, None, node=NODE), None, actor="U0OPS0003")
    Path(bundle.path).unlink()
    with serve_slack() as slack:
        poster = Poster("xoxb-0000-test-token", slack.url, backoff_s=0.01)
        post_node_ledger(cfg, sources, bot_ledger(cfg), poster, "C0OPS", "U1", NODE)
        (msg,) = slack.calls_to("chat.postMessage")
    body = json.dumps(msg.params)
    for kind, who in (("cordon", "U0OPS0001"), ("uncordon", "U0OPS0002"), ("bundle", "U0OPS0003")):
        assert kind in body and who in body, (kind, who)
