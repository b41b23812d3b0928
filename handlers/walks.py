"""The walk service: one incident thread per walk, its state in the state store.

A walk is a target (a pod, or a node from the digest), the channel and root
message of its thread, and the layers done so far with their results. Every
piece lives in the state store under the walk id, one key per layer, so a
click on any replica, after any restart, continues the same walk; a layer is
claimed with `set_if_absent` before it runs, so two clicks never run it twice.

`/gpu why` and the buttons take the same path: `start` then `follow`,
`descend`, `jump` or `walk_all`, each layer posted in the thread as it
completes and the root's layer track updated in place. The observer port
counts walks, layer durations and findings, and tags every log line of a
walk with its id.

Past 400 lines on purpose: it is one class, and every method reads or writes the
same walk keys and claims in the state store; cut in two (say, running and
posting), each half would need the other's keys and locks.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from handlers.blocks import Message, layer_message, node_in_question, root_message
from handlers.commands import usage_reply
from handlers.escape import escape
from handlers.ports import NoObserver, PostRef, SlackPoster, StateStore, StateUnavailable, WalkObserver
from handlers.walkstate import Walk, WalkGone, layer_from_dict, layer_to_dict, new_walk_id
from layers.facts.context import WalkContext
from layers.findings import LayerResult, Target, WalkResult
from layers.sources import SourceError
from layers.walk import LAYERS, run_layer

log = logging.getLogger("gpubot.walks")

RETENTION_S = 14 * 24 * 3600
# A claim outlives the longest layer run; a crashed replica's claim expires so the layer can run again.
CLAIM_S = 15 * 60

STORE_DOWN = "the bot's state store (Redis) is unreachable"

# Opens a fresh context for a target (reads the pod or node; SourceError when it cannot).
OpenWalk = Callable[[Target], WalkContext]


class WalkService:
    """Runs walks and keeps their state; posts through the SlackPoster port."""

    def __init__(
        self,
        state: StateStore,
        poster: SlackPoster,
        open_walk: OpenWalk,
        *,
        retention_s: int = RETENTION_S,
        cluster_name: str | None = None,
        clock: Callable[[], float] = time.time,
        observer: WalkObserver | None = None,
        claim_s: int | float = CLAIM_S,
    ) -> None:
        self.state = state
        # How long a claim on running work lasts. An agent (bot/cluster/agent.py) makes it short and
        # renews it while the work runs, so a dead agent's claims expire before its work is taken over.
        self.claim_s = claim_s
        self.observer: WalkObserver = observer or NoObserver()
        self.poster = poster
        self.open_walk = open_walk
        self.retention_s = retention_s
        self.cluster_name = cluster_name
        self.clock = clock

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

    # --- starting ---------------------------------------------------------------------------

    def start(
        self,
        channel: str,
        user: str | None,
        target: Target,
        *,
        thread_ts: str | None = None,
        walk_id: str | None = None,
    ) -> Walk | None:
        """Open the target, post the root message, store the walk, then follow the layers.

        A target that cannot be read, or a state store that does not answer, is answered
        ephemerally and nothing is posted in the channel: returns None. When the store
        fails once the root is posted, the requester is told and the root says the walk
        stopped (with its id): returns None too. With `thread_ts` the root goes into that
        thread (the digest's "diagnose node").
        """
        walk_id = walk_id or new_walk_id()
        with self.observer.scope(walk_id):
            return self._start(channel, user, target, thread_ts, walk_id)

    def _start(
        self, channel: str, user: str | None, target: Target, thread_ts: str | None, walk_id: str
    ) -> Walk | None:
        if not self._store_answers(channel, user, walk_id, thread_ts):
            return None
        try:
            ctx = self.open_walk(target)
        except SourceError as err:
            if err.kind == "not_found":
                text = usage_reply(f"{target.label} was not found: {err.message}")
            else:
                text = f":x: could not read {escape(target.label)}: {escape(str(err))}"
            self._ephemeral(channel, user, text, thread_ts)
            return None
        walk = Walk(
            walk_id=walk_id,
            target=ctx.target,
            channel=channel,
            requester=user,
            root_ts=None,
            thread_ts=thread_ts,
            created_at=self.clock(),
            cluster=self.cluster_name,
        )
        root = root_message(WalkResult(ctx.target, ()), user, self.cluster_name, running=True)
        try:
            # At most once: a retry after a lost answer must not leave a second root "walking…" forever.
            ref = self.poster.post(
                channel, root.text, root.blocks, thread_ts=thread_ts, key=f"{walk_id}:root"
            )
        except Exception as err:
            log.error("walk %s: could not post the root message: %s", walk.walk_id, err)
            self._ephemeral(
                channel,
                user,
                f":x: could not post in this channel (walk `{walk.walk_id}`): {escape(str(err))}",
            )
            return None
        walk = replace(walk, root_ts=ref.ts)
        ran: list[LayerResult] = []
        try:
            self.state.set(self._key(walk.walk_id), walk.to_dict(), self.retention_s)
        except StateUnavailable as err:
            self._stopped(walk, ran, err)
            return None
        log.info("walk %s started for %s by %s", walk.walk_id, walk.target.label, user)
        self.observer.walk_started()
        try:
            self._follow(walk, 1, ctx, ran)
        except StateUnavailable as err:
            self._stopped(walk, ran, err)
            return None
        finally:
            # Counted even when the run broke off (the store went down): started and finished pair up.
            self.observer.walk_finished(WalkResult(walk.target, tuple(ran)))
        return walk

    def _store_answers(self, channel: str, user: str | None, walk_id: str, thread_ts: str | None) -> bool:
        """Checked before anything is posted: a walk whose state cannot be kept is not started."""
        try:
            up = self.state.ping()
            why = "it did not answer PING"
        except StateUnavailable as err:
            up, why = False, str(err)
        if not up:
            log.error("walk %s not started: state store unreachable: %s", walk_id, why)
            self._ephemeral(
                channel,
                user,
                f":x: {STORE_DOWN}, so walk `{walk_id}` was not started: {escape(why)}. Try again in a "
                "moment; if it persists, check REDIS_URL and the Redis service.",
                thread_ts,
            )
        return up

    def _stopped(self, walk: Walk, ran: list[LayerResult], err: StateUnavailable) -> None:
        """The store failed mid-walk: tell the requester, and the root says so instead of "walking…"."""
        why = f"{STORE_DOWN} (walk `{walk.walk_id}`): {err}"
        log.error("walk %s stopped: %s", walk.walk_id, err)
        self._ephemeral(
            walk.channel,
            walk.requester,
            f":x: walk `{walk.walk_id}` stopped: {escape(STORE_DOWN)}: {escape(str(err))}. Layers already "
            "in the thread stand; run /gpu why again once it is back.",
        )
        if walk.root_ts is None:
            return
        msg = root_message(
            WalkResult(walk.target, tuple(ran)), walk.requester, self.cluster_name, stopped=why
        )
        try:
            self.poster.update(PostRef(walk.channel, walk.root_ts), msg.text, msg.blocks)
        except Exception as again:
            log.error("walk %s: could not mark the root message stopped: %s", walk.walk_id, again)

    def node_walk(self, walk_id: str, node: str, channel: str, thread_ts: str | None) -> Walk:
        """The walk behind a digest row's buttons: one per digest and node, created on first click."""
        return self.prepare(walk_id, Target(namespace=None, pod=None, node=node), channel, thread_ts)

    def prepare(self, walk_id: str, target: Target, channel: str, thread_ts: str | None) -> Walk:
        """A walk not started yet (a Diagnose button's), stored unless it exists: its first click starts it."""
        walk = Walk(
            walk_id=walk_id,
            target=target,
            channel=channel,
            requester=None,
            root_ts=None,
            thread_ts=thread_ts,
            created_at=self.clock(),
            cluster=self.cluster_name,
        )
        self.state.set_if_absent(self._key(walk_id), walk.to_dict(), self.retention_s)
        return self.load(walk_id)

    # --- running layers -------------------------------------------------------------------

    def claim(self, walk_id: str, name: str, who: str | None, ttl_s: int | float | None = None) -> bool:
        """Take `name` for this walk exactly once (across replicas)."""
        value = {"by": who, "at": self.clock()}
        return self.state.set_if_absent(self._key(walk_id, "claim", name), value, ttl_s or self.retention_s)

    def release(self, walk_id: str, name: str) -> None:
        self.state.delete(self._key(walk_id, "claim", name))

    def release_quietly(self, walk_id: str, name: str) -> None:
        """Free a claim once the action is over; a store that fails here is logged (the claim expires)."""
        try:
            self.release(walk_id, name)
        except StateUnavailable as err:
            log.warning("walk %s: claim %s not released (it will expire): %s", walk_id, name, err)

    def _run_one(
        self, walk: Walk, layer: int, ctx: WalkContext | None, *, claimed: bool = False
    ) -> tuple[LayerResult | None, WalkContext | None]:
        """Run and post one layer unless someone else has it; (None, ctx) when it was taken."""
        name = f"layer:{layer}"
        if not claimed and not self.claim(walk.walk_id, name, walk.requester, self.claim_s):
            return None, ctx
        try:
            if ctx is None:
                ctx = self.open_walk(walk.target)
            started = time.perf_counter()
            result = run_layer(ctx, layer)
            self.observer.layer_done(result, time.perf_counter() - started)
        except Exception as err:
            # Free the layer so a later click can run it (unless the store itself is down), and say so.
            with contextlib.suppress(Exception):
                self.release(walk.walk_id, name)
            self.report_failure(walk, f"layer {layer} could not run", err)
            return None, ctx
        self._keep_and_post(walk, result)
        return result, ctx

    def _keep_and_post(self, walk: Walk, result: LayerResult) -> None:
        """A layer that ran is always posted; storing it is best-effort and a failure is said."""
        layer = result.layer
        lost: StateUnavailable | None = None
        try:
            self.state.set(
                self._key(walk.walk_id, "layer", layer), layer_to_dict(result, self.clock()), self.retention_s
            )
        except StateUnavailable as err:
            lost = err
        done = {layer}
        try:
            done |= set(self.results(walk.walk_id))
        except StateUnavailable as err:  # the buttons then offer layers done before: a click says so
            log.warning("walk %s: layers done not read for layer %s's buttons: %s", walk.walk_id, layer, err)
        node = node_in_question(walk.target, result)
        msg = layer_message(result, walk.walk_id, node, done, self.cluster_name)
        self._post_layer(walk, msg, key=f"{walk.walk_id}:layer:{layer}")
        if lost is not None:
            self.report_failure(
                walk, f"layer {layer} ran but could not be stored; its buttons may not see it", lost
            )
            return
        try:
            # The claim now stands for "done": keep it as long as the walk.
            self.state.set(self._key(walk.walk_id, "claim", f"layer:{layer}"), "done", self.retention_s)
        except StateUnavailable as err:  # the stored result still marks the layer done
            log.warning("walk %s: layer %s's claim not kept (it will expire): %s", walk.walk_id, layer, err)

    def run_layers(self, walk: Walk, layers: Iterable[int], *, claimed: bool = False) -> list[LayerResult]:
        """Run these layers in order, each once; `claimed` when the caller already took the (single) layer."""
        ctx: WalkContext | None = None
        ran: list[LayerResult] = []
        queue = [n for n in layers if n in LAYERS]
        try:
            while queue:
                layer = queue.pop(0)
                result, ctx = self._run_one(walk, layer, ctx, claimed=claimed)
                if result is not None:
                    ran.append(result)
                    self.update_root(walk, running=bool(queue))
        except StateUnavailable as err:
            if not ran:
                raise  # nothing ran: the clicker is told nothing was done
            done = ", ".join(str(r.layer) for r in ran)
            self.report_failure(walk, f"the walk stopped after layer(s) {done}: {STORE_DOWN}", err)
        finally:
            self.update_root(walk, running=False)
        return ran

    def resume(self, walk: Walk) -> list[LayerResult]:
        """Carry on a walk whose run broke off (its agent died): from the first layer of the default
        path not yet done. Layers done stay as posted; nothing is posted twice."""
        with self.observer.scope(walk.walk_id):
            done = self.results(walk.walk_id)
            for n, result in done.items():
                # Stored but never marked posted ("done"): its agent died between the two. Its claim
                # (a lease) has expired, so it can be taken: post it now rather than lose it.
                claim = self._key(walk.walk_id, "claim", f"layer:{n}")
                if self.state.get(claim) != "done" and self.claim(
                    walk.walk_id, f"layer:{n}", walk.requester, self.claim_s
                ):
                    log.info("walk %s: layer %s was stored but not posted: posting it", walk.walk_id, n)
                    self._keep_and_post(walk, result)
            layer: int | None = 1
            while layer is not None and layer in done:
                layer = done[layer].next_layer
            if layer is None or layer not in LAYERS:
                self.update_root(walk, running=False)
                return []
            log.info("walk %s resumed at layer %s", walk.walk_id, layer)
            return self.follow(walk, layer)

    def follow(self, walk: Walk, start: int = 1, ctx: WalkContext | None = None) -> list[LayerResult]:
        """The default walk: from `start` follow each layer's next until it stops (as the CLI does)."""
        ran: list[LayerResult] = []
        self._follow(walk, start, ctx, ran)
        return ran

    def _follow(self, walk: Walk, start: int, ctx: WalkContext | None, ran: list[LayerResult]) -> None:
        """`follow`, collecting into `ran` so a caller still knows what ran when the store fails."""
        layer: int | None = start
        done = set(self.results(walk.walk_id))
        running = True
        try:
            while layer is not None and layer in LAYERS and layer not in done:
                result, ctx = self._run_one(walk, layer, ctx)
                if result is None:
                    break  # another click took this layer (or it failed and said so)
                ran.append(result)
                done.add(layer)
                layer = result.next_layer
                running = layer is not None and layer not in done
                self.update_root(walk, running=running)
        finally:
            if running:
                self.update_root(walk, running=False)

    def next_after(self, walk_id: str, from_layer: int | None) -> int | None:
        """`layer_descend`: the layer below the clicked one (or below the deepest done)."""
        done = self.results(walk_id)
        base = from_layer if from_layer is not None else max(done, default=0)
        nxt = base + 1
        return nxt if nxt in LAYERS else None

    def suggested(self, walk_id: str, from_layer: int | None) -> int | None:
        """`layer_jump`: the layer the clicked layer's findings point to."""
        done = self.results(walk_id)
        if from_layer is not None and from_layer in done:
            return done[from_layer].next_layer
        for result in reversed(list(done.values())):
            if result.next_layer is not None and result.next_layer not in done:
                return result.next_layer
        return None

    def remaining(self, walk_id: str) -> list[int]:
        done = self.results(walk_id)
        return [n for n in sorted(LAYERS) if n not in done]

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
                self.poster.upload(walk.channel, name, content, thread_ts=walk.thread, title=name)
        except Exception as err:
            self.report_failure(walk, f"could not post {msg.text}", err)

    def note(self, walk: Walk, text: str, extra: list[dict[str, Any]] | None = None) -> None:
        """A line in the walk's thread (the audit trail), with `extra` blocks (a button); failures are logged."""
        try:
            self.poster.post(walk.channel, text, [_context(text), *(extra or ())], thread_ts=walk.thread)
        except Exception as err:
            log.error("walk %s: could not post to the thread (%s): %s", walk.walk_id, err, text)

    def report_failure(self, walk: Walk, what: str, err: Exception) -> None:
        """Say in the thread (or, failing that, the log) what failed, with the walk id."""
        text = f":x: {escape(what)} (walk `{walk.walk_id}`): {escape(str(err))}"
        log.error("walk %s: %s: %s", walk.walk_id, what, err)
        try:
            self.poster.post(walk.channel, text, [_context(text)], thread_ts=walk.thread)
        except Exception as again:
            log.error("walk %s: could not report the failure in the thread either: %s", walk.walk_id, again)

    def _ephemeral(self, channel: str, user: str | None, text: str, thread_ts: str | None = None) -> None:
        if user is None:
            # Nobody asked (an alert opened the walk): the thread it was to run in hears it instead.
            log.warning("no user to answer: %s", text)
            if thread_ts is not None:
                try:
                    self.poster.post(channel, text, [_context(text)], thread_ts=thread_ts)
                except Exception as err:
                    log.error("could not say in the thread either: %s", err)
            return
        try:
            self.poster.ephemeral(channel, user, text)
        except Exception as err:
            log.error("could not answer %s ephemerally: %s (%s)", user, err, text)


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}
