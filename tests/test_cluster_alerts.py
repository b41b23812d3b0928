"""Alertmanager → the gateway → each cluster's agent, over a REAL redis-server and real HTTP.

The gateway (the real Bolt app and HTTP server of `--role gateway`) receives
POST /alertmanager and queues each alert on its cluster's stream by the
alert's `cluster` label; two agents (eu and us, whose nodes have the SAME
names) open the threads in the fake Slack Web API. Incidents and fingerprints
are per cluster: one alert name on gpu-7 of both clusters is two incidents.
The storm window is per channel, across clusters (spec, "Slack's pace"): both
clusters post into one alert channel, and their threads count together. An
alert for an unknown cluster is kept in `gpubot:alerts:unrouted`, said once,
and lost for nobody. The last test routes through the real Alertmanager.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot.cluster.gateway import Gateway
from bot.cluster.streams import UNROUTED
from bot.slack.transport import start_http
from tests.alertmanager import AlertmanagerServer, alert, config_yaml, payload
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.services import RedisServer, ServiceUnavailable, require
from tests.slack_harness import posts, wait_for

TOKEN = "am-token-cluster-test-0123456789"
CHANNEL = "C0CLUSTERALERTS"
ALERT_ENV = {
    "GPUBOT_ALERT_TOKEN": TOKEN,
    "GPUBOT_ALERT_CHANNEL": CHANNEL,
    # Per channel, both clusters together: gpu-7 of eu and of us take the two threads of the hour.
    "GPUBOT_ALERT_MAX_THREADS_PER_HOUR": "2",
    "GPUBOT_ALERT_DUPLICATE_SECONDS": "0",
}


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(scope="module", params=["single", "cluster"])
def fleet(
    slack: FakeSlack, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    """Gateway and two agents over a database of their own (only these two clusters), then over the
    session's Redis Cluster (database 0 only: flushed)."""
    if request.param == "cluster":
        on: Any = request.getfixturevalue("redis_cluster")
        url, r = on, on.client(decode=False)
    else:
        server = request.getfixturevalue("redis_server")
        url = server.url.rsplit("/", 1)[0] + "/12"
        r = redis.Redis.from_url(url)
    r.flushdb()
    slack.reset()
    folder = tmp_path_factory.mktemp("alert-clusters")
    gw = inprocess_gateway(slack.url, url, **ALERT_ENV)
    server = start_http(gw, "127.0.0.1", 0, events=False)
    with (
        inprocess_agent(slack.url, url, "eu", scenario=cluster_scenario(folder, "eu")),
        inprocess_agent(slack.url, url, "us", scenario=cluster_scenario(folder, "us")),
    ):
        wait_for("both clusters registered", lambda: set(gw.streams.clusters()) == {"eu", "us"})
        yield gw, f"http://127.0.0.1:{server.server_address[1]}/alertmanager", r
    server.shutdown()
    server.server_close()
    gw.shutdown(wait=False)
    r.flushdb()


def deliver(url: str, alerts: list[dict[str, Any]], token: str = TOKEN) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url,
        data=json.dumps(payload(alerts)).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def roots(slack: FakeSlack) -> list[str]:
    return [
        json.dumps(c.params.get("blocks"), ensure_ascii=False)
        for c in posts(slack, CHANNEL)
        if not c.params.get("thread_ts")
    ]


def incident_roots(slack: FakeSlack, node: str, cluster: str) -> list[str]:
    return [b for b in roots(slack) if f"on node `{node}` · cluster `{cluster}`" in b]


def layer5_walks(slack: FakeSlack) -> list[Call]:
    return [
        c
        for c in posts(slack, CHANNEL)
        if c.params.get("thread_ts") and str(c.params.get("text")).startswith("Layer 5 (")
    ]


