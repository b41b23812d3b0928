"""The stale sweep's timer: every replica ticks, one of them sweeps (handlers/alerts.py decides).

Incidents whose resolve never arrives close as stale after GPUBOT_ALERT_STALE_HOURS
(shared/spec/interfaces.md, "Incidents end"). Each replica's timer wakes every
`sweep_every_s` (an eighth of the stale time, at most 10 minutes); the first
replica to claim the period's key in the state store sweeps, the others skip,
so a restart or a dozen replicas change nothing. Each tick also runs the
large notifications a replica stored and died before recording
(handlers/alert_inbox.py). The sweep and the root
updates run on the bot's worker pool, like a webhook's Slack work. A state
store that is down is logged and tried again at the next tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from handlers.ports import StateUnavailable

log = logging.getLogger("gpubot.alerts")


class Inbox(Protocol):
    def orphans(self) -> list[str]: ...

    def run(self, entry_id: str) -> None: ...


class Sweeps(Protocol):
    @property
    def sweep_every_s(self) -> float: ...

    @property
    def inbox(self) -> Inbox: ...

    def sweep_due(self) -> bool: ...

    def sweep_and_catch_up(self) -> None: ...


class AlertSweeper:
    """A daemon thread; `stop()` ends it (GpuBot.shutdown)."""

    def __init__(self, service: Sweeps, submit: Callable[..., Any]) -> None:
        self.service = service
        self.submit = submit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpubot-alert-sweep", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.service.sweep_every_s):
            self.tick()

    def tick(self) -> None:
        try:
            due = self.service.sweep_due()
            left = self.service.inbox.orphans()
        except StateUnavailable as err:
            log.warning("stale sweep skipped, the state store failed: %s", err)
            return
        if due:
            self.submit("stale incident sweep", self.service.sweep_and_catch_up)
        for entry in left:  # large notifications a replica kept and died before recording
            self.submit(f"inbox entry {entry} left by another replica", self.service.inbox.run, entry)

    def stop(self) -> None:
        self._stop.set()
