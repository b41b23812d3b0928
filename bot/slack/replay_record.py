"""The state store as the Slack gate uses it: the replay record kept inside the ack's time.

bot/slack/gate.py records every request's ids (set-if-absent) before Bolt runs
it, and skips the check when the store is down. On a Redis switching master,
or a stalled one (SIGSTOP, a full disk), that record does not fail, it waits
(a socket timeout, retries), and the ack comes after it: 5 s in one process,
4.4 s on a gateway, past Slack's 3 s. So here the record gets `budget_s`; past
it the check is skipped as for a store that is down (the write still lands when
Redis answers, recording the request as it should). Every other call goes
straight to the store. Every role's gate uses it (bot/slack/transport.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractContextManager
from typing import Any

from bot.slack.flood import count_in
from handlers.ports import JSONValue, StateStore, StateUnavailable

RECORD_BUDGET_S = 0.4


class BoundedReplayRecord:
    """A StateStore whose `set_if_absent` answers within `budget_s` or raises StateUnavailable."""

    def __init__(self, inner: StateStore, budget_s: float = RECORD_BUDGET_S, workers: int = 16) -> None:
        self.inner = inner
        self.budget_s = budget_s
        # Bounded: a Redis that never answers keeps at most `workers` threads, not one per request.
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpubot-replay")
        self._slots = threading.BoundedSemaphore(workers)

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        return bool(self._bounded(self.inner.set_if_absent, key, value, ttl_s))

    def count(self, key: str, window_s: float) -> tuple[int, float]:
        """The store's `count` (bot/slack/flood.py), within the budget."""
        got: tuple[int, float] = self._bounded(count_in, self.inner, key, window_s)
        return got

    def peek(self, key: str) -> JSONValue | None:
        """`get`, within the budget."""
        return self._bounded(self.inner.get, key)  # type: ignore[no-any-return]

    def _bounded(self, fn: Callable[..., Any], *args: Any) -> Any:
        # Calls still waiting on Redis take a slot each: when all are taken, none is queued behind
        # them (a Redis that never answers would grow that queue with every request).
        deadline = time.monotonic() + self.budget_s
        if not self._slots.acquire(timeout=self.budget_s):
            raise StateUnavailable("Redis has not answered the last requests' records yet")
        fut = self._pool.submit(self._call, fn, *args)
        try:
            return fut.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            raise StateUnavailable(f"Redis did not record the request within {self.budget_s:g} s") from None

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        finally:
            self._slots.release()

    def get(self, key: str) -> JSONValue | None:
        return self.inner.get(key)

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        self.inner.set(key, value, ttl_s)

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        return self.inner.extend(key, value, ttl_s)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> AbstractContextManager[None]:
        return self.inner.lock(name, timeout_s, wait_s)

    def ping(self) -> bool:
        return self.inner.ping()

    def close(self) -> None:
        self.shutdown()
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
