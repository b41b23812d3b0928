"""POST /alertmanager: Alertmanager's webhook → the alert service, answered before Slack is touched.

A route of bot/slack/httpserver.py, which has already refused bodies over 1 MiB
(413) and every malformed request. Every refusal here is free of side
effects: no GPUBOT_ALERT_TOKEN → no route (404); a wrong or missing bearer
token → 401; a body that is not an Alertmanager v4 payload → 400 saying what
is wrong. Then the alerts
are recorded in the state store (StateUnavailable → 503, and Alertmanager
sends the notification again) and the incidents Slack must catch up with go
to the bot's worker pool; the answer does not wait for Slack or the walks.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from bot.ops import metrics
from bot.slack.httpserver import Request, Response
from handlers.alert_payload import AlertBatch, PayloadError, parse_payload
from handlers.ports import StateUnavailable

log = logging.getLogger("gpubot.alertmanager")

PATH = "/alertmanager"


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

    def __init__(self, service: Receiver, token: str, submit: Callable[..., None]) -> None:
        self.service = service
        self.token = token
        self.submit = submit  # GpuBot.submit: the worker pool, failures logged

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
        try:
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
