"""The state stores: process memory, and a REAL redis-server started by the fixture."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from bot.slack.state import SINGLE_REPLICA_NOTE, MemoryState, RedisState, open_state
from handlers.ports import LockNotAcquired, StateStore, StateUnavailable
from tests.services import RedisServer, free_port


@pytest.fixture(params=["memory", "redis"])
def store(request: pytest.FixtureRequest) -> Iterator[StateStore]:
    if request.param == "memory":
        yield MemoryState()
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    redis_store = RedisState(server.url, prefix=f"test-{uuid.uuid4().hex[:8]}:")
    yield redis_store
    redis_store.close()


def test_json_values_round_trip(store: StateStore) -> None:
    value = {"walk": "w-1", "layers": [1, 5], "node": "gpu-7", "ok": True, "none": None}
    store.set("walk:w-1", value, ttl_s=60)
    assert store.get("walk:w-1") == value
    assert store.get("walk:missing") is None
    store.delete("walk:w-1")
    assert store.get("walk:w-1") is None


def test_ttl_is_honoured(store: StateStore) -> None:
    store.set("short", 1, ttl_s=0.2)
    store.set("long", 2, ttl_s=60)
    assert store.get("short") == 1
    time.sleep(0.3)
    assert store.get("short") is None and store.get("long") == 2


def test_set_if_absent_only_once(store: StateStore) -> None:
    assert store.set_if_absent("digest:done:2026-11-29", {"by": "a"}, ttl_s=60)
    assert not store.set_if_absent("digest:done:2026-11-29", {"by": "b"}, ttl_s=60)
    assert store.get("digest:done:2026-11-29") == {"by": "a"}
    store.set("gone", 1, ttl_s=0.1)
    time.sleep(0.2)
    assert store.set_if_absent("gone", 2, ttl_s=60)  # an expired key counts as absent


def test_extend_renews_only_a_lease_still_held(store: StateStore) -> None:
    assert store.set_if_absent("lease", {"by": "agent-a"}, ttl_s=0.3)
    assert store.extend("lease", {"by": "agent-a"}, ttl_s=60)
    time.sleep(0.4)
    assert store.get("lease") == {"by": "agent-a"}  # renewed past its first expiry
    assert not store.extend("lease", {"by": "agent-b"}, ttl_s=60)  # someone else's value: not renewed
    store.set("lease", "done", ttl_s=60)
    assert not store.extend("lease", {"by": "agent-a"}, ttl_s=0.01)  # the work finished: left alone
    assert store.get("lease") == "done"
    assert not store.extend("absent", 1, ttl_s=60)
    assert store.get("absent") is None


def test_lock_excludes_and_a_waiter_gets_it_after_release(store: StateStore) -> None:
    order: list[str] = []
    inside = threading.Event()

    def holder() -> None:
        with store.lock("digest", timeout_s=5):
            order.append("a in")
            inside.set()
            time.sleep(0.3)
            order.append("a out")

    t = threading.Thread(target=holder)
    t.start()
    inside.wait(5)
    with pytest.raises(LockNotAcquired), store.lock("digest", timeout_s=5, wait_s=0.05):
        order.append("never")
    with store.lock("digest", timeout_s=5, wait_s=5):
        order.append("b in")
    t.join()
    assert order == ["a in", "a out", "b in"]


def test_a_dead_holders_lock_expires(store: StateStore) -> None:
    cm = store.lock("digest", timeout_s=0.2)
    cm.__enter__()  # never released, as by a replica that died
    started = time.monotonic()
    with store.lock("digest", timeout_s=5, wait_s=3):
        waited = time.monotonic() - started
    assert 0.1 < waited < 2.5


def test_ping(store: StateStore) -> None:
    assert store.ping()


def test_memory_state_prunes_expired_keys() -> None:
    now = [0.0]
    mem = MemoryState(clock=lambda: now[0], prune_every=10)
    for i in range(50):
        mem.set(f"old{i}", i, ttl_s=1)
    now[0] = 2.0
    for i in range(10):
        mem.set(f"new{i}", i, ttl_s=60)
    assert len(mem._data) == 10 and len(mem) == 10


def test_redis_down_is_state_unavailable_without_the_password() -> None:
    store = RedisState(f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0", timeout_s=0.5)
    with pytest.raises(StateUnavailable) as err:
        store.get("walk:w-1")
    message = str(err.value)
    assert "s3cret-pw" not in message and "127.0.0.1" in message and "\n" not in message
    assert "s3cret-pw" not in repr(store)
    with pytest.raises(StateUnavailable):
        open_state(f"redis://:s3cret-pw@127.0.0.1:{free_port()}/0")


def test_open_state_without_url_says_single_replica(redis_server: RedisServer) -> None:
    store, note = open_state(None)
    assert isinstance(store, MemoryState) and note == SINGLE_REPLICA_NOTE and "single replica" in note
    store, note = open_state(redis_server.url)
    assert isinstance(store, RedisState) and "Redis at redis://127.0.0.1" in note
