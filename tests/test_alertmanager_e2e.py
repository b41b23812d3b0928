"""End to end with the real parts: Prometheus evaluates deploy/alerts.yaml over backfilled DCGM
series, a real Alertmanager routes to `gpubot serve`'s webhook with the bearer token, and the bot
(a process, over the fake Kubernetes API, a real redis-server and the fake Slack Web API) opens,
annotates, resolves and reopens one incident thread.

Alertmanager's timings are small (group_wait 200 ms, group_interval 500 ms, repeat_interval 2 s),
Prometheus evaluates every second and resends after one; the steps after the first alert push
alerts to Alertmanager's /api/v2/alerts, as Prometheus does, for speed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.sources.scenario import build_sources, load_scenario
from bot.sources.series import SeriesData
from tests.alertmanager import AlertmanagerServer, config_yaml
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.services import PrometheusServer, RedisServer, ServiceUnavailable, openmetrics_text, require
from tests.slack_harness import BotProcess, bot_env, wait_for, write_scenario

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
TOKEN = "e2e-alert-token-fedcba9876543210"
CHANNEL = "C0ALERTS"
XID_LABELS = {"Hostname": "gpu-7", "gpu": "3", "UUID": "GPU-0f3c2a91-5bde-4c1e-9a77-ddee5da83d07"}


def _rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def dcgm_series(now: float) -> list[SeriesData]:
    """gpu-7's GPU 3 reported Xid 79 two minutes ago; gpu-1's GPU 0 stays at 0. Every 15 s for 10 min."""
    times = [now - 600 + 15 * i for i in range(40)]
    sick = {"__name__": "DCGM_FI_DEV_XID_ERRORS", **XID_LABELS, "pod": "nvidia-dcgm-exporter-7xk2p"}
    well = {"__name__": "DCGM_FI_DEV_XID_ERRORS", "Hostname": "gpu-1", "gpu": "0", "UUID": "GPU-1111"}
    return [
        SeriesData(sick, [(t, 79.0 if t >= now - 120 else 0.0) for t in times]),
        SeriesData(well, [(t, 0.0) for t in times]),
    ]


def start_prometheus(alertmanager: str) -> PrometheusServer:
    workdir = Path(tempfile.mkdtemp(prefix="gpubot-prom-rules-"))
    shutil.copy(DEPLOY / "alerts.yaml", workdir / "alerts.yaml")
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
    server.backfill(openmetrics_text(dcgm_series(time.time())))
    return server.start()


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    snapshot, _ = build_sources(load_scenario(write_scenario(tmp_path_factory.mktemp("kube"))))
    with serve(snapshot) as api:
        yield api


def roots(slack: FakeSlack) -> list[Call]:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def thread_texts(slack: FakeSlack, ts: str) -> list[str]:
    return [
        str(c.params.get("text"))
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("thread_ts") == ts
    ]


def root_updates(slack: FakeSlack, ts: str) -> list[str]:
    return [
        json.dumps(c.params.get("blocks")) for c in slack.calls_to("chat.update") if c.params.get("ts") == ts
    ]


def push(am: AlertmanagerServer, name: str, *, ends_in_s: float, **labels: str) -> None:
    now = datetime.now(UTC)
    am.push(
        [
            {
                "labels": {"alertname": name, "severity": "critical", **labels},
                "annotations": {"summary": f"{labels.get('Hostname')} GPU {labels.get('gpu')}: {name}"},
                "startsAt": _rfc3339(now - timedelta(seconds=30)),
                "endsAt": _rfc3339(now + timedelta(seconds=ends_in_s)),
            }
        ]
    )


def test_prometheus_rules_through_alertmanager_open_one_thread_then_repeat_add_resolve_reopen(
    slack: FakeSlack, kube: FakeKubeAPI, redis_server: RedisServer, tmp_path: Path
) -> None:
    try:
        require("prometheus", "promtool", "prometheus-alertmanager")
    except ServiceUnavailable as err:
        pytest.skip(str(err))
    slack.reset()
    redis_url = redis_server.url.rsplit("/", 1)[0] + "/7"  # a database of its own
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    env = bot_env(
        slack.url,
        REDIS_URL=redis_url,
        GPUBOT_ALERT_TOKEN=TOKEN,
        GPUBOT_ALERT_CHANNEL=CHANNEL,
        GPUBOT_ALERT_DUPLICATE_SECONDS="1",
    )
    bot = BotProcess(["--kubeconfig", kube.kubeconfig], env, tmp_path / "bot.log")
    am = AlertmanagerServer(config_yaml(f"{bot.url}/alertmanager", TOKEN)).start()
    prom: PrometheusServer | None = None
    try:
        prom = start_prometheus(am.url)

        def explain() -> str:
            posted = "\n".join(
                f"{c.method} {c.params.get('thread_ts')} {str(c.params.get('text'))[:100]}"
                for c in slack.calls
            )
            return f"slack:\n{posted}\nbot:\n{bot.log()}\nalertmanager:\n{am.log()}"

        # Open: Prometheus fires GPUXidError for gpu-7 only; one root, the node walk in its thread.
        [root] = wait_for("the incident root", lambda: roots(slack), timeout=30, explain=explain)
        text = json.dumps(root.params.get("blocks"))
        assert "GPUXidError" in text and "gpu-7" in text and "gpu-1" not in text
        ts = wait_for(
            "the walk in the thread",
            lambda: next(
                (
                    str(c.params["thread_ts"])
                    for c in slack.calls_to("chat.postMessage")
                    if c.params.get("thread_ts")
                ),
                None,
            ),
            explain=explain,
        )
        wait_for(
            "the verdict on the root",
            lambda: any("*Verdict* (layer 5)" in u for u in root_updates(slack, ts)),
            explain=explain,
        )
        layer5 = next(
            c
            for c in slack.calls_to("chat.postMessage")
            if c.params.get("thread_ts") == ts and str(c.params.get("text")).startswith("Layer 5")
        )
        assert "cordon_node" in json.dumps(layer5.params.get("blocks"))  # the buttons, as /gpu why posts them

        # Repeat: Alertmanager re-sends the group after repeat_interval; a line, no second root or walk.
        wait_for(
            "a repeat line",
            lambda: any("still firing" in t for t in thread_texts(slack, ts)),
            explain=explain,
        )

        # A second alert for the node (pushed, as Prometheus does): a line and its name on the root.
        push(am, "GPURowRemapFailure", ends_in_s=300, **XID_LABELS)
        wait_for(
            "the second alert's line",
            lambda: any("GPURowRemapFailure" in t and "firing too" in t for t in thread_texts(slack, ts)),
            explain=explain,
        )
        wait_for(
            "both names on the root",
            lambda: any("GPURowRemapFailure" in u and "GPUXidError" in u for u in root_updates(slack, ts)),
        )

        # Resolve: the pushed alert ends; Prometheus stops, so its Xid alert ends within 4 resend delays.
        push(am, "GPURowRemapFailure", ends_in_s=-1, **XID_LABELS)
        wait_for(
            "the resolved line",
            lambda: any("GPURowRemapFailure" in t and "resolved" in t for t in thread_texts(slack, ts)),
            explain=explain,
        )
        prom.stop()
        prom = None
        wait_for(
            "the root resolved in place",
            lambda: any("Resolved at" in u for u in root_updates(slack, ts)),
            timeout=30,
            explain=explain,
        )
        assert len(roots(slack)) == 1
        texts = thread_texts(slack, ts)
        assert sum(t.startswith("Layer 1 ") for t in texts) == 1  # one walk: no rewalk within 30 minutes

        # Reopen: the Xid fires again later: a new incident, a new thread.
        push(am, "GPUXidError", ends_in_s=300, severity="warning", **XID_LABELS)
        wait_for("a second incident thread", lambda: len(roots(slack)) == 2, explain=explain)
    finally:
        if prom is not None:
            prom.stop()
        am.stop()
        assert bot.stop() == 0
