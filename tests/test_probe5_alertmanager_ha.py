"""Probe (black-box): a pair of real Alertmanagers, as kube-prometheus-stack runs them, at the bot.

Two `prometheus-alertmanager` processes (gossip off, as a partitioned HA pair
behaves: both notify) route with kube-prometheus-stack's default grouping
(`group_by: [namespace]`, here with test-sized timings: repeat every half second)
to the in-process bot over the probe fleet (tests/test_probe5_alert_subjects.py),
a real redis-server and the fake Slack Web API. Prometheus' alerts are pushed
to both, as Prometheus does to every Alertmanager it knows. dcgm-exporter's
series carry the exporter's `namespace` (honorLabels false), so three GPUs on
three nodes are one group: every notification carries all three.

Expected (spec, "Alert-driven incident threads"), written before running: one
thread per subject however many times the pair delivers the group (each
delivery twice); the notifications of the same alerts within
GPUBOT_ALERT_DUPLICATE_SECONDS (60) add no line; resolved from both: each
root says so in place, one "resolved" line per thread.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.ops import metrics
from bot.slack.state import RedisState
from bot.slack.transport import start_http
from tests.alertmanager import AlertmanagerServer
from tests.fakes.slack_api import Call, FakeSlack
from tests.services import RedisServer, ServiceUnavailable, require
from tests.slack_harness import inprocess_bot, wait_for
from tests.test_probe5_alert_subjects import DCGM, DCGM_TARGET, probe_scenario

TOKEN = "probe5-ha-token-0123456789abcdef"
CHANNEL = "C0PROBE5HA"
PREFIX = "gpubot-probe5-ha:"
# kube-prometheus-stack's default route, with timings a test can wait for.
CONFIG = """
route:
  receiver: gpubot
  group_by: [namespace]
  group_wait: 100ms
  group_interval: 200ms
  repeat_interval: 500ms
receivers:
  - name: gpubot
    webhook_configs:
      - url: {url}
        send_resolved: true
        http_config:
          authorization:
            type: Bearer
            credentials: {token}
