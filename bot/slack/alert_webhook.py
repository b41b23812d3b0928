"""POST /alertmanager: Alertmanager's webhook → the alert service, answered before Slack is touched.

A route of bot/slack/httpserver.py, which has already refused bodies over
GPUBOT_ALERT_MAX_BODY_MIB (default 16 MiB, this path only: Alertmanager's
notification of a group of 3,000 alerts of ~600 bytes is 1.8 MB; answered 413)
and every malformed request; those refusals are counted here too
(`gpubot_alert_webhooks_total{code}`, through the server's `on_refusal`).
Every refusal here is free of side
effects: no GPUBOT_ALERT_TOKEN → no route (404); a wrong or missing bearer
token → 401; a body that is not an Alertmanager v4 payload → 400 saying what
is wrong. Then the alerts
are recorded in the state store (StateUnavailable → 503, and Alertmanager
sends the notification again) and the incidents Slack must catch up with go
to the bot's worker pool; the answer does not wait for Slack or the walks. A
notification of more than INLINE_MAX alerts is only stored as it is and
recorded on the pool (handlers/alert_inbox.py): Alertmanager is answered in
milliseconds, not after 10,000 alerts' lookups.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Protocol

from bot.ops import metrics
from bot.slack.httpserver import Limits, Request, Response
from handlers.alert_inbox import INLINE_MAX
from handlers.alert_payload import AlertBatch, PayloadError, parse_payload
from handlers.ports import StateUnavailable

log = logging.getLogger("gpubot.alertmanager")

PATH = "/alertmanager"
MAX_BODY_MIB = 16  # the default of GPUBOT_ALERT_MAX_BODY_MIB


def _answer(status: int, body: dict[str, Any], **headers: str) -> Response:
    return Response(
        status,
        (json.dumps(body) + "\n").encode(),
        {"Content-Type": ["application/json"], **{k: [v] for k, v in headers.items()}},
    )


def authorized(header: str | None, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time."""
    scheme, _, given = (header or "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


class Receiver(Protocol):
    """handlers/alerts.py's AlertService, or a gateway's forwarder (bot/cluster/alert_forward.py)."""

    def receive(self, batch: AlertBatch) -> list[str]: ...

    def catch_up(self, key: str) -> None: ...


class AlertWebhook:
    """The route (bot/slack/httpserver.py has read the body within its limits): a request → its answer."""

    def __init__(
        self, service: Receiver, token: str, submit: Callable[..., None], *, max_body_mib: int = MAX_BODY_MIB
    ) -> None:
        self.service = service
        self.token = token
        self.submit = submit  # GpuBot.submit: the worker pool, failures logged
        self.max_body = max_body_mib << 20

    def limits(self, limits: Limits) -> Limits:
        """The server's limits with this path's body limit, and its refusals counted as webhooks."""
        before = limits.body_limit

        def body_limit(path: str, headers: Mapping[str, str]) -> int | None:
            # Only Alertmanager (its bearer token) may send megabytes: anyone else keeps the 1 MiB.
            if path == PATH and authorized(headers.get("authorization"), self.token):
                return self.max_body
            return before(path, headers) if before is not None else None

        return replace(limits, body_limit=body_limit, on_refusal=_chain(limits.on_refusal))

    def __call__(self, request: Request) -> Response:
        started = time.perf_counter()
        answer = self._answer(request)
        metrics.record_alert_webhook(answer.status, time.perf_counter() - started)
        return answer

    def _answer(self, request: Request) -> Response:
        if not authorized(request.headers.get("authorization"), self.token):
            return _answer(401, {"error": "missing or wrong bearer token"}, **{"WWW-Authenticate": "Bearer"})
        try:
            batch = parse_payload(request.body)
        except PayloadError as err:
            log.warning("POST %s refused: %s", PATH, err)
            return _answer(400, {"error": f"not an Alertmanager webhook payload: {err}"})
        inbox = getattr(self.service, "inbox", None)
        try:
            if inbox is not None and len(batch.alerts) > INLINE_MAX:
                # Thousands of alerts: kept as they are, answered now, recorded on the pool.
                entry = inbox.put(batch)
                self.submit(f"{len(batch.alerts)} alerts of inbox entry {entry}", inbox.run, entry)
                return _answer(200, {"alerts": len(batch.alerts), "queued": entry})
            behind = self.service.receive(batch)
        except StateUnavailable as err:
            log.error(
                "POST %s: state store unreachable, nothing recorded (Alertmanager retries): %s", PATH, err
            )
            return _answer(
                503, {"error": "the bot's state store is unreachable; send again"}, **{"Retry-After": "10"}
            )
        for key in behind:
            self.submit(f"alert incident of {key}", self.service.catch_up, key)
        return _answer(200, {"alerts": len(batch.alerts), "incidents_to_post": len(behind)})


def _chain(before: Callable[[str, int], None] | None) -> Callable[[str, int], None]:
    def refused(path: str, status: int) -> None:
        if path == PATH:
            metrics.record_alert_webhook(status, 0.0)
        if before is not None:
            before(path, status)

    return refused