def test_one_alert_name_on_two_clusters_opens_two_incidents_each_walked_by_its_own_agent(
    fleet: Any, slack: FakeSlack
) -> None:
    _gw, url, r = fleet
    both = [alert("GPUXidError", Hostname="gpu-7", cluster=c, gpu="0") for c in ("eu", "us")]
    status, body = deliver(url, both)
    assert status == 200, body
    wait_for(
        "two incident roots",
        lambda: len(incident_roots(slack, "gpu-7", "eu")) == 1 and incident_roots(slack, "gpu-7", "us"),
    )
    walks = wait_for(
        "both walks in their threads", lambda: len(layer5_walks(slack)) == 2 and layer5_walks(slack)
    )
    walk_ids = {
        e["value"] for c in walks for b in c.params["blocks"] if b["type"] == "actions" for e in b["elements"]
    }
    # Each walk ran on its own cluster's agent (its buttons go back there).
    assert sorted(json.loads(r.get(f"gpubot:walk:{w}"))["cluster"] for w in walk_ids) == ["eu", "us"]
    assert r.exists("gpubot:alert:eu:incident:node:gpu-7") and r.exists("gpubot:alert:us:incident:node:gpu-7")
    # Alertmanager repeats: one line in each cluster's thread, no second root.
    assert deliver(url, both)[0] == 200
    wait_for(
        "a repeat line in both threads",
        lambda: len([c for c in posts(slack, CHANNEL) if "still firing" in str(c.params.get("text"))]) == 2,
    )
    # Resolved on eu only: eu's root says so in place; us stays open.
    resolved = [alert("GPUXidError", "resolved", Hostname="gpu-7", cluster="eu", gpu="0")]
    assert deliver(url, resolved)[0] == 200
    wait_for(
        "eu's root resolved in place",
        lambda: any(
            "Resolved at" in json.dumps(u.params.get("blocks"), ensure_ascii=False)
            and "cluster `eu`" in json.dumps(u.params.get("blocks"), ensure_ascii=False)
            for u in slack.calls_to("chat.update")
        ),
    )
    assert not any(
        "Resolved at" in json.dumps(u.params.get("blocks"), ensure_ascii=False)
        and "cluster `us`" in json.dumps(u.params.get("blocks"), ensure_ascii=False)
        for u in slack.calls_to("chat.update")
    )
    assert len(incident_roots(slack, "gpu-7", "eu")) == 1 and len(incident_roots(slack, "gpu-7", "us")) == 1


def test_storm_control_counts_the_channel_across_clusters(fleet: Any, slack: FakeSlack) -> None:
    _gw, url, r = fleet
    # eu and us opened one thread each (above): the channel's two of the hour. A new subject of
    # either cluster goes into that cluster's summary, though each opened only one thread itself.
    for cluster in ("eu", "us"):
        status, _ = deliver(url, [alert("GPURowRemapFailure", Hostname="gpu-1", cluster=cluster)])
        assert status == 200
    summaries = wait_for(
        "a storm summary of each cluster",
        lambda: (
            len(found := [b for b in roots(slack) if "Alert storm" in b and "node gpu-1" in b]) == 2 and found
        ),
    )
    assert {c for c in ("eu", "us") for b in summaries if f"`{c}`" in b} == {"eu", "us"}
    assert incident_roots(slack, "gpu-1", "eu") == [] and incident_roots(slack, "gpu-1", "us") == []
    counted = json.loads(r.get(f"gpubot:alert-storm:{CHANNEL.lower()}:threads"))
    assert len(counted) == 2  # one count for the channel, both clusters' threads in it
    assert r.get("gpubot:alert:eu:threads") is None and r.get("gpubot:alert:us:threads") is None


def test_an_alert_for_no_known_cluster_is_kept_said_once_and_the_rest_go_through(
    fleet: Any, slack: FakeSlack
) -> None:
    gw, url, r = fleet
    before = r.xlen(UNROUTED)
    mixed = [
        alert("GPUXidError", Hostname="gpu-2", cluster="ap-9", gpu="1"),
        alert("GPUXidError", Hostname="gpu-3", gpu="1"),  # no cluster label, two clusters registered
        alert("GPUPodPending", namespace="ml", pod="trainer-0", cluster="us"),
    ]
    status, body = deliver(url, mixed)
    assert status == 200, body
    assert r.xlen(UNROUTED) == before + 2
    kept = r.xrevrange(UNROUTED, count=2)
    reasons = sorted(f[b"reason"].decode() for _, f in kept)
    assert "no agent of cluster `ap-9` has registered (registered: `eu`, `us`)" in reasons
    assert any("no `cluster` label and several clusters are registered" in x for x in reasons)
    assert (
        json.loads(next(f for _, f in kept if f[b"cluster"] == b"ap-9")[b"alerts"])[0]["labels"]["Hostname"]
        == "gpu-2"
    )

    # One note for every cluster name nobody serves (300 such names must not be 300 messages).
    def unrouted_notes() -> list[Any]:
        return [c for c in posts(slack, CHANNEL) if "went to no cluster" in str(c.params.get("text"))]

    notes = wait_for("the note in the alert channel", unrouted_notes)
    assert "`ap-9`" in notes[0].params["text"] and "(no `cluster` label)" in notes[0].params["text"]
    wait_for("us's pod incident", lambda: r.exists("gpubot:alert:us:incident:pod:ml/trainer-0"))
    assert deliver(url, mixed[:1])[0] == 200  # again within the hour: kept, not said again
    assert r.xlen(UNROUTED) == before + 3
    # Count only once the gateway has run the second note's job, or a note said twice would be missed.
    wait_for("the gateway's jobs done", lambda: not gw.pending)
    notes_after = [c for c in posts(slack, CHANNEL) if "ap-9" in str(c.params.get("text"))]
    assert len(notes_after) == 1 and len(unrouted_notes()) == 1


