"""What a walk tells people besides its layers: audit lines, failures, answers to whoever asked.

Every failure is said with the walk id, where the people concerned look: the
walk's thread when it has one, else an ephemeral to the person who asked, else
(an alert opened the walk, nobody asked) the thread it was to run in. A known
backend failure (a source, the state store, Slack, the network) is said as
the backend put it; anything else is a bug, said as "unexpected error (…)"
and logged with its traceback. Nothing here raises: when Slack itself fails,
the log is the last place a failure is written.
"""

from __future__ import annotations

import logging
from typing import Any

from handlers.escape import escape
from handlers.ports import PostFailed, SlackPoster, StateUnavailable
from handlers.walkstate import Walk
from layers.sources import SourceError

log = logging.getLogger("gpubot.walks")

# What a backend says when it fails (a source, the state store, Slack, the network): said as it is.
_BACKEND_ERRORS = (SourceError, StateUnavailable, PostFailed, OSError)


def bug(err: BaseException) -> bool:
    """An error no backend explains: logged with its traceback."""
    return not isinstance(err, _BACKEND_ERRORS)


def unexpected(err: BaseException) -> str:
    """How an error no backend explains (a bug) is said: its kind and text, and where to look."""
    text = " ".join(str(err).split())[:300]
    kind = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return f"unexpected error ({kind}); this is a bug in gpubot, its log has the traceback"


def said(err: BaseException) -> str:
    """A failure as the thread or the requester reads it."""
    return unexpected(err) if bug(err) else str(err)


def context_block(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


class Teller:
    """Says things about walks through the SlackPoster port; a Slack failure is logged, never raised."""

    def __init__(self, poster: SlackPoster) -> None:
        self.poster = poster

    def note(self, walk: Walk, text: str, extra: list[dict[str, Any]] | None = None) -> None:
        """A line in the walk's thread (the audit trail), with `extra` blocks (a button); failures are logged."""
        try:
            self.poster.post(walk.channel, text, [context_block(text), *(extra or ())], thread_ts=walk.thread)
        except Exception as err:
            log.error("walk %s: could not post to the thread (%s): %s", walk.walk_id, err, text)

    def say_failure(self, walk: Walk, user: str | None, what: str, err: Exception) -> None:
        """A failure of work on this walk: in its thread when it has one, else to `user`."""
        if walk.thread is not None:
            self.report_failure(walk, what, err)
            return
        log.error("walk %s: %s: %s", walk.walk_id, what, err, exc_info=bug(err))
        self.ephemeral(walk.channel, user, f":x: {escape(what)} (walk `{walk.walk_id}`): {escape(said(err))}")

    def report_failure(self, walk: Walk, what: str, err: Exception) -> None:
        """Say in the thread (or, failing that, the log) what failed, with the walk id."""
        text = f":x: {escape(what)} (walk `{walk.walk_id}`): {escape(said(err))}"
        log.error("walk %s: %s: %s", walk.walk_id, what, err, exc_info=bug(err))
        try:
            self.poster.post(walk.channel, text, [context_block(text)], thread_ts=walk.thread)
        except Exception as again:
            log.error("walk %s: could not report the failure in the thread either: %s", walk.walk_id, again)

    def ephemeral(self, channel: str, user: str | None, text: str, thread_ts: str | None = None) -> None:
        """An answer to `user`; with nobody to answer (an alert's walk), the thread `thread_ts` hears it."""
        if user is None:
            log.warning("no user to answer: %s", text)
            if thread_ts is not None:
                try:
                    self.poster.post(channel, text, [context_block(text)], thread_ts=thread_ts)
                except Exception as err:
                    log.error("could not say in the thread either: %s", err)
            return
        try:
            self.poster.ephemeral(channel, user, text)
        except Exception as err:
            log.error("could not answer %s ephemerally: %s (%s)", user, err, text)
