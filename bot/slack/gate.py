"""What every Slack request passes before Bolt, whichever transport brought it.

HTTP (bot/slack/slackroute.py, after the signature) and Socket Mode
(bot/slack/socketmode.py, after the WebSocket envelope) both hand the payload
here. The gate runs before Bolt builds its request, because building it reads
the envelope (a `channel` that is a number or `authorizations` that are text
make Bolt raise before any middleware could look):

1. the envelope's shape (`envelope_problem`): a payload Bolt could not read, or
   a click that is no click of ours, runs nothing; its clicker, when known, is
   told, and the refusal is logged once per window, never with the payload;
2. replays: a request seen before within the replay window (the same envelope,
   signature, trigger id, event id or click `action_ts`, e.g. Slack's
   redeliveries) is acknowledged and not run again. The record lives in the
   state store, so it holds across replicas and across both transports.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt import App
from slack_bolt.request import BoltRequest
from slack_bolt.response import BoltResponse

from bot.slack.flood import FloodGuard
from bot.slack.httpserver import RateLimitedLog
from handlers.clicks import click_problem, clicker
from handlers.ports import StateStore, StateUnavailable

log = logging.getLogger("gpubot.slack.events")

MAX_SKEW_S = 300  # Slack's rule: a timestamp more than five minutes away is a replay
# A replay is only possible while its timestamp is fresh; the record outlives that window.
REPLAY_S = 2 * MAX_SKEW_S
_SEEN = "slack:seen:{}"
_ID_CHARS = 200  # an id is Slack's (tens of characters); a longer one is cut, not stored whole

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


def replay_ids(payload: dict[str, Any]) -> list[str]:
    """What identifies one Slack request across its redeliveries, whichever transport brought it."""
    ids = []
    for key in ("trigger_id", "event_id"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            ids.append(f"{key}:{value[:_ID_CHARS]}")
    if payload.get("type") == "block_actions":  # shape checked by envelope_problem
        # Slack stamps each click; the same stamp by the same user on the same button is one click.
        user = payload["user"]["id"]
        for action in payload["actions"]:
            stamp = action.get("action_ts") if isinstance(action, dict) else None
            if isinstance(stamp, str) and stamp:
                ids.append(f"action:{user}:{action['action_id']}:{stamp}"[: 2 * _ID_CHARS])
    return ids


@dataclass(frozen=True)
class Refused:
    """The gate's answer when the request must not reach Bolt: HTTP status and text."""

    status: int
    text: str = ""
    reply: str = ""  # said to the asker as the ack's ephemeral answer (bot/slack/flood.py)


@dataclass
class SlackGate:
    """The envelope check and the replay record, then `app.dispatch`."""

    app: App
    state: StateStore
    tell: Callable[[str, str, str], None] | None = None  # (channel, user, text), off the request path
    flood: FloodGuard | None = None  # the same request again, or too many from one person
    refusals: RateLimitedLog = field(default_factory=lambda: RateLimitedLog(log))

    def admit(self, payload: dict[str, Any], transport_ids: list[str]) -> Refused | None:
        """None when the payload may run; else why not, already logged (and told to its clicker)."""
        why = envelope_problem(payload)
        if why is not None:
            return self._refuse_click(payload, why)
        seen = self._seen([*transport_ids, *replay_ids(payload)])
        if seen:
            self.refusals.note("acknowledged replayed Slack requests without running them", "seen before")
            return Refused(200)
        # A store that did not answer the record is not asked again within the same ack.
        if seen is False and self.flood is not None and (said := self.flood.check(payload)) is not None:
            self.refusals.note("answered repeated or too frequent commands without running them", said[:60])
            return Refused(200, reply=said)
        return None

    def dispatch(
        self, payload: dict[str, Any], transport_ids: list[str], request: Callable[[], BoltRequest]
    ) -> Refused | BoltResponse:
        """`admit`, then Bolt's request (built by `request`) dispatched: a Refused or Bolt's response."""
        refused = self.admit(payload, transport_ids)
        if refused is not None:
            return refused
        try:
            bolt_request = request()
        except (TypeError, ValueError, AttributeError, KeyError, IndexError):
            return self.unreadable("a shape Bolt cannot read")
        return self.app.dispatch(bolt_request)

    def unreadable(self, why: str) -> Refused:
        self.refusals.note("refused unreadable Slack requests", why)
        return Refused(400, f"unreadable Slack request: {why}\n")

    def _refuse_click(self, payload: dict[str, Any], why: str) -> Refused:
        """A payload of the wrong shape: nothing runs; its clicker, when known, is told."""
        self.refusals.note("refused Slack payloads of the wrong shape", why)
        who = clicker(payload)
        if who is None or self.tell is None:
            return Refused(400, f"unreadable Slack request: {why}\n")
        self.tell(*who, f":warning: this click could not be read ({why}), so nothing was done.")
        return Refused(200)

    def _seen(self, ids: list[str]) -> bool | None:
        """Record each id; True when any was already recorded (the request is a replay), None when the
        store did not answer.

        The first id found recorded ends the look: two copies delivered at once (Slack's redelivery
        of one envelope, worked concurrently by the Socket Mode client) take the ids in the same
        order, so the one that lost the first id claims none of the rest, and the winner runs. Going
        on past it let each copy claim an id the other then found: both were refused, and the
        command was acknowledged empty and never run."""
        # This request's own mark: a write whose answer was lost is sent again (the connection's
        # retry, or the redo on a new master after a failover) and then finds the key set by this
        # very request, which is no replay (both copies of a redelivery were refused that way).
        mine = uuid.uuid4().hex
        for one in ids:
            key = _SEEN.format(one)
            try:
                fresh = self.state.set_if_absent(key, mine, REPLAY_S) or self.state.get(key) == mine
            except StateUnavailable as err:
                # The walk itself will say the store is down; refusing here would hide that.
                log.warning("replay check skipped, state store unreachable: %s", err)
                return None
            if not fresh:
                return True
        return False
