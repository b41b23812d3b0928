"""Leases: short claims that live only while their work runs.

A walk's layer claim, a click's `walk_all` claim: a replica or an agent that
is SIGKILLed mid-walk must not hold them for minutes, or the survivor that
takes the work over (a click on another replica, the agent that claims the
dead one's stream entry) finds the layer "taken" by nobody. So every claim is
short (`lease_s`: at most 30 s, below an agent's claim-idle time) and renewed
every third of that while the work that took it runs; when the work ends (or
its process dies), renewal stops and the claim expires on its own. A claim
that its work released, or that expired and was taken by another holder, is
left alone: renewal compares the value first (StateStore.extend).

The work a claim belongs to is the agent's entry (`work()`), or, in the
single process, the thread that took it, for at most `MAX_HOLD_S` (a claim
its taker never releases, say `diagnose` once the walk's root is posted, then
simply expires).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from bot.ops.config import Config
from handlers.ports import JSONValue, StateStore, StateUnavailable
from handlers.walkclaims import CLAIM_S

log = logging.getLogger("gpubot.leases")


def lease_of(cfg: Config) -> float:
    """How long a claim or lock of this process lasts unrenewed: the walk's CLAIM_S, shorter where
    GPUBOT_CLAIM_IDLE_SECONDS is (an agent's leases lapse well before its entries are taken over)."""
    return min(CLAIM_S, cfg.claim_idle_s / 2)


MAX_HOLD_S = 15 * 60.0  # a claim taken outside any work() is renewed this long at most


class LeaseKeeper:
    """The leases of the work running on this agent, renewed by `renew()` (the agent's ticker)."""

    def __init__(self, store: StateStore, lease_s: float) -> None:
        self.store = store
        self.lease_s = lease_s
        self._local = threading.local()
        self._held: dict[int, dict[str, JSONValue]] = {}  # work token -> key -> value
        self._loose: dict[str, tuple[JSONValue, float]] = {}  # taken outside work(): key -> (value, until)
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
        with self._lock:
            if token is None:  # the single process's click or walk: its thread holds it, for a while
                self._loose[key] = (value, time.monotonic() + MAX_HOLD_S)
            elif token in self._held:
                self._held[token][key] = value

    def held(self) -> int:
        with self._lock:
            return sum(len(v) for v in self._held.values()) + len(self._loose)

    def renew(self) -> None:
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (_, until) in self._loose.items() if until <= now]:
                del self._loose[key]
            items = [(t, k, v) for t, held in self._held.items() for k, v in held.items()]
            items += [(0, k, v) for k, (v, _) in self._loose.items()]
        for token, key, value in items:
            try:
                still = self.store.extend(key, value, self.lease_s)
            except StateUnavailable as err:
                log.warning("lease %s not renewed: %s", key, err)
                continue
            if not still:  # released, or expired and taken by another holder
                with self._lock:
                    if token:
                        self._held.get(token, {}).pop(key, None)
                    else:
                        self._loose.pop(key, None)

    def forget(self, key: str) -> None:
        """Released by its holder: no more renewal."""
        with self._lock:
            self._loose.pop(key, None)
            for held in self._held.values():
                held.pop(key, None)

    def start(self) -> threading.Thread:
        """Renew on a daemon thread every third of the lease (the single process; an agent's ticker
        calls `renew` itself)."""

        def loop() -> None:
            while True:
                time.sleep(self.lease_s / 3)
                try:
                    self.renew()
                except Exception:  # never let renewal die: every claim would lapse under running work
                    log.exception("lease renewal failed")

        thread = threading.Thread(target=loop, name="gpubot-lease-renewer", daemon=True)
        thread.start()
        return thread


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
        self.keeper.forget(key)

    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> AbstractContextManager[None]:
        return self.inner.lock(name, timeout_s, wait_s)

    def ping(self) -> bool:
        return self.inner.ping()