def test_the_gateways_webhook_refuses_bad_requests_and_answers_503_without_redis(slack: FakeSlack) -> None:
    with RedisServer() as server:
        gw: Gateway = inprocess_gateway(slack.url, server.url, **ALERT_ENV)
        http = start_http(gw, "127.0.0.1", 0, events=False)
        url = f"http://127.0.0.1:{http.server_address[1]}/alertmanager"
        try:
            one = [alert("GPUXidError", Hostname="gpu-7", cluster="eu")]
            assert deliver(url, one, token="wrong")[0] == 401
            bad = urllib.request.Request(
                url, data=b'{"version": "3", "alerts": []}', headers={"Authorization": f"Bearer {TOKEN}"}
            )
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(bad, timeout=5)
            assert err.value.code == 400 and "version" in err.value.read().decode()
            server.stop()
            status, body = deliver(url, one)
            assert status == 503 and "send again" in body["error"]
        finally:
            http.shutdown()
            http.server_close()
            gw.shutdown(wait=False)


def test_the_real_alertmanager_routes_through_the_gateway_to_each_cluster(
    fleet: Any, slack: FakeSlack
) -> None:
    try:
        require("prometheus-alertmanager")
    except ServiceUnavailable as err:
        pytest.skip(str(err))
    _gw, url, r = fleet
    am = AlertmanagerServer(config_yaml(url, TOKEN)).start()
    try:
        # One group (group_by has no cluster): one notification carrying both clusters' alerts.
        am.push([alert("GPUNVLinkDown", Hostname="gpu-3", cluster=c) for c in ("eu", "us")])
        # Both clusters are past their one thread of the hour by now: each records a storm incident.
        wait_for(
            "an incident per cluster",
            lambda: (
                r.exists("gpubot:alert:eu:incident:node:gpu-3", "gpubot:alert:us:incident:node:gpu-3") == 2
            ),
            timeout=20,
            explain=am.log,
        )
        inc = json.loads(r.get("gpubot:alert:us:incident:node:gpu-3"))
        assert [a["name"] for a in inc["alerts"].values()] == ["GPUNVLinkDown"]
    finally:
        am.stop()


# Last: its alerts open threads, which count in the hour's storm window of the tests above.
def test_each_agent_writes_the_xids_alerts_name_to_its_own_clusters_ledger(
    fleet: Any, slack: FakeSlack
) -> None:
    # Both clusters have a gpu-7: eu's Xid 79 and us's Xid 48 are two nodes' histories, not one.
    _gw, url, r = fleet
    xids = {"eu": "79", "us": "48"}
    sent = [
        alert("GPUXidCritical", Hostname="gpu-7", cluster=c, gpu="1", UUID=f"GPU-{c}-7-1", err_code=x)
        for c, x in xids.items()
    ]
    assert deliver(url, sent)[0] == 200

    def entries(cluster: str) -> list[dict[str, Any]]:
        held = r.hgetall(f"gpubot:{cluster}:ledger:{{gpu-7}}")
        return [
            json.loads(v)
            for k, v in held.items()
            if (k.decode() if isinstance(k, bytes) else k).startswith("ev:")
        ]

    for cluster, xid in xids.items():
        got = wait_for(f"{cluster}'s ledger entry", lambda c=cluster: entries(c))
        assert [(e["kind"], e["xid"], e["gpu"], e["source"]) for e in got] == [
            ("xid", int(xid), f"GPU-{cluster}-7-1", "alert")
        ]
    assert not r.exists("gpubot:ledger:{gpu-7}")  # no cluster's entries under the unnamed keys
