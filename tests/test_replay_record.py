"""The gateway's Slack replay record behind Sentinel or a Redis Cluster: inside the ack's budget."""

from __future__ import annotations

import threading
import time
from contextlib import AbstractContextManager, nullcontext

import pytest

from bot.slack.replay_record import BoundedReplayRecord
from handlers.ports import JSONValue, StateUnavailable


class StuckStore:
    """A store whose set-if-absent waits for `release` (a Redis switching master), counting calls."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0
        self.kept: dict[str, JSONValue] = {}

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        self.calls += 1
        self.release.wait(10)
        fresh = key not in self.kept
        self.kept.setdefault(key, value)
        return fresh

    def get(self, key: str) -> JSONValue | None:
        return self.kept.get(key)

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        self.kept[key] = value

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        return key in self.kept

    def delete(self, key: str) -> None:
        self.kept.pop(key, None)

    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> AbstractContextManager[None]:
        return nullcontext()

    def ping(self) -> bool:
        return True


def test_a_record_redis_does_not_answer_is_skipped_within_its_budget_and_nothing_piles_up() -> None:
    inner = StuckStore()
    record = BoundedReplayRecord(inner, budget_s=0.2, workers=2)
    try:
        started = time.monotonic()
        for i in range(10):
            with pytest.raises(StateUnavailable):
                record.set_if_absent(f"seen:{i}", 1, 60)
        assert time.monotonic() - started < 3.0  # each within its 0.2 s, or at once when all slots wait
        inner.release.set()
        time.sleep(0.3)
        assert inner.calls == 2  # only as many as slots reached the stuck Redis: the rest never queued
        assert record.set_if_absent("seen:new", 1, 60) is True  # Redis answers again: recorded as ever
        assert record.set_if_absent("seen:new", 1, 60) is False  # and a replay is seen
    finally:
        inner.release.set()
        record.shutdown()
