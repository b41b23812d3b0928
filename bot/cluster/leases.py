"""Leases: short claims that live only while their work runs.

A walk's layer claim, a click's `walk_all` claim: in one process they may last
minutes, since nobody else could take them over anyway. An agent that dies
mid-walk must not hold them that long: the entry it was working on is taken
over by another agent after the claim-idle time, and the walk must go on at
once. So an agent's claims are short (`lease_s`, below the claim-idle time)
and renewed every third of that while the work that took them runs; when the
work ends (or the agent dies), renewal stops and they expire on their own.
A claim that its work overwrote ("done") or released is left alone: renewal
compares the value first (StateStore.extend).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from handlers.ports import JSONValue, StateStore, StateUnavailable

log = logging.getLogger("gpubot.leases")


class LeaseKeeper:
    """The leases of the work running on this agent, renewed by `renew()` (the agent's ticker)."""

    def __init__(self, store: StateStore, lease_s: float) -> None:
        self.store = store
        self.lease_s = lease_s
        self._local = threading.local()
        self._held: dict[int, dict[str, JSONValue]] = {}  # work token -> key -> value
        self._lock = threading.Lock()
        self._tokens = iter(range(1, 1 << 62))

    @contextmanager
    def work(self) -> Iterator[None]:
        """Leases taken by this thread inside belong to this work; they stop being renewed after it."""
        with self._lock:
            token = next(self._tokens)
            self._held[token] = {}
        self._local.token = token
        try:
            yield
        finally:
            self._local.token = None
            with self._lock:
                self._held.pop(token, None)

    def hold(self, key: str, value: JSONValue) -> None:
        token = getattr(self._local, "token", None)
        if token is None:
            return  # taken outside any work (start-up): it simply expires
        with self._lock:
            if token in self._held:
                self._held[token][key] = value

    def held(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._held.values())

    def renew(self) -> None:
        with self._lock:
            items = [(t, k, v) for t, held in self._held.items() for k, v in held.items()]
        for token, key, value in items:
            try:
                still = self.store.extend(key, value, self.lease_s)
            except StateUnavailable as err:
                log.warning("lease %s not renewed: %s", key, err)
                continue
            if not still:  # done, released, or expired and taken by another agent
                with self._lock:
                    self._held.get(token, {}).pop(key, None)


class LeasingStore:
    """The agent's StateStore: a `set_if_absent` with a TTL no longer than the lease is a lease of the
    running work (WalkService's claims, at the agent's short claim_s), renewed while it runs."""

    def __init__(self, inner: StateStore, keeper: LeaseKeeper) -> None:
        self.inner = inner
        self.keeper = keeper

    def get(self, key: str) -> JSONValue | None:
        return self.inner.get(key)

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        self.inner.set(key, value, ttl_s)

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        stored = self.inner.set_if_absent(key, value, ttl_s)
        if stored and ttl_s <= self.keeper.lease_s:
            self.keeper.hold(key, value)
        return stored

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        return self.inner.extend(key, value, ttl_s)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> AbstractContextManager[None]:
        return self.inner.lock(name, timeout_s, wait_s)

    def ping(self) -> bool:
        return self.inner.ping()
