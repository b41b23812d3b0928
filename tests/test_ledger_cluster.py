"""The ledger on a real Redis Cluster (three redis-server masters on 127.0.0.1, slots assigned by
`redis-cli --cluster create`): a node's read-modify-write is one WATCH/MULTI/EXEC on one slot,
through redis-py's RedisCluster client, and two nodes' keys land where their hash tags say."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from bot.ledger.store import Ledger, RedisBackend
from layers.facts.ledgerevents import Event
from tests.redis_topologies import RedisClusterServer

NOW = 1_795_953_600.0


@pytest.fixture(scope="module")
def cluster(redis_cluster: RedisClusterServer) -> Iterator[RedisCluster]:
    """The suite's one 3-master cluster (tests/conftest.py `redis_cluster`)."""
    client = redis_cluster.client()
    yield client
    client.close()


def test_a_nodes_ledger_is_one_slot_and_writes_are_transactions(cluster: RedisCluster) -> None:
    led = Ledger(RedisBackend(cluster), 90)
    nodes = [f"gpu-{i}" for i in range(12)]
    for node in nodes:
        ev = Event(node, "xid", NOW - 60, gpu="GPU-1", xid=79, source="device-plugin")
        assert led.record(node, [ev], now=NOW) == 1
        # The same Xid from an alert two minutes later: the same entry, one more witness.
        again = Event(node, "xid", NOW + 60, gpu="GPU-1", xid=79, source="alert")
        assert led.record(node, [again], now=NOW) == 0
    slots = {cluster.keyslot(f"gpubot:ledger:{{{n}}}") for n in nodes}
    assert len(slots) > 1  # the nodes spread over the shards …
    for node in nodes:
        # … and each node's key is in the slot of its hash tag, the node name.
        assert cluster.keyslot(f"gpubot:ledger:{{{node}}}") == cluster.keyslot(node)
        (stored,), _ = led.read(node, now=NOW)
        assert stored.witnesses == ("device-plugin", "alert")
    assert set(led.nodes()) == set(nodes)


def test_concurrent_writers_on_a_cluster_write_once(cluster: RedisCluster) -> None:
    added: list[int] = []
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            led = Ledger(
                RedisBackend(
                    RedisCluster(
                        host=cluster.get_default_node().host,
                        port=cluster.get_default_node().port,
                        decode_responses=True,
                    )
                ),
                90,
            )
            ev = Event("gpu-race", "xid", NOW + i, gpu="GPU-9", xid=48, source=f"walk-{i}")
            added.append(led.record("gpu-race", [ev], now=NOW))
        except BaseException as err:  # reported below: a thread's failure must fail the test
            errors.append(err)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    (stored,), _ = Ledger(RedisBackend(cluster), 90).read("gpu-race", now=NOW)
    assert sum(added) == 1 and len(stored.witnesses) == 6
