"""A walk's records and its Slack side: reading its stored state, and the root and layer posts.

handlers/walks.py's WalkService runs walks; what it stands on is here: the
keys a walk lives under, its stored layers read back in the order they ran,
the root message's layer track kept up to date, each layer's message posted
(keyed, so a retry or a takeover finds it posted), and what is said when the
run breaks off after the root exists (never "walking…" forever).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from handlers.blocks import Message, root_message
from handlers.escape import escape
from handlers.ports import Attachment, PostRef, SlackPoster, StateStore, StateUnavailable
from handlers.telling import Teller, said
from handlers.walkclaims import LayerClaims
from handlers.walkstate import Walk, WalkGone, layer_from_dict
from layers.findings import LayerResult, WalkResult
from layers.walk import LAYERS

log = logging.getLogger("gpubot.walks")

STORE_DOWN = "the bot's state store (Redis) is unreachable"


class WalkRecords:
    """What a walk keeps and shows; WalkService sets these in its __init__."""

    state: StateStore
    poster: SlackPoster
    tell: Teller
    retention_s: int
    cluster_name: str | None
    clock: Callable[[], float]
    claims: LayerClaims

    # --- keys ---------------------------------------------------------------------------

    @staticmethod
    def _key(walk_id: str, *parts: object) -> str:
        return ":".join(["walk", walk_id, *(str(p) for p in parts)])

    # --- reading --------------------------------------------------------------------------

    def load(self, walk_id: str) -> Walk:
        raw = self.state.get(self._key(walk_id))
        if raw is None:
            raise WalkGone(
                f"this walk ({walk_id}) is no longer known: walks are kept {self.retention_s // 86400} days; "
                "run /gpu why again"
            )
        return Walk.from_dict(raw)

    def results(self, walk_id: str) -> dict[int, LayerResult]:
        """Layers done so far, in the order they completed."""
        found: list[tuple[float, LayerResult]] = []
        for n in LAYERS:
            raw = self.state.get(self._key(walk_id, "layer", n))
            if raw is not None:
                result, at = layer_from_dict(raw)
                found.append((at, result))
        return {r.layer: r for _, r in sorted(found, key=lambda p: (p[0], p[1].layer))}

    def walk_result(self, walk: Walk) -> WalkResult:
        return WalkResult(target=walk.target, layers=tuple(self.results(walk.walk_id).values()))

    def _store_answers(self, channel: str, user: str | None, walk_id: str, thread_ts: str | None) -> bool:
        """Checked before anything is posted: a walk whose state cannot be kept is not started."""
        try:
            up = self.state.ping()
            why = "it did not answer PING"
        except StateUnavailable as err:
            up, why = False, str(err)
        if not up:
            log.error("walk %s not started: state store unreachable: %s", walk_id, why)
            self.tell.ephemeral(
                channel,
                user,
                f":x: {STORE_DOWN}, so walk `{walk_id}` was not started: {escape(why)}. Try again in a "
                "moment; if it persists, check REDIS_URL and the Redis service.",
                thread_ts,
            )
        return up

    def _stopped(self, walk: Walk, ran: list[LayerResult], err: Exception) -> None:
        """The walk broke off once its root was posted: the requester (the store failed) or the
        thread (anything else) is told, and the root says so instead of "walking…"."""
        if isinstance(err, StateUnavailable):
            why = f"{STORE_DOWN} (walk `{walk.walk_id}`): {err}"
            log.error("walk %s stopped: %s", walk.walk_id, err)
            self.tell.ephemeral(
                walk.channel,
                walk.requester,
                f":x: walk `{walk.walk_id}` stopped: {escape(STORE_DOWN)}: {escape(str(err))}. Layers "
                "already in the thread stand; run /gpu why again once it is back.",
            )
        else:
            why = f"{said(err)} (walk `{walk.walk_id}`)"
            self.tell.say_failure(walk, walk.requester, "the walk stopped", err)
        if walk.root_ts is None:
            return
        msg = root_message(
            WalkResult(walk.target, tuple(ran)), walk.requester, self.cluster_name, stopped=why
        )
        try:
            self.poster.update(PostRef(walk.channel, walk.root_ts), msg.text, msg.blocks)
        except Exception as again:
            log.error("walk %s: could not mark the root message stopped: %s", walk.walk_id, again)

    # --- posting -----------------------------------------------------------------------------

    def update_root(self, walk: Walk, *, running: bool) -> None:
        if walk.root_ts is None:
            return
        try:
            result = self.walk_result(walk)
        except StateUnavailable as err:  # never hide the error being handled behind a second one
            log.warning("walk %s: root message not updated, state store unreachable: %s", walk.walk_id, err)
            return
        msg = root_message(result, walk.requester, self.cluster_name, running=running)
        try:
            self.poster.update(PostRef(walk.channel, walk.root_ts), msg.text, msg.blocks)
        except Exception as err:  # the track is cosmetic; the layer messages carry the findings
            log.warning("walk %s: could not update the root message: %s", walk.walk_id, err)

    def _post_layer(self, walk: Walk, msg: Message, key: str) -> None:
        try:
            # Keyed, as the root is: a retry, or an agent taking over the walk, finds it posted.
            self.poster.post(walk.channel, msg.text, msg.blocks, thread_ts=walk.thread, key=key)
            for name, content in msg.attachments:
                self.poster.upload(walk.channel, Attachment(name, content), thread_ts=walk.thread)
        except Exception as err:
            self.tell.report_failure(walk, f"could not post {msg.text}", err)
