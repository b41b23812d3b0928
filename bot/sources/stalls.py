"""Reads that timed out a moment ago: not sent again until a few timeouts have passed.

A backend that accepts and never answers would otherwise cost a walk one timeout per read
of the same kind (four pod logs on a node whose kubelet is gone, two event lists, Prometheus'
layer 4 and layer 5 batches). Writes are never held back: callers ask only for reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

# After a timeout, the same kind of read fails at once for this many timeouts.
STALL_MEMORY_TIMEOUTS = 3


class StallMemory:
    """Keys whose last read timed out, each until `STALL_MEMORY_TIMEOUTS` timeouts later."""

    def __init__(self, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._hold_s = STALL_MEMORY_TIMEOUTS * timeout_s
        self._clock = clock
        self._until: dict[Hashable, float] = {}
        self._lock = threading.Lock()

    def remember(self, key: Hashable) -> None:
        with self._lock:
            self._until[key] = self._clock() + self._hold_s

    def stalled(self, key: Hashable) -> bool:
        with self._lock:
            return self._until.get(key, 0.0) > self._clock()

    def any(self) -> bool:
        """Whether some key is held (the lapsed ones are dropped): a cheap test before a look-up."""
        now = self._clock()
        with self._lock:
            self._until = {k: t for k, t in self._until.items() if t > now}
            return bool(self._until)
