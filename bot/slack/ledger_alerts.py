"""Alerts write the ledger: a firing alert that names an Xid (dcgm-exporter's `xid`/`err_code`
labels, `UUID`) on a node is an `xid` entry at its `startsAt`, beside the incident it opens.

A Receiver (bot/slack/alert_webhook.py) around the alert service, so the service itself is
unchanged. The entry is written off the request path; the same Xid already seen by a walk
(the plugin's line minutes earlier) is that entry, with the alert as one more witness.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from bot.ledger.service import alert_event
from bot.ledger.store import Ledger, LedgerUnavailable
from bot.slack.alert_webhook import Receiver
from handlers.alert_payload import AlertBatch
from layers.facts.ledgerevents import Event, parse_time

log = logging.getLogger("gpubot.ledger")
NODE_LABELS = ("node", "kubernetes_node", "Hostname", "hostname")


class LedgerReceiver:
    """A transparent proxy of the alert service: what it does not define itself (the service's
    clock, its settings) is the service's, read and set alike."""

    __slots__ = ("inner", "ledger", "submit")

    def __init__(self, inner: Receiver, ledger: Ledger, submit: Callable[..., None]) -> None:
        self.inner = inner
        self.ledger = ledger
        self.submit = submit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in LedgerReceiver.__slots__:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def receive(self, batch: AlertBatch) -> list[str]:
        behind = self.inner.receive(batch)  # the incident first: the ledger never delays or fails it
        events = []
        for alert in batch.alerts:
            node = next((alert.labels[k] for k in NODE_LABELS if alert.labels.get(k)), "")
            at = parse_time(alert.starts_at)
            ev = alert_event(dict(alert.labels), at, node) if alert.firing and node and at else None
            if ev is not None:
                events.append(ev)
        if events:
            self.submit(f"ledger of {len(events)} Xid alert(s)", self.record, events)
        return behind

    def record(self, events: list[Event]) -> None:
        for node in sorted({e.node for e in events}):
            try:
                self.ledger.record(node, [e for e in events if e.node == node])
            except LedgerUnavailable as err:
                log.warning("Xid alerts on %s not written to the ledger: %s", node, err)

    def catch_up(self, key: str) -> None:
        self.inner.catch_up(key)
