"""Keeping a lock alive while its holder works, and only then.

A Redis lock is a key with a short expiry (`LOCK_LEASE_S`). The holder's
process renews it every third of that on one daemon thread per store, for as
long as the `with` block runs (and never past the lock's own `timeout_s`).
A holder killed at any point (SIGKILL included: no `finally` runs) stops
renewing, so the lock frees itself within the lease and whoever waits on it
goes on; a holder that merely runs long keeps it. Renewal compares the token
first, so a lease that expired and was taken by another holder is left alone.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

log = logging.getLogger("gpubot.state")

LOCK_LEASE_S = 30.0  # the spec's bound is 60 s: a dead holder stalls its subject at most this long


class Renewable(Protocol):
    def renew_raw(self, key: str, token: str, lease_s: float) -> bool:
        """Renew `key` for `lease_s` while it still holds `token`; True when renewed."""
        ...


class LockRenewer:
    """The held locks of one store, renewed on a daemon thread started with the first lock."""

    def __init__(self, store: Renewable) -> None:
        self._store = store
        self._held: dict[tuple[str, str], tuple[float, float]] = {}  # (key, token) -> (lease, until)
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def hold(self, key: str, token: str, lease_s: float, until: float) -> None:
        with self._cond:
            self._held[(key, token)] = (lease_s, until)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="gpubot-lock-renewer", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def drop(self, key: str, token: str) -> None:
        with self._cond:
            self._held.pop((key, token), None)

    def held(self) -> int:
        with self._cond:
            return len(self._held)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._held:
                    self._cond.wait()
                every = min(lease for lease, _ in self._held.values()) / 3
                self._cond.wait(timeout=every)
                now = time.monotonic()
                due = [(k, t, lease) for (k, t), (lease, until) in self._held.items() if until > now]
                for (k, t), (_, until) in list(self._held.items()):
                    if until <= now:  # past the lock's own timeout: it expires as it always did
                        del self._held[(k, t)]
            for key, token, lease in due:
                try:
                    if not self._store.renew_raw(key, token, lease):
                        with self._cond:  # released meanwhile (the usual case), or lapsed while held
                            lapsed = self._held.pop((key, token), None) is not None
                        if lapsed:
                            log.warning("lock %s expired while held: another holder may have it", key)
                except Exception as err:  # Redis down: the lease may lapse, the work goes on
                    log.warning("lock %s not renewed: %s", key, err)
