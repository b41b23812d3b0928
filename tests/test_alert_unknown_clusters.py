"""The gateway's POST /alertmanager with alerts for clusters nobody serves (issue 20, item 4), over a
REAL redis-server and real HTTP, one agent (eu) registered.

Expectations, written before running:
- 300 distinct unknown `cluster` labels (one notification, then twenty more) are kept in
  `gpubot:alerts:unrouted` and said in the alert channel in ONE note listing them, not 300;
- a lone surrogate (a `\\ud800` JSON escape) in the `cluster` label is no 500: the alert is kept
  with the name cleaned (U+FFFD) and the notification's other alerts go through.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot.cluster.streams import UNROUTED
from bot.slack.transport import start_http
from tests.alertmanager import alert, payload
from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import post, posts, wait_for

TOKEN = "am-token-unknown-clusters-0123456789"
CHANNEL = "C0UNKNOWNCL"
HEADERS = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def fleet(
    slack: FakeSlack, redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Any]:
    url = redis_server.url.rsplit("/", 1)[0] + "/13"  # a database of its own
    r = redis.Redis.from_url(url)
    r.flushdb()
    folder = tmp_path_factory.mktemp("unknown-clusters")
    gw = inprocess_gateway(slack.url, url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL)
    server = start_http(gw, "127.0.0.1", 0, events=False)
    with inprocess_agent(slack.url, url, "eu", scenario=cluster_scenario(folder, "eu")):
        wait_for("eu registered", lambda: set(gw.streams.clusters()) == {"eu"})
        yield gw, f"http://127.0.0.1:{server.server_address[1]}/alertmanager", r
    server.shutdown()
    server.server_close()
    gw.shutdown(wait=False)
    r.flushdb()


def notes(slack: FakeSlack) -> list[Any]:
    return [c for c in posts(slack, CHANNEL) if "went to no cluster" in str(c.params.get("text"))]


def test_three_hundred_unknown_clusters_are_one_note_listing_them(fleet: Any, slack: FakeSlack) -> None:
    gw, url, r = fleet
    slack.reset()
    before = r.xlen(UNROUTED)
    many = [alert("GPUXidError", Hostname="gpu-7", cluster=f"dc-{i:03d}", gpu="0") for i in range(280)]
    code, text = post(url, json.dumps(payload(many)), HEADERS)
    assert code == 200, text
    for i in range(280, 300):  # twenty more notifications, one new name each
        code, _ = post(
            url, json.dumps(payload([alert("GPUXidError", Hostname="gpu-7", cluster=f"dc-{i:03d}")])), HEADERS
        )
        assert code == 200
    wait_for("the gateway's jobs done", lambda: not gw.pending)
    assert r.xlen(UNROUTED) == before + 300  # nothing lost: every alert kept, with why
    [note] = notes(slack)
    said = str(note.params["text"])
    assert "`dc-000`" in said and "`dc-150`" in said and ", …" in said and "280 cluster(s)" in said
    assert len([c for c in posts(slack, CHANNEL) if not c.params.get("thread_ts")]) == 1


def test_a_lone_surrogate_in_the_cluster_label_is_cleaned_not_a_500(fleet: Any, slack: FakeSlack) -> None:
    _gw, url, r = fleet
    raw = json.dumps(
        payload(
            [
                alert("GPUXidError", Hostname="gpu-7", cluster="SURROGATE", gpu="1"),
                alert("GPURowRemapFailure", Hostname="gpu-7", cluster="eu", gpu="1"),
            ]
        )
    ).replace("SURROGATE", "dc-\\ud800")
    code, text = post(url, raw, HEADERS)
    assert code == 200, text
    kept = r.xrevrange(UNROUTED, count=1)[0][1]
    assert kept[b"cluster"].decode() == "dc-\ufffd"
    wait_for("eu's incident", lambda: r.exists("gpubot:alert:eu:incident:node:gpu-7"))
