"""Posting once across a takeover: the agent's SlackPoster, with the intent to post kept in Redis.

An agent can die after Slack took a post and before anything recorded it: the
entry is taken over (XAUTOCLAIM) and the new agent would post the root, a
layer or a digest part again. So a keyed post (`post(..., key=K)`: the walk's
root `W:root`, its layers `W:layer:N`, a cluster's digest part) goes:

1. `once:post:K` absent: nobody tried. Write the intent (when, by whom), post
   with K in the message metadata, then write where it landed.
2. `once:post:K` holds where it landed: posted; that message is returned,
   nothing is posted.
3. `once:post:K` holds only the intent: an agent died around the post. The
   channel (or thread) is searched for K in message metadata, the same lookup
   the Poster makes before retrying a post whose answer was lost
   (bot/slack/post.py `find_posted`); found, it is returned, else it is posted.

A lookup that cannot tell (Slack down, no history scope) posts: a second
message is better than none. Uploads carry no metadata: within one request
(the agent sets `scope` to the request id while it runs), an upload done
(same channel, thread and file name) is not made again; one whose agent died
during it may appear twice. Unkeyed posts (audit lines, failure notes) pass
through as they are.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from handlers.ports import PostRef, SlackPoster, StateStore, StateUnavailable

log = logging.getLogger("gpubot.agent")

RECORD_TTL_S = 14 * 86400  # as long as a walk is kept: a late click must still find its posts
SKEW_S = 60.0  # Slack's clock and ours may differ: search a little before the intent

_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("gpubot_once_scope", default=None)


class Finder(Protocol):
    def find_posted(self, channel: str, thread_ts: str | None, key: str, since: float) -> PostRef | None:
        """The message posted with `key` in its metadata since `since` (None: none, or cannot tell)."""
        ...


class FindingPoster(SlackPoster, Finder, Protocol):
    """What the agent posts through: bot/slack/post.py's Poster."""


class OncePoster:
    """SlackPoster over `inner`, keeping the intent and outcome of each keyed post in `store`."""

    def __init__(
        self,
        inner: FindingPoster,
        store: StateStore,
        who: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.store = store
        self.who = who
        self.clock = clock

    @contextmanager
    def scope(self, request_id: str) -> Iterator[None]:
        """Uploads inside belong to this request: a re-delivery of it does not make them again."""
        token = _scope.set(request_id)
        try:
            yield
        finally:
            _scope.reset(token)

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        *,
        key: str | None = None,
    ) -> PostRef:
        if key is None:
            return self.inner.post(channel, text, blocks, thread_ts)
        record = f"once:post:{key}"
        found = self._earlier(record, channel, thread_ts, key)
        if found is not None:
            return found
        self._write(record, {"at": self.clock(), "by": self.who})
        ref = self.inner.post(channel, text, blocks, thread_ts, key=key)
        self._write(record, {"at": self.clock(), "by": self.who, "channel": ref.channel, "ts": ref.ts})
        return ref

    def _earlier(self, record: str, channel: str, thread_ts: str | None, key: str) -> PostRef | None:
        """The message an earlier attempt at `key` posted, if there was one."""
        try:
            seen = self.store.get(record)
        except StateUnavailable as err:
            log.warning("post %s: its record is unreadable, posting: %s", key, err)
            return None
        if not isinstance(seen, dict):
            return None
        if seen.get("ts"):
            log.info("post %s was made before (ts %s): not posting it again", key, seen["ts"])
            return PostRef(str(seen.get("channel") or channel), str(seen["ts"]))
        since = float(seen.get("at") or 0) - SKEW_S
        ref = self.inner.find_posted(channel, thread_ts, key, since)
        if ref is None:
            log.info("post %s was begun by %s and is not in Slack: posting it", key, seen.get("by"))
            return None
        log.info(
            "post %s was begun by %s and Slack has it (ts %s): not posting it again",
            key,
            seen.get("by"),
            ref.ts,
        )
        self._write(record, {**seen, "channel": ref.channel, "ts": ref.ts})
        return ref

    def _write(self, record: str, value: dict[str, Any]) -> None:
        try:
            self.store.set(record, value, RECORD_TTL_S)
        except StateUnavailable as err:  # the walk's own state fails with it and is said there
            log.warning("%s not recorded: %s", record, err)

    def update(self, ref: PostRef, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        self.inner.update(ref, text, blocks)

    def ephemeral(
        self, channel: str, user: str, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        self.inner.ephemeral(channel, user, text, blocks)

    def upload(
        self,
        channel: str,
        filename: str,
        content: bytes | str,
        *,
        thread_ts: str | None = None,
        title: str | None = None,
        comment: str | None = None,
    ) -> None:
        request = _scope.get()
        record = f"once:upload:{request}:{channel}:{thread_ts}:{filename}" if request else None
        if record is not None:
            try:
                if self.store.get(record) is not None:
                    log.info("%s was uploaded before in this request: not uploading it again", filename)
                    return
            except StateUnavailable as err:
                log.warning("upload of %s: its record is unreadable, uploading: %s", filename, err)
        self.inner.upload(channel, filename, content, thread_ts=thread_ts, title=title, comment=comment)
        if record is not None:
            self._write(record, {"at": self.clock(), "by": self.who})
