"""A health agent's condition opens a diagnosed thread: real Prometheus with deploy/alerts.yaml's
rules over kube-state-metrics' `kube_node_status_condition`, real Alertmanager, the bot as a process
on the fake Kubernetes API, the fake Slack (spec: "Who else acts on a node"; docs/owners.md)."""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sources.opener import resolve_scenario
from bot.sources.scenario import build_sources, load_scenario
from bot.sources.series import SeriesData
from tests.alertmanager import AlertmanagerServer, config_yaml
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import PrometheusServer, RedisServer, ServiceUnavailable, openmetrics_text, require
from tests.slack_harness import BotProcess, bot_env, wait_for

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
TOKEN = "e2e-owner-alert-token-0123456789ab"
CHANNEL = "C0AGENTS"
NODE = "h100-infer-02"  # the bundled scenario's node whose AcceleratedHardwareReady is False


def condition_series(now: float) -> list[SeriesData]:
    """kube-state-metrics' view of the node's condition for the last 10 minutes, every 15 s."""
    times = [now - 600 + 15 * i for i in range(41)]
    base = {"__name__": "kube_node_status_condition", "node": NODE, "condition": "AcceleratedHardwareReady"}
    return [
        SeriesData({**base, "status": "false"}, [(t, 1.0) for t in times]),
        SeriesData({**base, "status": "true"}, [(t, 0.0) for t in times]),
        SeriesData({**base, "node": "h100-infer-01", "status": "true"}, [(t, 1.0) for t in times]),
    ]


def start_prometheus(alertmanager: str) -> PrometheusServer:
    workdir = Path(tempfile.mkdtemp(prefix="gpubot-prom-owner-rules-"))
    # The rules as shipped, with their `for:` dropped so the test need not wait out the pending minute
    # (deploy/alerts_test.yaml checks the `for:` itself).
    rules = re.sub(r"\n {8}for: \d+m", "", (DEPLOY / "alerts.yaml").read_text())
    (workdir / "alerts.yaml").write_text(rules)
    config = f"""
global:
  scrape_interval: 1m
  evaluation_interval: 1s
rule_files: [alerts.yaml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['{alertmanager.removeprefix("http://")}']
scrape_configs: []
"""
    server = PrometheusServer(workdir, config, flags=["--rules.alert.resend-delay=1s"])
    server.backfill(openmetrics_text(condition_series(time.time())))
    return server.start()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def kube() -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(resolve_scenario("eks-accelerated-hardware-not-ready-xid79")))
    with serve(snapshot) as api:
        yield api


def test_accelerated_hardware_not_ready_opens_a_diagnosed_thread(
    slack: FakeSlack, kube: FakeKubeAPI, redis_server: RedisServer, tmp_path: Path
) -> None:
    try:
        require("prometheus", "promtool", "prometheus-alertmanager")
    except ServiceUnavailable as err:
        pytest.skip(str(err))
    redis_url = redis_server.url.rsplit("/", 1)[0] + "/8"
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    env = bot_env(slack.url, REDIS_URL=redis_url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL)
    bot = BotProcess(["--kubeconfig", kube.kubeconfig], env, tmp_path / "bot.log")
    am = AlertmanagerServer(config_yaml(f"{bot.url}/alertmanager", TOKEN)).start()
    prom: PrometheusServer | None = None
    try:
        prom = start_prometheus(am.url)

        def explain() -> str:
            posted = "\n".join(f"{c.method} {str(c.params.get('text'))[:120]}" for c in slack.calls)
            return f"slack:\n{posted}\nbot:\n{bot.log()}\nalertmanager:\n{am.log()}"

        def roots() -> list[object]:
            return [
                c
                for c in slack.calls_to("chat.postMessage")
                if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
            ]

        [root] = wait_for("the incident root", roots, timeout=40, explain=explain)
        text = json.dumps(root.params.get("blocks"))  # type: ignore[attr-defined]
        assert "GPUAcceleratedHardwareNotReady" in text and NODE in text and "h100-infer-01" not in text
        layer5 = wait_for(
            "layer 5 in the thread",
            lambda: [
                c
                for c in slack.calls_to("chat.postMessage")
                if c.params.get("thread_ts") and str(c.params.get("text")).startswith("Layer 5")
            ],
            timeout=40,
            explain=explain,
        )[0]
        blocks = json.dumps(layer5.params.get("blocks"))
        assert "L5_HEALTH_AGENT_CONDITION" in blocks and "NvidiaXID79Error" in blocks, blocks
        assert "L5_XID" in blocks and "cordon_node" in blocks
    finally:
        if prom is not None:
            prom.stop()
        am.stop()
        assert bot.stop() == 0
