"""One command asked many times: answered once per window, and each person's pace limited.

Before Bolt runs a `/gpu why` or `/gpu node` (bot/slack/gate.py), in every
role that hears Slack:

- **The same request** (same command, same pod or node, same channel) asked
  again within GPUBOT_SAME_REQUEST_SECONDS is not run again: the later asker is
  told, ephemerally, who asked it and when, and that its answer is posted (or
  being posted) in this channel. A flood of 1,500 `/gpu node gpu-node-1` costs
  one ledger post per window.
- **Per person**: past GPUBOT_USER_REQUESTS_PER_MINUTE requests in a minute a
  person is told when to try again, and nothing runs.

Both live in the state store (Redis: every replica and gateway sees the same
counts; one key each, a set-if-absent and an INCR in one script), reached
within the gate's budget: a store that does not answer in time lets the
request through (the request itself then says the store is down).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Protocol

from handlers.commands import CommandError, Node, Why, parse_command
from handlers.escape import escape
from handlers.ports import JSONValue, StateUnavailable

log = logging.getLogger("gpubot.slack.events")
RATE_WINDOW_S = 60.0


_COUNT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {n, redis.call('PTTL', KEYS[1])}
"""


def count_in(store: Any, key: str, window_s: float) -> tuple[int, float]:
    """One more in `key`'s window (it starts at the first count): (the count, seconds left). Redis:
    INCR and PEXPIRE in one script; process memory: the store's own `count`."""
    while not hasattr(store, "script") and not hasattr(store, "count") and hasattr(store, "inner"):
        store = store.inner  # a wrapper (the leases' store) around the store itself
    script = getattr(store, "script", None)
    if script is None:
        return store.count(key, window_s)  # type: ignore[no-any-return]
    n, left = script(f"count {key}", _COUNT, key, max(1, round(window_s * 1000)))
    return int(n), max(0, int(left)) / 1000


class CountingStore(Protocol):
    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool: ...

    def peek(self, key: str) -> JSONValue | None: ...

    def count(self, key: str, window_s: float) -> tuple[int, float]: ...


@dataclass
class FloodGuard:
    """`check(payload)`: None when the request may run, else what to tell its asker."""

    store: CountingStore
    same_request_s: float = 60.0  # 0: every request runs
    per_minute: int = 30  # 0: no limit

    def check(self, payload: dict[str, Any]) -> str | None:
        if payload.get("command") != "/gpu":
            return None
        try:
            cmd = parse_command(payload.get("text"))
        except CommandError:
            return None  # Bolt answers it with the usage
        if not isinstance(cmd, Why | Node):
            return None
        user, channel = str(payload.get("user_id") or ""), str(payload.get("channel_id") or "")
        try:
            return self._rate(user) or self._same(cmd, user, channel)
        except StateUnavailable as err:
            log.warning("flood check skipped, state store unreachable: %s", err)
            return None

    def _rate(self, user: str) -> str | None:
        if self.per_minute <= 0 or not user:
            return None
        count, left_s = self.store.count(f"flood:user:{user[:40]}", RATE_WINDOW_S)
        if count <= self.per_minute:
            return None
        return (
            f":hourglass: you have asked {count} times in the last minute (the limit is {self.per_minute}): "
            f"nothing was run. Try again in {max(1, math.ceil(left_s))} s."
        )

    def _same(self, cmd: Why | Node, user: str, channel: str) -> str | None:
        if self.same_request_s <= 0:
            return None
        kind, label = ("why", cmd.label) if isinstance(cmd, Why) else ("node", cmd.label)
        key = f"flood:same:{channel[:40]}:{kind}:{label[:300]}"
        now = time.time()
        if self.store.set_if_absent(key, {"user": user, "at": now}, self.same_request_s):
            return None
        first = self.store.peek(key)
        who, at = (first.get("user"), first.get("at")) if isinstance(first, dict) else (None, None)
        ago = f"{max(0, round(now - float(at)))} s ago" if isinstance(at, int | float) else "just now"
        by = f" by <@{escape(str(who))}>" if who else ""
        return (
            f":information_source: `/gpu {kind} {escape(label)}` was asked in this channel {ago}{by}: its "
            f"answer is posted (or being posted) here, in its thread. It is not run again within "
            f"{self.same_request_s:g} s of the first asking."
        )
