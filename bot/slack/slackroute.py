"""`POST /slack/events`: the signature first, on the raw bytes, then Bolt.

Nothing of a request is parsed, logged or handed to Bolt before its v0
signature (HMAC-SHA256 over `v0:<timestamp>:<body>` with the signing secret)
is checked and its timestamp is within five minutes: anything else gets a 401
and, at most, one rate-limited log line that says why (Bolt would log the
body and headers of a badly signed request; it never sees one). A signed body
that is not a Slack request Bolt can read (not UTF-8, not a JSON object) gets
a 400. The payload then passes the gate Socket Mode's envelopes pass too
(bot/slack/gate.py: its shape, and replays, here also by signature) before
Bolt dispatches it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from slack_bolt.request import BoltRequest

from bot.slack.gate import MAX_SKEW_S, Refused, SlackGate
from bot.slack.httpserver import RateLimitedLog, Request, Response

log = logging.getLogger("gpubot.slack.events")

EVENTS_PATH = "/slack/events"
_UNAUTHORIZED = Response(401, b"invalid request signature\n", {"Content-Type": ["text/plain; charset=utf-8"]})


def signature_problem(secret: str, headers: dict[str, str] | Any, body: bytes, now: float) -> str | None:
    """Why this request is not Slack's (no or bad signature, stale timestamp), or None when it is."""
    ts = str(headers.get("x-slack-request-timestamp") or "")
    sig = str(headers.get("x-slack-signature") or "")
    if not ts or not sig:
        return "no signature"
    if not ts.isascii() or not ts.isdigit() or len(ts) > 12:
        return "malformed timestamp"
    if abs(now - int(ts)) > MAX_SKEW_S:
        return "stale timestamp"
    if len(sig) != 67 or not sig.startswith("v0="):
        return "malformed signature"
    expected = hmac.new(secret.encode(), b"v0:" + ts.encode() + b":" + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest("v0=" + expected, sig):
        return "bad signature"
    return None


def slack_payload(text: str, content_type: str) -> dict[str, Any] | None:
    """The request as Bolt will read it (a JSON object), or None when it is no such thing."""
    try:
        if content_type == "application/json" or text.startswith("{"):
            payload = json.loads(text)
        else:
            form = dict(parse_qsl(text, keep_blank_values=True))
            payload = json.loads(form["payload"]) if "payload" in form else form
    except ValueError:
        return None
    return payload if isinstance(payload, dict) else None


class SlackEvents:
    """The route: the signature, the body read as a payload, then the gate (bot/slack/gate.py)."""

    def __init__(self, gate: SlackGate, signing_secret: str, clock: Callable[[], float] = time.time) -> None:
        self.gate = gate
        self.secret = signing_secret
        self.clock = clock
        self.refusals = RateLimitedLog(log)

    def __call__(self, request: Request) -> Response:
        why = signature_problem(self.secret, request.headers, request.body, self.clock())
        if why is not None:
            self.refusals.note("refused unsigned or stale Slack requests", why)
            return _UNAUTHORIZED
        try:
            text = request.body.decode("utf-8")
        except UnicodeDecodeError:
            return _answer(self.gate.unreadable("not UTF-8"))
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        payload = slack_payload(text, content_type)
        if payload is None:
            return _answer(self.gate.unreadable("not a JSON object or form"))
        headers: dict[str, Any] = dict(request.headers)
        answer = self.gate.dispatch(
            payload,
            ["sig:" + request.headers["x-slack-signature"][3:]],
            lambda: BoltRequest(body=text, query=request.query, headers=headers),
        )
        if isinstance(answer, Refused):
            return _answer(answer)
        return Response(answer.status, answer.body.encode(), answer.headers)


def _answer(refused: Refused) -> Response:
    if refused.reply:  # a slash command's ephemeral answer, as Bolt's ack would give it
        body = json.dumps({"text": refused.reply, "response_type": "ephemeral"}).encode()
        return Response(refused.status, body, {"Content-Type": ["application/json"]})
    return Response.text(refused.status, refused.text) if refused.text else Response(refused.status)
