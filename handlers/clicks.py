"""What a click says: Slack's `block_actions` payload, checked and read into one Click.

A payload that is not a click this bot can act on (forged, broken, no user or
channel) is refused by `click_problem` before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from handlers.digest import parse_button_value

# A layer message's buttons (`layer<N>_actions`), or the uncordon under a cordon clicked there (`layer<N>_undo`).
_BLOCK_LAYER = re.compile(r"^layer(\d)_(?:actions|undo)$")


class Click(msgspec.Struct, frozen=True):
    action_id: str
    value: str
    user: str
    channel: str
    block_id: str | None = None
    message_ts: str | None = None
    thread_ts: str | None = None

    @property
    def from_layer(self) -> int | None:
        """The layer whose message held the button (or whose cordon the audit line's uncordon undoes)."""
        m = _BLOCK_LAYER.match(self.block_id or "")
        return int(m.group(1)) if m else None


def _obj(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = body.get(key)
    return value if isinstance(value, Mapping) else {}


def click_problem(body: Mapping[str, Any]) -> str | None:
    """Why a `block_actions` payload is no click this bot can act on, or None when it is one.

    Slack sends objects with string ids; anything else (a forged or broken payload, signed
    or not) is refused before it runs: a click with no user would audit `<@>`."""
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions or not isinstance(actions[0], Mapping):
        return "it carries no action"
    action = actions[0]
    if not isinstance(action.get("action_id"), str) or not action["action_id"]:
        return "its action has no id"
    for key in ("value", "block_id"):
        if action.get(key) is not None and not isinstance(action[key], str):
            return f"its action's {key} is not text"
    for key in ("user", "channel", "container", "message"):
        if body.get(key) is not None and not isinstance(body[key], Mapping):
            return f"its {key} is not an object"
    if not _text(_obj(body, "user").get("id")):
        return "it names no user"
    if not (_text(_obj(body, "channel").get("id")) or _text(_obj(body, "container").get("channel_id"))):
        return "it names no channel"
    for where, key in (
        ("message", "ts"),
        ("message", "thread_ts"),
        ("container", "message_ts"),
        ("container", "thread_ts"),
    ):
        if _obj(body, where).get(key) is not None and not isinstance(_obj(body, where)[key], str):
            return f"its {where} {key} is not text"
    return None


def clicker(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(channel, user) of a payload, when both are readable: whom to tell that a click was refused."""
    user = _text(_obj(body, "user").get("id"))
    channel = _text(_obj(body, "channel").get("id")) or _text(_obj(body, "container").get("channel_id"))
    return (channel, user) if user and channel else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def click_from_payload(body: Mapping[str, Any]) -> Click:
    """A `block_actions` payload that passed `click_problem` → the one click it carries."""
    action = body["actions"][0]
    message = _obj(body, "message")
    container = _obj(body, "container")
    return Click(
        action_id=action["action_id"],
        value=_text(action.get("value")),
        user=_obj(body, "user")["id"],
        channel=_text(_obj(body, "channel").get("id")) or _text(container.get("channel_id")),
        block_id=action.get("block_id"),
        message_ts=message.get("ts") or container.get("message_ts"),
        thread_ts=message.get("thread_ts") or container.get("thread_ts"),
    )


def walk_id_of(click: Click) -> str | None:
    """The walk a click belongs to, for its log lines (a digest row's `<digest id>|<node>` names one)."""
    if "|" not in click.value:
        return click.value[:64] or None
    try:
        did, node = parse_button_value(click.value)
    except ValueError:
        return None
    return f"{did}.{node}"[:64]
