"""Large notifications are answered at once and recorded off the request path, durably.

A notification of a few alerts is recorded inside the request, as it always
was (a state store that fails answers 503 and Alertmanager sends it again).
One of thousands (a rack's GPUs, a namespace of batch pods deleted since)
would hold Alertmanager's request for seconds of store round trips and
subject lookups, so past `INLINE_MAX` alerts the webhook only stores the
validated batch here (one write, then a small index), answers 200, and the
bot's pool records it (`run`): one namespace's pods listed once, fingerprints
looked up in one round trip (handlers/alerts.py). A store that fails while
storing still answers 503.

Exactly once across replicas and restarts: `run` claims the entry (a key with
a timeout) before it records it and deletes it after, so a second runner finds
nothing; a replica killed midway leaves the entry and its expiring claim, and
the stale sweep's timer (bot/slack/alert_sweeper.py) runs every entry older
than `ORPHAN_S` again. Recording a batch twice is harmless by design: the same
alerts again are Alertmanager's duplicate deliveries.
"""

from __future__ import annotations

import logging
import uuid
from typing import Protocol

from handlers.alert_payload import AlertBatch, PayloadError, batch_dict, batch_from_dict
from handlers.ports import StateStore

log = logging.getLogger("gpubot.alerts")

INLINE_MAX = 500  # alerts recorded inside the request; a larger notification goes through the inbox
ENTRY_TTL_S = 86400.0  # Alertmanager has sent it again long before: a day is more than enough
# A runner's hold on an entry (at most 60 s, as every lease: a killed holder stalls it no longer);
# recording 10,000 alerts takes seconds. One that outlives it may be recorded twice: harmless.
CLAIM_S = 60.0
ORPHAN_S = 60.0  # an entry older than this, unclaimed, was left by a replica that died


class Records(Protocol):
    """handlers/alerts.py's AlertService, as the inbox uses it."""

    @property
    def state(self) -> StateStore: ...

    @property
    def prefix(self) -> str: ...

    def clock(self) -> float: ...

    def receive(self, batch: AlertBatch) -> list[str]: ...

    def catch_up(self, key: str) -> None: ...


class AlertInbox:
    def __init__(self, service: Records, *, claim_s: float = CLAIM_S, orphan_s: float = ORPHAN_S) -> None:
        self.service = service
        self.claim_s = claim_s
        self.orphan_s = orphan_s

    @property
    def _index_key(self) -> str:
        return f"{self.service.prefix}inbox"

    def _entry_key(self, entry_id: str) -> str:
        return f"{self.service.prefix}inbox:{entry_id}"

    def put(self, batch: AlertBatch) -> str:
        """Keep the batch for `run`; its id. StateUnavailable when the store fails (→ 503)."""
        state = self.service.state
        entry_id = uuid.uuid4().hex[:16]
        state.set(self._entry_key(entry_id), batch_dict(batch), ENTRY_TTL_S)
        with state.lock(self._index_key, 10.0, wait_s=10.0):
            index: dict[str, float] = state.get(self._index_key) or {}
            index[entry_id] = self.service.clock()
            state.set(self._index_key, index, ENTRY_TTL_S)
        return entry_id

    def run(self, entry_id: str) -> None:
        """Record the entry's batch and bring Slack in line, unless another runner has it or had it."""
        state = self.service.state
        if not state.set_if_absent(f"{self._entry_key(entry_id)}:claim", 1, self.claim_s):
            return
        doc = state.get(self._entry_key(entry_id))
        keys: list[str] = []
        if doc is not None:
            try:
                keys = self.service.receive(batch_from_dict(doc))
            except PayloadError as err:  # checked before it was kept: a store that changed it
                log.error("inbox entry %s is not a payload any more, dropped: %s", entry_id, err)
        state.delete(self._entry_key(entry_id))
        with state.lock(self._index_key, 10.0, wait_s=10.0):
            index: dict[str, float] = state.get(self._index_key) or {}
            if index.pop(entry_id, None) is not None:
                state.set(self._index_key, index, ENTRY_TTL_S)
        for key in keys:
            self.service.catch_up(key)

    def orphans(self) -> list[str]:
        """Entries queued over `orphan_s` ago: their replica died, or was restarted, before `run`."""
        index: dict[str, float] = self.service.state.get(self._index_key) or {}
        now = self.service.clock()
        return [entry_id for entry_id, at in index.items() if now - float(at) > self.orphan_s]
