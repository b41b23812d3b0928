"""The request streams on a REAL redis-server: queue, consumer group, takeover, dead letters, stats."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from bot.cluster.streams import (
    CLUSTERS,
    DEAD,
    REQUESTS,
    ClusterStreams,
    Request,
    StreamsUnavailable,
)
from bot.slack.state import redis_client
from tests.services import free_port


@pytest.fixture
def streams(redis_any: Any) -> Iterator[ClusterStreams]:
    client = redis_any.client()
    yield ClusterStreams(client, shown="test", maxlen=100)
    client.close()


def cluster() -> str:
    return f"c-{uuid.uuid4().hex[:8]}"


def test_a_request_round_trips_and_is_acknowledged(streams: ClusterStreams) -> None:
    c = cluster()
    req = Request(
        "why",
        {"walk_id": "w1", "reply": {"channel": "C1", "user": "U1"}},
        queued_at=1796000000.5,
        sender_version="0.2.0",
    )
    entry_id = streams.queue(c, req)
    streams.ensure_group(c)  # created after the entry: still delivered (group starts at 0)
    got = streams.read(c, "agent-a", 10, 100)
    assert [e.entry_id for e in got] == [entry_id]
    assert got[0].request == req and got[0].deliveries == 1
    assert got[0].request.reply == {"channel": "C1", "user": "U1"}
    assert streams.stats(c).pending == 1
    streams.ack(c, entry_id)
    s = streams.stats(c)
    assert (s.pending, s.waiting, s.oldest_pending_age_s) == (0, 0, 0.0)
    assert streams.read(c, "agent-a", 10, 50) == []  # nothing new


def test_an_idle_entry_is_taken_over_with_its_delivery_count(streams: ClusterStreams) -> None:
    c = cluster()
    streams.ensure_group(c)
    streams.queue(c, Request("why", {"walk_id": "w"}))
    (first,) = streams.read(c, "dead-agent", 1, 100)
    assert streams.claim(c, "agent-b", min_idle_s=5, count=10) == []  # not idle long enough
    time.sleep(0.25)
    (taken,) = streams.claim(c, "agent-b", min_idle_s=0.2, count=10)
    assert taken.entry_id == first.entry_id and taken.deliveries == 2
    time.sleep(0.25)
    (again,) = streams.claim(c, "agent-c", min_idle_s=0.2, count=10)
    assert again.deliveries == 3


def test_live_work_is_renewed_so_nobody_takes_it(streams: ClusterStreams) -> None:
    c = cluster()
    streams.ensure_group(c)
    streams.queue(c, Request("why", {"walk_id": "w"}))
    (entry,) = streams.read(c, "busy-agent", 1, 100)
    for _ in range(4):
        time.sleep(0.1)
        streams.keep(c, "busy-agent", [entry.entry_id])
    assert streams.claim(c, "other", min_idle_s=0.2, count=10) == []
    assert streams.deliveries(c, entry.entry_id) == 1  # renewal is no delivery


def test_a_buried_entry_is_in_the_dead_stream_and_no_longer_pending(
    streams: ClusterStreams, redis_any: Any
) -> None:
    c = cluster()
    streams.ensure_group(c)
    streams.queue(c, Request("click", {"click": {}}))
    (entry,) = streams.read(c, "a", 1, 100)
    streams.bury(c, entry, "failed 3 times: boom")
    s = streams.stats(c)
    assert (s.pending, s.dead) == (0, 1)
    raw = redis_any.client()
    ((_, fields),) = raw.xrange(DEAD.format(c))
    assert fields["reason"] == "failed 3 times: boom" and fields["entry"] == entry.entry_id
    assert fields["kind"] == "click"


def test_an_unreadable_entry_is_delivered_as_such(streams: ClusterStreams, redis_any: Any) -> None:
    c = cluster()
    streams.ensure_group(c)
    raw = redis_any.client()
    raw.xadd(REQUESTS.format(c), {"kind": "why", "id": "x", "body": "{not json"})
    raw.xadd(REQUESTS.format(c), {"hello": "world"})
    raw.xadd(REQUESTS.format(c), {"kind": "why", "id": "y", "body": "[1, 2]"})
    entries = streams.read(c, "a", 10, 100)
    assert [e.request for e in entries] == [None, None, None]
    assert [e.problem for e in entries] == [
        "the entry's body is not JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        "the entry has no kind, id or body",
        "the entry's body is not a JSON object",
    ]


def test_streams_are_trimmed_approximately(streams: ClusterStreams) -> None:
    c = cluster()
    for i in range(600):
        streams.queue(c, Request("why", {"n": i}))
    length = streams.stats(c).length
    assert 100 <= length < 300  # MAXLEN ~ 100 trims whole macro nodes, never below the limit


def test_waiting_and_oldest_pending_age(streams: ClusterStreams) -> None:
    c = cluster()
    streams.ensure_group(c)
    for i in range(5):
        streams.queue(c, Request("why", {"n": i}))
    streams.read(c, "a", 2, 100)
    time.sleep(0.2)
    s = streams.stats(c)
    assert (s.length, s.waiting, s.pending) == (5, 3, 2)
    assert 0.2 <= s.oldest_pending_age_s < 5


def test_heartbeats_list_clusters_and_skip_foreign_fields(streams: ClusterStreams, redis_any: Any) -> None:
    c = cluster()
    streams.heartbeat(c, "host-1", "0.2.0", ("click", "why"))
    raw = redis_any.client()
    raw.hset(CLUSTERS, "junk-" + c, "not json")
    raw.hset(CLUSTERS, "partial-" + c, json.dumps({"version": "1"}))
    seen = streams.clusters()
    assert seen[c].version == "0.2.0" and seen[c].agent == "host-1" and seen[c].kinds == ("click", "why")
    assert 0 <= seen[c].silent_for(time.time()) < 5
    assert "junk-" + c not in seen and "partial-" + c not in seen


def test_redis_down_is_one_line_without_the_password() -> None:
    client = redis_client(f"redis://:s3cret@127.0.0.1:{free_port()}/0", timeout_s=0.5)
    streams = ClusterStreams(client, shown="redis://127.0.0.1")
    with pytest.raises(StreamsUnavailable) as err:
        streams.queue("eu-1", Request("why", {}))
    text = str(err.value)
    assert text.startswith("Redis at redis://127.0.0.1 failed to queue on gpubot:requests:eu-1: ")
    assert "s3cret" not in text and "\n" not in text


class _AnswerLost:
    """A real client whose first XADD lands in Redis and then meets a reset connection (the answer
    lost in a master switch), and whose next `fail` XADDs are refused before they are sent."""

    def __init__(self, client: redis.Redis, fail: int = 1) -> None:
        self._client, self._lost, self._fail = client, False, fail

    def xadd(self, *args: object, **kw: object) -> object:
        if not self._lost:
            self._lost = True
            self._client.xadd(*args, **kw)  # type: ignore[arg-type]
            raise redis.ConnectionError("Connection reset by peer")
        if self._fail > 0:
            self._fail -= 1
            raise redis.ConnectionError("Connection refused")
        return self._client.xadd(*args, **kw)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> object:
        return getattr(self._client, name)


def test_a_request_sent_again_through_a_switch_is_queued_once(redis_any: Any) -> None:
    from tests.cluster_harness import SIGNER

    c = cluster()
    client = redis_any.client()
    streams = ClusterStreams(_AnswerLost(client), shown="test", signer=SIGNER)  # type: ignore[arg-type]
    entry_id = streams.queue(c, Request("why", {"walk_id": "w-switch"}), patience_s=5.0)
    kept = client.xrange(REQUESTS.format(c))
    assert [eid for eid, _ in kept] == [entry_id]  # the copy that landed, not a second one
    with pytest.raises(StreamsUnavailable):  # without patience a refused write is said at once
        ClusterStreams(_AnswerLost(client), shown="test").queue(c, Request("why", {}))
    client.close()