"""
GPUS = [  # (labels beyond dcgm-exporter's, the subject the root names)
    ({"Hostname": "gpu-7", "exported_namespace": "ml", "exported_pod": "trainer-0"}, "pod `ml/trainer-0`"),
    ({"Hostname": "gpu-a100-5", "gpu": "0", "UUID": "GPU-a5a5"}, "node `gpu-a100-5`"),
    ({"Hostname": "gpu-l4-5", "gpu": "2", "UUID": "GPU-l4l4", "modelName": "NVIDIA L4"}, "node `gpu-l4-5`"),
]


@pytest.fixture(scope="module")
def pair(
    slack: FakeSlack, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    try:
        require("prometheus-alertmanager")
    except ServiceUnavailable as err:
        pytest.skip(str(err))
    store = RedisState(redis_server.url, prefix=PREFIX)
    bot = inprocess_bot(
        slack.url,
        probe_scenario(tmp_path_factory.mktemp("probe5-ha")),
        store,
        GPUBOT_ALERT_TOKEN=TOKEN,
        GPUBOT_ALERT_CHANNEL=CHANNEL,
    )
    server = start_http(bot, "127.0.0.1", 0, events=True)
    url = f"http://127.0.0.1:{server.server_address[1]}/alertmanager"
    ams: list[AlertmanagerServer] = []
    try:
        for _ in range(2):
            ams.append(AlertmanagerServer(CONFIG.format(url=url, token=TOKEN)).start())
        yield bot, ams
    finally:
        for am in ams:
            am.stop()
        server.shutdown()
        server.server_close()
        bot.shutdown(wait=True)
        for key in store._redis.scan_iter(f"{PREFIX}*"):
            store._redis.delete(key)
        store.close()


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def push_all(ams: list[AlertmanagerServer], ends_in_s: float) -> None:
    now = datetime.now(UTC)
    alerts = [
        {
            "labels": {"alertname": "GPUXidError", "severity": "critical", **DCGM, **DCGM_TARGET, **extra},
            "annotations": {"summary": f"Xid 79 on {extra['Hostname']}"},
            "startsAt": _stamp(now - timedelta(minutes=2)),
            "endsAt": _stamp(now + timedelta(seconds=ends_in_s)),
            "generatorURL": "http://prometheus.monitoring:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS",
        }
        for extra, _subject in GPUS
    ]
    for am in ams:
        am.push(alerts)


def delivered(am: AlertmanagerServer) -> float:
    """Notifications this Alertmanager has sent to the webhook (its own counter)."""
    with urllib.request.urlopen(am.url + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith('alertmanager_notifications_total{integration="webhook"}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def received(status: str) -> float:
    """Alerts of this status the bot has taken in, whatever it decided about each."""
    return sum(
        s.value
        for m in metrics.REGISTRY.collect()
        if m.name == "gpubot_alerts"
        for s in m.samples
        if s.name == "gpubot_alerts_total" and s.labels.get("status") == status
    )


def _blocks(c: Call) -> str:
    return json.dumps(c.params.get("blocks"), ensure_ascii=False)


def roots(slack: FakeSlack) -> list[Call]:
    return [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]


def shown(slack: FakeSlack) -> dict[str, str]:
    """Each incident thread's ts → what its root shows now (its last update; walks' roots left out)."""
    now: dict[str, str] = {}
    for u in slack.calls_to("chat.update"):
        if str(u.params.get("text")).startswith("gpubot alert ("):
            now[str(u.params.get("ts"))] = _blocks(u)
    return now


def lines(slack: FakeSlack, ts: str, words: str) -> list[str]:
    return [
        str(c.params.get("text"))
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("thread_ts") == ts and words in str(c.params.get("text"))
    ]


def all_deliver(ams: list[AlertmanagerServer], more: int) -> None:
    """Wait until each Alertmanager has sent `more` notifications beyond what it has sent by now."""
    base = [delivered(am) for am in ams]
    wait_for(
        f"{more} more deliveries from each Alertmanager",
        lambda: all(delivered(am) >= b + more for am, b in zip(ams, base, strict=True)),
        timeout=30,
    )


def test_an_ha_pair_repeating_one_group_makes_one_thread_per_subject(pair: Any, slack: FakeSlack) -> None:
    bot, ams = pair
    push_all(ams, ends_in_s=300)
    walked = wait_for(
        "three roots, each walked",
        lambda: (
            len(roots(slack)) == 3
            and len(shown(slack)) == 3
            and all("walking the layers" not in b for b in shown(slack).values())
            and shown(slack)
        ),
        timeout=30,
    )
    assert sorted(s for _extra, s in GPUS) == sorted(
        next(s for _extra, s in GPUS if f"firing on {s}" in b) for b in walked.values()
    )
    # Each Alertmanager delivers the group again and again (repeat_interval 500 ms): two more from
    # each, then the bot done with them all, before anything is counted.
    all_deliver(ams, 2)
    wait_for("the bot's pool to drain", lambda: not bot.pending)
    assert len(roots(slack)) == 3
    for ts in walked:
        assert lines(slack, ts, "still firing") == []  # every repeat within the duplicate window

    # Prometheus stops: both Alertmanagers send resolved (one notification each, the group's three
    # alerts). Each root in place, one line per thread.
    before = received("resolved")
    push_all(ams, ends_in_s=-1)
    # The roots first (the lines are posted before the root's update), then both notifications
    # taken in, then the bot done with whatever they queued: only then count.
    wait_for(
        "every root resolved in place",
        lambda: sum("Resolved at" in b for b in shown(slack).values()) == 3,
        timeout=30,
    )
    wait_for("both resolved notifications taken in", lambda: received("resolved") == before + 6, timeout=30)
    wait_for("the bot's pool to drain", lambda: not bot.pending)
    assert len(roots(slack)) == 3
    for ts in walked:
        assert len(lines(slack, ts, "resolved")) == 1
