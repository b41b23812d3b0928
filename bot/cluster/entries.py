"""What travels on the request streams: a request, an entry as an agent receives it, a heartbeat.

bot/cluster/streams.py moves them through Redis; these only say what they hold
and how they read back (an entry that is not a request, or not signed by the
gateway, is kept as such, never guessed at).
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FUTURE_SLACK_S = 5.0  # a heartbeat ahead of Redis's own clock by more than this was not written by TIME


@dataclass(frozen=True)
class Request:
    """What the gateway asks an agent to do: a kind, its JSON body, who to answer (`reply`)."""

    kind: str
    body: dict[str, Any]
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    queued_at: float = field(default_factory=time.time)
    sender_version: str = ""

    @property
    def queue_by(self) -> float | None:
        """Redis's time (TIME, seconds) by which the gateway needed the entry queued: past it the asker
        was told it could not be (a stalled Redis took the XADD after the ack), so it is never run."""
        got = self.body.get("queue_by")
        return float(got) if isinstance(got, int | float) and math.isfinite(got) else None

    def late(self, entry_id: str) -> bool:
        """Whether Redis took this entry (its id's time) after `queue_by`."""
        by = self.queue_by
        try:
            took = int(entry_id.split("-", 1)[0]) / 1000
        except ValueError:
            return False
        return by is not None and took > by

    @property
    def reply(self) -> dict[str, Any]:
        """Where to say what became of it: channel, user and thread (any may be missing)."""
        got = self.body.get("reply")
        return got if isinstance(got, dict) else {}

    def fields(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "id": self.request_id,
            "at": f"{self.queued_at:.3f}",
            "version": self.sender_version,
            "body": json.dumps(self.body, separators=(",", ":")),
        }

    @classmethod
    def from_fields(cls, raw: Mapping[str, str]) -> Request:
        """ValueError when the entry is not a request (a poison entry: it is buried, not retried)."""
        kind, rid, body = raw.get("kind"), raw.get("id"), raw.get("body")
        if not kind or not rid or body is None:
            raise ValueError("the entry has no kind, id or body")
        try:
            parsed = json.loads(body)
            at = float(raw.get("at") or 0.0)
        except ValueError as err:
            raise ValueError(f"the entry's body is not JSON: {err}") from None
        if not isinstance(parsed, dict):
            raise ValueError("the entry's body is not a JSON object")
        return cls(kind, parsed, rid, at, raw.get("version") or "")


@dataclass(frozen=True)
class Entry:
    """One stream entry as an agent receives it; `request` is None when it could not be read."""

    entry_id: str
    fields: dict[str, str]
    deliveries: int  # 1 on first delivery; each XAUTOCLAIM adds one
    request: Request | None
    problem: str | None = None
    forged: str | None = None  # why its signature does not hold (bot/cluster/signing.py)

    @classmethod
    def of(
        cls, entry_id: str, fields: Mapping[str, str], deliveries: int, forged: str | None = None
    ) -> Entry:
        if forged is not None:  # not read at all: nothing in it is trusted
            return cls(entry_id, dict(fields), deliveries, None, forged, forged)
        try:
            return cls(entry_id, dict(fields), deliveries, Request.from_fields(fields))
        except ValueError as err:
            return cls(entry_id, dict(fields), deliveries, None, str(err))

    @property
    def nonce(self) -> str:
        return self.fields.get("nonce", "")


@dataclass(frozen=True)
class ClusterSeen:
    """A cluster's last heartbeat in `gpubot:clusters`."""

    name: str
    version: str
    last_seen: float
    agent: str
    kinds: tuple[str, ...] = ()

    def silent_for(self, now: float) -> float:
        """Seconds since the heartbeat by `now` (Redis's clock, as the heartbeat's); infinite when the
        value cannot be a heartbeat (NaN, or ahead of Redis's clock): never "0 s ago" for a bad one."""
        if not math.isfinite(self.last_seen) or self.last_seen - now > FUTURE_SLACK_S:
            return math.inf
        return max(0.0, now - self.last_seen)
