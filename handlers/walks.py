"""The walk service: one incident thread per walk, its state in the state store.

A walk is a target (a pod, or a node from the digest), the channel and root
message of its thread, and the layers done so far with their results. Every
piece lives in the state store under the walk id, one key per layer, so a
click on any replica, after any restart, continues the same walk; a layer is
claimed (a lease, handlers/walkclaims.py) before it runs, so two clicks never
run it twice, and a holder that died frees it within the lease.

`/gpu why` and the buttons take the same path: `start` then `follow`,
`descend`, `jump` or `walk_all`, each layer posted in the thread as it
completes and the root's layer track updated in place. The observer port
counts walks, layer durations and findings, and tags every log line of a
walk with its id.

What a walk says besides its layers (audit lines, failures, answers to whoever
asked) is handlers/telling.py's `Teller` (`self.tell`); where a navigation
button goes next is handlers/walkstate.py's; claims, leases and the posted
marks are handlers/walkclaims.py's `LayerClaims` (`self.claims`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from msgspec.structs import replace

from handlers.blocks import layer_message, node_in_question, root_message
from handlers.commands import usage_reply
from handlers.escape import escape
from handlers.ports import (
    NoObserver,
    SlackPoster,
    StateStore,
    StateUnavailable,
    WalkObserver,
)
from handlers.telling import Teller, unexpected
from handlers.walkclaims import CLAIM_S, LayerClaims
from handlers.walkrecords import STORE_DOWN, WalkRecords
from handlers.walkstate import Walk, layer_to_dict, new_walk_id
from layers.facts.context import WalkContext
from layers.findings import LayerResult, Target, WalkResult
from layers.sources import SourceError
from layers.walk import LAYERS, run_layer

log = logging.getLogger("gpubot.walks")

RETENTION_S = 14 * 24 * 3600
__all__ = ["CLAIM_S", "RETENTION_S", "WalkService"]


# Opens a fresh context for a target (reads the pod or node; SourceError when it cannot).
OpenWalk = Callable[[Target], WalkContext]


class WalkService(WalkRecords):
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
        self.tell = Teller(poster)  # audit lines and failures, in the thread or to whoever asked
        self.open_walk = open_walk
        self.retention_s = retention_s
        self.cluster_name = cluster_name
        self.clock = clock
        self.claims = LayerClaims(state, retention_s, claim_s, clock)

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
            try:
                return self._start(channel, user, target, thread_ts, walk_id)
            except Exception as err:  # before the root exists (a bug): the requester hears it
                log.exception("walk %s of %s failed before it started", walk_id, target.label)
                self.tell.ephemeral(
                    channel,
                    user,
                    f":x: walk `{walk_id}` of {escape(target.label)} failed before it started: "
                    f"{escape(unexpected(err))}",
                    thread_ts,
                )
                return None

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
            self.tell.ephemeral(channel, user, text, thread_ts)
            return None
        walk = self._new(walk_id, ctx.target, channel, user, thread_ts)
        root = root_message(WalkResult(ctx.target, ()), user, self.cluster_name, running=True)
        try:
            # At most once: a retry after a lost answer must not leave a second root "walking…" forever.
            ref = self.poster.post(
                channel, root.text, root.blocks, thread_ts=thread_ts, key=f"{walk_id}:root"
            )
        except Exception as err:
            log.error("walk %s: could not post the root message: %s", walk.walk_id, err)
            self.tell.ephemeral(
                channel,
                user,
                f":x: could not post in this channel (walk `{walk.walk_id}`): {escape(str(err))}",
            )
            return None
        walk = replace(walk, root_ts=ref.ts)
        ran: list[LayerResult] = []
        try:
            self.state.set(self._key(walk.walk_id), walk.to_dict(), self.retention_s)
        except Exception as err:
            self._stopped(walk, ran, err)
            return None
        log.info("walk %s started for %s by %s", walk.walk_id, walk.target.label, user)
        self.observer.walk_started()
        try:
            self._follow(walk, 1, ctx, ran)
        except Exception as err:  # the store, or anything else (a bug): said, never "walking…" forever
            self._stopped(walk, ran, err)
            return None
        finally:
            # Counted even when the run broke off (the store went down): started and finished pair up.
            self.observer.walk_finished(WalkResult(walk.target, tuple(ran)))
        return walk

    def _new(
        self, walk_id: str, target: Target, channel: str, requester: str | None, thread_ts: str | None
    ) -> Walk:
        """A walk of this cluster created now, its root not posted yet."""
        return Walk(walk_id, target, channel, requester, None, thread_ts, self.clock(), self.cluster_name)

    def node_walk(self, walk_id: str, node: str, channel: str, thread_ts: str | None) -> Walk:
        """The walk behind a digest row's buttons: one per digest and node, created on first click."""
        return self.prepare(walk_id, Target(namespace=None, pod=None, node=node), channel, thread_ts)

    def prepare(self, walk_id: str, target: Target, channel: str, thread_ts: str | None) -> Walk:
        """A walk not started yet (a Diagnose button's), stored unless it exists: its first click starts it."""
        walk = self._new(walk_id, target, channel, None, thread_ts)
        self.state.set_if_absent(self._key(walk_id), walk.to_dict(), self.retention_s)
        return self.load(walk_id)

    # --- running layers -------------------------------------------------------------------

    def claim(self, walk_id: str, name: str, who: str | None, ttl_s: int | float | None = None) -> bool:
        """Take `name` for this walk exactly once (across replicas)."""
        return self.claims.claim(walk_id, name, who, ttl_s)

    def release(self, walk_id: str, name: str) -> None:
        self.claims.release(walk_id, name)

    def release_quietly(self, walk_id: str, name: str) -> None:
        self.claims.release_quietly(walk_id, name)

    def take_layer(self, walk: Walk, layer: int, who: str | None) -> bool:
        """This caller now holds the layer (False: it is posted, by this run or another); a holder
        still running it is waited for, one that died is taken over once its lease lapses."""
        return self.claims.take_layer(
            walk.walk_id, layer, who, lambda: self.claims.posted(walk.walk_id, layer)
        )

    def _run_one(
        self, walk: Walk, layer: int, ctx: WalkContext | None, *, claimed: bool = False
    ) -> tuple[LayerResult | None, WalkContext | None]:
        """Run and post one layer unless someone else has it; (None, ctx) when it was taken."""
        name = f"layer:{layer}"
        if not claimed and not self.take_layer(walk, layer, walk.requester):
            # Posted by another holder meanwhile (waited for): its result is this walk's too.
            return self.results(walk.walk_id).get(layer), ctx
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
            self.tell.report_failure(walk, f"layer {layer} could not run", err)
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
        earlier: list[LayerResult] = []  # the thread so far: what it showed is not shown again
        try:
            stored = self.results(walk.walk_id)
            done |= set(stored)
            earlier = [r for n, r in stored.items() if n != layer]
        except StateUnavailable as err:  # the buttons then offer layers done before: a click says so
            log.warning("walk %s: layers done not read for layer %s's buttons: %s", walk.walk_id, layer, err)
        node = node_in_question(walk.target, result)
        msg = layer_message(
            result, walk.walk_id, node, done, self.cluster_name, target=walk.target, earlier=earlier
        )
        self._post_layer(walk, msg, key=f"{walk.walk_id}:layer:{layer}")
        if lost is not None:
            self.tell.report_failure(
                walk, f"layer {layer} ran but could not be stored; its buttons may not see it", lost
            )
            return
        try:
            self.claims.mark_posted(walk.walk_id, layer)  # a durable fact, not the lease it ran under
        except StateUnavailable as err:  # the stored result still marks the layer done
            log.warning("walk %s: layer %s not marked posted: %s", walk.walk_id, layer, err)

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
            self.tell.report_failure(walk, f"the walk stopped after layer(s) {done}: {STORE_DOWN}", err)
        finally:
            self.update_root(walk, running=False)
        return ran

    def resume(self, walk: Walk) -> list[LayerResult]:
        """Carry on a walk whose run broke off (its agent died): from the first layer of the default
        path not yet done. Layers done stay as posted; nothing is posted twice."""
        with self.observer.scope(walk.walk_id):
            done = self.results(walk.walk_id)
            for n, result in done.items():
                # Stored but never marked posted: its agent died between the two. Its claim (a
                # lease) lapses, so it can be taken: post it now rather than lose it.
                if not self.claims.posted(walk.walk_id, n) and self.take_layer(walk, n, walk.requester):
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
                    break  # it failed and said so
                ran.append(result)
                done.add(layer)
                layer = result.next_layer
                running = layer is not None and layer not in done
                self.update_root(walk, running=running)
        finally:
            if running:
                self.update_root(walk, running=False)
