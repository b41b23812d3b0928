"""Probe (black-box): one central Alertmanager, one gateway, agents of several clusters.

A GPU platform team with a training cluster in Europe and an inference
cluster in the US points one Alertmanager (fed by both clusters' Prometheus,
each with `external_labels: {cluster: …}` as docs/multicluster.md asks) at the
gateway's POST /alertmanager. Everything is real but Kubernetes and Slack: a
redis-server, the gateway's Bolt app and HTTP server, two agents (the real
Agent over their own scenario clusters, node names of the US one prefixed
`us-`), the fake Slack Web API. Expectations from shared/spec/interfaces.md,
"Many clusters, one Slack app" and "Alert-driven incident threads", written
before running:

- one notification carrying both clusters' alerts: each alert is mapped and
  walked by its own cluster's agent, the root names that cluster; a node name
  only the other cluster has is nobody's subject there;
- "a request for a cluster whose agent has not been seen for 30 s is answered
  at once … and still queued": an alert webhook is such a request (issue 12
  lists them), so the alert channel is told once an hour per cluster while
  its alerts wait on the stream;
- an agent of an older version "ignores request kinds it does not know and
  says so": an agent whose heartbeat lists no `alerts` kind would take the
  alerts off the stream and drop them, so the gateway keeps them in
  `gpubot:alerts:unrouted` with why and says so in the alert channel.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import msgspec.structs
import pytest
import redis

from bot.cluster.kinds import CLICK, DIGEST_PART, WHY, alerts_request
from bot.cluster.streams import UNROUTED
from bot.slack.transport import start_http
from handlers.alerts import AlertSettings
from tests.alertmanager import payload
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import action_body, dispatch, posts, wait_for
from tests.test_probe5_alert_subjects import DCGM, am_alert

TOKEN = "probe5-gateway-token-0123456789abcdef"
CHANNEL = "C0PROBE5GW"
EU, US = "train-eu", "infer-us"
# What each Prometheus adds: its cluster (external_labels) and the operator's `prometheus` label.
EXTERNAL = {"prometheus": "monitoring/kube-prometheus-stack-prometheus"}


@pytest.fixture(scope="module")
def fleet(
    slack: FakeSlack, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    url = redis_server.url.rsplit("/", 1)[0] + "/13"  # a database of its own: only these clusters
    r = redis.Redis.from_url(url, decode_responses=True)
    r.flushdb()
    folder = tmp_path_factory.mktemp("probe5-clusters")
    gw = inprocess_gateway(slack.url, url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL)
    server = start_http(gw, "127.0.0.1", 0, events=False)
    with (
        inprocess_agent(slack.url, url, EU, scenario=cluster_scenario(folder, EU)),
        inprocess_agent(slack.url, url, US, scenario=cluster_scenario(folder, US, prefix="us-")),
    ):
        wait_for("both clusters registered", lambda: {EU, US} <= set(gw.streams.clusters()))
        yield gw, f"http://127.0.0.1:{server.server_address[1]}/alertmanager", r
    server.shutdown()
    server.server_close()
    gw.shutdown(wait=False)
    r.flushdb()


def deliver(url: str, alerts: list[dict[str, Any]]) -> dict[str, Any]:
    req = urllib.request.Request(
        url,
        data=json.dumps(payload(alerts)).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
            return dict(json.loads(resp.read()))
    except urllib.error.HTTPError as err:
        raise AssertionError(f"{err.code}: {err.read()!r}") from None


def root_heads(slack: FakeSlack) -> list[str]:
    return [
        str(c.params["blocks"][0]["text"]["text"])
        for c in posts(slack, CHANNEL)
        if not c.params.get("thread_ts") and isinstance(c.params.get("blocks"), list)
    ]


def notes(slack: FakeSlack, words: str) -> list[str]:
    return [str(c.params.get("text")) for c in posts(slack, CHANNEL) if words in str(c.params.get("text"))]


def consumed(r: redis.Redis, cluster: str) -> bool:
    """Every entry of the cluster's stream read and acknowledged by its agents."""
    stream = f"gpubot:requests:{cluster}"
    last = r.xinfo_stream(stream)["last-generated-id"]
    groups = r.xinfo_groups(stream)
    return bool(groups) and all(g["pending"] == 0 and g["last-delivered-id"] == last for g in groups)


