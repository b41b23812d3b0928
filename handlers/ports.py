"""What handlers need from the outside world, as small Protocols that bot/ fills in.

Handlers never import bot/: the Bolt wiring passes a state store (Redis or
process memory), a Slack poster (slack_sdk WebClient) and a walk observer
(metrics and log context) that satisfy these.
"""

from __future__ import annotations

import contextlib
from contextlib import AbstractContextManager
from typing import Any, Protocol

import msgspec

from layers.findings import LayerResult, WalkResult

JSONValue = Any  # anything json.dumps accepts


class StateUnavailable(Exception):
    """The state store cannot be reached or refused the command; the message is one line, no secrets."""


class LockNotAcquired(Exception):
    """Another holder kept the lock past the wait."""


class Attachment(msgspec.Struct, frozen=True):
    """A file for a channel or thread: its name, its bytes (or text), the title Slack shows (the name when None)."""

    filename: str
    content: bytes | str
    title: str | None = None


class PostFailed(Exception):
    """A Slack call that still failed after its retries; `reason` says why in one line (never a token)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class StateStore(Protocol):
    """Shared state with expiry: walks and digests for the buttons, once-a-day keys, locks."""

    def get(self, key: str) -> JSONValue | None: ...

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None: ...

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        """Store only when the key does not exist; True when this call stored it."""
        ...

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        """Renew the key's expiry only while it still holds `value` (a lease still ours); True if renewed."""
        ...

    def delete(self, key: str) -> None: ...

    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> AbstractContextManager[None]:
        """Hold `name` for at most `timeout_s` (it expires if the holder dies); wait up to `wait_s`
        to get it, else raise LockNotAcquired."""
        ...

    def ping(self) -> bool: ...


class PostRef(msgspec.Struct, frozen=True):
    """Where a message landed: enough to update it or reply in its thread."""

    channel: str
    ts: str


class SlackPoster(Protocol):
    """The Slack Web API calls handlers make; each retries, then raises PostFailed."""

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        *,
        key: str | None = None,
    ) -> PostRef:
        """With `key`, posted at most once even when a retry follows a lost answer."""
        ...

    def update(self, ref: PostRef, text: str, blocks: list[dict[str, Any]] | None = None) -> None: ...

    def ephemeral(
        self, channel: str, user: str, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> None: ...

    def upload(self, channel: str, file: Attachment, *, thread_ts: str | None = None) -> None:
        """Attach a file (files upload v2: get URL, send bytes, complete) to a channel or thread."""
        ...


class WalkObserver(Protocol):
    """What the walk service and the buttons report as they run (metrics, and the walk id on log lines)."""

    def walk_started(self) -> None:
        """A walk exists: its root message is posted and its state stored."""
        ...

    def layer_done(self, result: LayerResult, seconds: float) -> None:
        """One layer's check ran in `seconds`; its findings are counted from `result`."""
        ...

    def walk_finished(self, result: WalkResult) -> None:
        """The walk's own run (from /gpu why or "diagnose node") has ended; counted once per walk."""
        ...

    def action(self, kind: str, outcome: str) -> None:
        """A button click (its action id) and what came of it: done, refused, repeated, failed, …"""
        ...

    def scope(self, walk_id: str | None) -> AbstractContextManager[None]:
        """Every log line emitted inside carries this walk id."""
        ...


class NoObserver:
    """The default WalkObserver: records nothing (tests, the CLI)."""

    def walk_started(self) -> None:
        pass

    def layer_done(self, result: LayerResult, seconds: float) -> None:
        pass

    def walk_finished(self, result: WalkResult) -> None:
        pass

    def action(self, kind: str, outcome: str) -> None:
        pass

    def scope(self, walk_id: str | None) -> AbstractContextManager[None]:
        return contextlib.nullcontext()


class AlertObserver(Protocol):
    """What the alert service reports (gpubot_alerts_total and gpubot_alert_incidents_total)."""

    def alert(self, status: str, decision: str, count: int = 1) -> None:
        """`count` alerts of a webhook ("firing"/"resolved") and what was decided for them."""
        ...

    def incident(self, event: str) -> None:
        """An incident event: thread_opened, summarized, closed, rewalk, slack_failed."""
        ...


class NoAlertObserver:
    """The default AlertObserver: records nothing."""

    def alert(self, status: str, decision: str, count: int = 1) -> None:
        pass

    def incident(self, event: str) -> None:
        pass
