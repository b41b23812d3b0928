"""`POST /slack/events`: the signature first, on the raw bytes, then Bolt.

Nothing of a request is parsed, logged or handed to Bolt before its v0
signature (HMAC-SHA256 over `v0:<timestamp>:<body>` with the signing secret)
is checked and its timestamp is within five minutes: anything else gets a 401
and, at most, one rate-limited log line that says why (Bolt would log the
body and headers of a badly signed request; it never sees one). A signed body
that is not a Slack request Bolt can read (not UTF-8, not a JSON object) gets
a 400. A signed request seen before (the same signature, or the same trigger
or event id, e.g. Slack's `X-Slack-Retry-Num` redeliveries) within the replay
window is acknowledged and not run again; the record lives in the state
store, so it holds across replicas.
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

from slack_bolt import App
from slack_bolt.request import BoltRequest

from bot.slack.httpserver import RateLimitedLog, Request, Response
from handlers.clicks import click_problem, clicker
from handlers.ports import StateStore, StateUnavailable

log = logging.getLogger("gpubot.slack.events")

EVENTS_PATH = "/slack/events"
MAX_SKEW_S = 300  # Slack's rule: a timestamp more than five minutes away is a replay
# A replay is only possible while its timestamp is fresh; the record outlives that window.
REPLAY_S = 2 * MAX_SKEW_S
_SEEN = "slack:seen:{}"
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


# What Bolt reads as objects when it builds a request's context (slack_bolt/request/internals.py);
# `user` and `channel` may also be ids (Events API).
_OBJECTS = (
    "team",
    "enterprise",
    "container",
    "message",
    "view",
    "event",
    "item",
    "previous_message",
    "function_data",
    "assistant_thread",
)
_IDS_OR_OBJECTS = ("user", "channel")


def envelope_problem(payload: dict[str, Any], depth: int = 0) -> str | None:
    """Why Bolt could not read this payload's envelope (or it is no click of ours), or None."""
    if payload.get("type") is not None and not isinstance(payload["type"], str):
        return "its type is not text"
    for key in _OBJECTS:
        if payload.get(key) is not None and not isinstance(payload[key], dict):
            return f"its {key} is not an object"
    for key in _IDS_OR_OBJECTS:
        if payload.get(key) is not None and not isinstance(payload[key], str | dict):
            return f"its {key} is neither an id nor an object"
    auths = payload.get("authorizations")
    if auths is not None and not (isinstance(auths, list) and all(isinstance(a, dict) for a in auths)):
        return "its authorizations are not a list of objects"
    for key in ("event", "message", "previous_message", "item", "assistant_thread"):
        inner = payload.get(key)
        if depth < 2 and isinstance(inner, dict) and (why := envelope_problem(inner, depth + 1)):
            return f"{key}: {why}"
    if depth == 0 and payload.get("type") == "block_actions":
        return click_problem(payload)
    return None


def _replay_ids(payload: dict[str, Any]) -> list[str]:
    """What identifies one Slack request across its redeliveries."""
    ids = []
    for key in ("trigger_id", "event_id"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            ids.append(f"{key}:{value[:200]}")
    return ids


class SlackEvents:
    """The route: check, de-duplicate, then `app.dispatch`."""

    def __init__(
        self,
        app: App,
        signing_secret: str,
        state: StateStore,
        clock: Callable[[], float] = time.time,
        tell: Callable[[str, str, str], None] | None = None,
    ) -> None:
        self.app = app
        self.tell = tell  # (channel, user, text): an ephemeral answer, off the request path
        self.secret = signing_secret
        self.state = state
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
            return self._unreadable("not UTF-8")
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        payload = slack_payload(text, content_type)
        if payload is None:
            return self._unreadable("not a JSON object or form")
        why = envelope_problem(payload)
        if why is not None:
            return self._refuse_click(payload, why)
        sig = request.headers["x-slack-signature"]
        if self._seen(["sig:" + sig[3:], *_replay_ids(payload)]):
            self.refusals.note("acknowledged replayed Slack requests without running them", "seen before")
            return Response(200)
        headers: dict[str, Any] = dict(request.headers)
        try:
            bolt_request = BoltRequest(body=text, query=request.query, headers=headers)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            return self._unreadable("a shape Bolt cannot read")
        answer = self.app.dispatch(bolt_request)
        return Response(answer.status, answer.body.encode(), answer.headers)

    def _refuse_click(self, payload: dict[str, Any], why: str) -> Response:
        """A signed payload of the wrong shape: nothing runs; its clicker, when known, is told."""
        self.refusals.note("refused signed Slack payloads of the wrong shape", why)
        who = clicker(payload)
        if who is None or self.tell is None:
            return Response.text(400, f"unreadable Slack request: {why}\n")
        self.tell(*who, f":warning: this click could not be read ({why}), so nothing was done.")
        return Response(200)

    def _unreadable(self, why: str) -> Response:
        self.refusals.note("refused signed but unreadable Slack requests", why)
        return Response.text(400, f"unreadable Slack request: {why}\n")

    def _seen(self, ids: list[str]) -> bool:
        """Record each id; True when any was already recorded (the request is a replay)."""
        seen = False
        for one in ids:
            try:
                fresh = self.state.set_if_absent(_SEEN.format(one), 1, REPLAY_S)
            except StateUnavailable as err:
                # The walk itself will say the store is down; refusing here would hide that.
                log.warning("replay check skipped, state store unreachable: %s", err)
                return False
            seen = seen or not fresh
        return seen