def on(cluster: str, name: str, **labels: str) -> dict[str, Any]:
    return am_alert(name, {**labels, **EXTERNAL, "cluster": cluster})


def test_one_notification_for_two_clusters_each_alert_walked_by_its_own_cluster(
    fleet: Any, slack: FakeSlack
) -> None:
    _gw, url, r = fleet
    alerts = [
        on(EU, "GPUXidError", **DCGM),  # Hostname gpu-7: eu has it
        on(US, "GPUXidError", **{**DCGM, "Hostname": "us-gpu-7"}),
        on(US, "GPUXidError", **{**DCGM, "Hostname": "gpu-2", "gpu": "1"}),  # only eu has a gpu-2
        on(US, "KubePodCrashLooping", namespace="ml", pod="trainer-0", container="trainer"),
    ]
    assert deliver(url, alerts) == {"alerts": 4, "incidents_to_post": 0}
    wait_for("both streams consumed", lambda: consumed(r, EU) and consumed(r, US), timeout=30)
    heads = sorted(root_heads(slack))
    assert heads == sorted(
        [
            f":rotating_light: *GPUXidError* firing on node `gpu-7` · cluster `{EU}`",
            f":rotating_light: *GPUXidError* firing on node `us-gpu-7` · cluster `{US}`",
            f":rotating_light: *KubePodCrashLooping* firing on pod `ml/trainer-0` · cluster `{US}`",
        ]
    )
    assert not r.exists(f"gpubot:alert:{EU}:incident:node:gpu-2", f"gpubot:alert:{US}:incident:node:gpu-2")


def _register(
    r: redis.Redis, cluster: str, *, seen_ago_s: float, kinds: tuple[str, ...], version: str
) -> None:
    """The heartbeat an agent of `cluster` left `seen_ago_s` ago (the value bot/cluster/streams.py writes,
    in Redis's clock)."""
    secs, micros = r.time()
    value = {"version": version, "last_seen": secs + micros / 1e6 - seen_ago_s, "agent": "agent-0"}
    r.hset("gpubot:clusters", cluster, json.dumps({**value, "kinds": list(kinds)}))


def test_alerts_for_a_silent_cluster_are_queued_and_the_channel_is_told_once(
    fleet: Any, slack: FakeSlack
) -> None:
    gw, url, r = fleet
    _register(r, "edge-ap", seen_ago_s=600, kinds=(WHY, CLICK, DIGEST_PART, "alerts"), version=gw.version)
    xid = on("edge-ap", "GPUXidError", **DCGM)
    deliver(url, [xid])
    assert r.xlen("gpubot:requests:edge-ap") == 1  # still queued: it runs when the agent is back
    [note] = wait_for("the note", lambda: notes(slack, "edge-ap"))
    assert "cluster `edge-ap`'s agent was last seen 10 min ago" in note and "GPUXidError" in note
    deliver(url, [xid])  # Alertmanager's next notification: queued again, not said again
    assert r.xlen("gpubot:requests:edge-ap") == 2
    wait_for("the gateway's jobs done", lambda: not gw.pending)
    assert len(notes(slack, "edge-ap")) == 1


def test_alerts_for_an_agent_that_does_not_take_them_are_kept_and_said(fleet: Any, slack: FakeSlack) -> None:
    _gw, url, r = fleet
    _register(r, "old-eu", seen_ago_s=0, kinds=(WHY, CLICK, DIGEST_PART), version="0.2.0-rc1")
    before = r.xlen(UNROUTED)
    deliver(url, [on("old-eu", "GPURowRemapFailure", **DCGM)])
    assert not r.exists("gpubot:requests:old-eu") or r.xlen("gpubot:requests:old-eu") == 0
    assert r.xlen(UNROUTED) == before + 1
    [(_id, kept)] = r.xrevrange(UNROUTED, count=1)
    assert kept["cluster"] == "old-eu"
    assert "gpubot 0.2.0-rc1" in kept["reason"] and "does not take alerts" in kept["reason"]
    [note] = wait_for("the note", lambda: notes(slack, "old-eu"))
    assert "GPURowRemapFailure" in note and "does not take alerts: upgrade it" in note
    assert "`cluster` label" not in note  # the label was right: the agent is too old


def test_an_alert_request_its_agent_cannot_take_is_dead_lettered_and_said_in_the_alert_channel(
    fleet: Any, slack: FakeSlack
) -> None:
    # A newer gateway's notification the agent cannot read (a payload version it does not know),
    # queued as the gateway queues alerts: buried at once, and, since an alert request has no thread
    # and no person behind it, said where its threads would have been.
    gw, _url, r = fleet
    newer = {**payload([on(EU, "GPUXidError", **DCGM)]), "version": "5"}
    settings = AlertSettings(channel=CHANNEL)
    dead = f"gpubot:dead:{EU}"
    before = r.xlen(dead) if r.exists(dead) else 0
    gw.streams.queue(EU, alerts_request(newer, settings, "0.3.0"))
    wait_for("the entry dead-lettered", lambda: r.exists(dead) and r.xlen(dead) == before + 1)
    [said] = wait_for("the alert channel told", lambda: notes(slack, "gave up on this request (`alerts`"))
    assert f"`gpubot:dead:{EU}`" in said and 'version must be "4"' in said
    assert "run the command again" not in said  # nobody ran a command


def test_a_diagnose_click_on_a_clusters_storm_summary_walks_there_through_the_gateway(
    fleet: Any, slack: FakeSlack
) -> None:
    # A storm on the US cluster (its threads for the hour used up: the limit is 0 here), then a
    # Diagnose click on the summary, through the gateway's Bolt app: the US agent walks that node in
    # the summary's thread (its buttons go back to the walk's cluster, wherever clicked).
    gw, url, r = fleet
    forwarder = gw.alerts.service
    normal = forwarder.settings
    forwarder.settings = msgspec.structs.replace(normal, max_threads_per_hour=0)
    try:
        deliver(url, [on(US, "GPUXidError", **{**DCGM, "Hostname": "us-gpu-3", "gpu": "6"})])
    finally:
        forwarder.settings = normal

    def summary() -> dict[str, Any] | None:
        return next(
            (
                m
                for m in slack.messages.get(CHANNEL, [])
                if "thread_ts" not in m
                and "Alert storm" in json.dumps(m.get("blocks"))
                and "us-gpu-3" in json.dumps(m.get("blocks"))
            ),
            None,
        )

    posted = wait_for("the US storm summary", summary)
    # Its Diagnose buttons work once the agent has finished the alerts request (it prepares each
    # button's walk after the post, when the summary's thread exists): wait for that, then click.
    wait_for("the alerts request done", lambda: consumed(r, US), timeout=30)
    # Both clusters have a gpu-3: the summary, like every message of a cluster's, names its cluster.
    assert f"*Alert storm* on cluster `{US}`" in json.dumps(posted["blocks"])
    [button] = [
        b["accessory"] for b in posted["blocks"] if "accessory" in b and "us-gpu-3" in b["text"]["text"]
    ]
    body = action_body(button["action_id"], button["value"], channel=CHANNEL, message_ts=posted["ts"])
    assert dispatch(gw, body).status == 200
    layer1 = wait_for(
        "the walk's first layer in the summary's thread",
        lambda: [
            m
            for m in slack.messages.get(CHANNEL, [])
            if m.get("thread_ts") == posted["ts"] and str(m.get("text")).startswith("Layer 1 ")
        ],
        timeout=30,
    )
    walk_id = next(e["value"] for b in layer1[0]["blocks"] if b["type"] == "actions" for e in b["elements"])
    assert json.loads(r.get(f"gpubot:walk:{walk_id}"))["cluster"] == US
    wait_for("the click's request done", lambda: consumed(r, US), timeout=30)


def test_alerts_alertmanager_left_out_are_said_by_the_gateway_once(fleet: Any, slack: FakeSlack) -> None:
    # The alerts left out (`truncatedAlerts`, max_alerts on the receiver) name no cluster: the gateway
    # says it in the alert channel, once an hour; the agents are not sent the count.
    gw, url, r = fleet
    doc = {**payload([on(EU, "GPUXidError", **{**DCGM, "Hostname": "gpu-1"})]), "truncatedAlerts": 4}
    for _ in range(2):
        req = urllib.request.Request(
            url,
            data=json.dumps(doc).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
    wait_for("the gateway's jobs done", lambda: not gw.pending)
    [note] = notes(slack, "max_alerts")
    assert "left 4 alert(s) out" in note
    [(_id, entry)] = r.xrevrange(f"gpubot:requests:{EU}", count=1)
    assert "truncatedAlerts" not in json.loads(entry["body"])["payload"]
