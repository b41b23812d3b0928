"""Button clicks: the same walk service as a typed command, plus the node actions for operators.

Order of a click: who may (operators only for must-gather and cordon: anyone
else gets an ephemeral refusal and nothing happens), which walk (the button's
value), a claim in the state store per walk + action (a second click on a
finished action is answered, not repeated), then the action with its audit
line in the thread (who, what, when: before a walk or must-gather, after a
cordon with what it did, and with an `uncordon_node` button when it changed
the node). If the state store is down the clicker is told so before anything
is done; once a node action has run, a store failure never hides it. Each
click is counted by its action id and outcome through the walk service's
observer, and logged under its walk id.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

import msgspec

from handlers.blocks import (
    CORDON,
    DESCEND,
    JUMP,
    MUST_GATHER,
    UNCORDON,
    WALK_ALL,
    node_in_question,
    uncordon_actions,
)
from handlers.clicks import Click, walk_id_of
from handlers.digest import BEING_POSTED, DIAGNOSE, DIGEST_KEY, DIGEST_POSTED, parse_button_value
from handlers.escape import escape
from handlers.operators import Operators
from handlers.ports import Attachment, StateUnavailable
from handlers.telling import unexpected
from handlers.walks import WalkService
from handlers.walkstate import Walk, WalkGone, next_after, remaining, suggested
from layers.facts.target import check_object_name
from layers.findings import Target, WalkResult

log = logging.getLogger("gpubot.buttons")

OPERATOR_ACTIONS = frozenset({MUST_GATHER, CORDON, UNCORDON})

# What came of a click (the `outcome` of the actions counter).
DONE = "done"
REFUSED = "refused"  # not an operator
REPEATED = "repeated"  # already done (or being done) for this walk
FAILED = "failed"
UNCHANGED = "unchanged"  # the node action found nothing to do, or its breaker said no
NOTHING = "nothing_to_do"  # no layer left to go to, no node to act on
EXPIRED = "expired"  # the walk is past its retention
INVALID = "invalid"  # a button value or action id we do not understand
STATE_DOWN = "state_unavailable"


class Outcome(msgspec.Struct, frozen=True):
    """What a node action did: `changed` False when it refused or found nothing to do."""

    changed: bool
    message: str


class Bundle(msgspec.Struct, frozen=True):
    path: str
    filename: str
    summary: str


class NodeActions(Protocol):
    """The node actions bot/slack/app.py provides over bot/actions/cordon.py and bot/actions/bundle_writer.py."""

    def cordon(self, node: str, actor: str, reason: str) -> Outcome: ...

    def uncordon(self, node: str, actor: str) -> Outcome: ...

    def must_gather(self, node: str, target: Target, walk: WalkResult | None, actor: str) -> Bundle: ...


def when(now: float) -> str:
    """A Slack date token (shown in the reader's time zone) with a UTC fallback."""
    iso = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    return f"<!date^{int(now)}^{{date_short_pretty}} {{time_secs}}|{iso}>"


class Buttons:
    def __init__(
        self,
        service: WalkService,
        operators: Operators,
        actions: NodeActions | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.service = service
        self.operators = operators
        self.actions = actions
        self.clock = clock

    # --- entry -----------------------------------------------------------------------------

    def handle(self, click: Click) -> None:
        observer = self.service.observer
        with observer.scope(walk_id_of(click)):
            outcome = FAILED  # unless the handler says otherwise (an exception leaves it failed)
            try:
                outcome = self._handle(click)
            except Exception as err:  # before its walk was read (a bug): the clicker hears it
                log.exception("%s by %s failed", click.action_id, click.user)
                self._tell(
                    click,
                    f":x: *{click.action_id.replace('_', ' ')}* failed (walk `{walk_id_of(click) or 'unknown'}`): "
                    f"{escape(unexpected(err))}",
                )
            finally:
                observer.action(click.action_id, outcome)

    def _handle(self, click: Click) -> str:
        if click.action_id in OPERATOR_ACTIONS and not self.operators.allows(click.user):
            self._tell(
                click,
                f":no_entry: only operators may use *{click.action_id.replace('_', ' ')}*: "
                "ask someone listed in GPUBOT_OPERATORS or GPUBOT_OPERATOR_GROUPS. Nothing was done.",
            )
            return REFUSED
        try:
            walk = self._digest_walk(click) if "|" in click.value else self.service.load(click.value)
            if walk.channel != click.channel:
                # A walk's buttons live in its own channel; a click from elsewhere is forged or replayed.
                raise ValueError(
                    f"it belongs to a walk in another channel ({walk.walk_id}); nothing was done"
                )
        except ValueError as err:
            self._tell(click, f"this button is not understood: {escape(str(err))}")
            return INVALID
        except WalkGone as err:
            self._tell(click, f":hourglass: {escape(str(err))}")
            return EXPIRED
        except StateUnavailable as err:
            self._state_down(click, err)
            return STATE_DOWN
        handler = {
            DESCEND: self._descend,
            JUMP: self._jump,
            WALK_ALL: self._walk_all,
            MUST_GATHER: self._must_gather,
            CORDON: self._cordon,
            UNCORDON: self._uncordon,
            DIAGNOSE: self._diagnose,
        }.get(click.action_id)
        if handler is None:
            self._tell(click, f"unknown button {escape(click.action_id)!r}")
            return INVALID
        try:
            return handler(click, walk)
        except StateUnavailable as err:
            self._state_down(click, err)
            return STATE_DOWN
        except Exception as err:  # anything else (a bug): said in the walk's thread, never silent
            self.service.tell.say_failure(
                walk, click.user, f"{click.action_id.replace('_', ' ')} by {click.user} failed", err
            )
            return FAILED

    # --- helpers --------------------------------------------------------------------------

    def _tell(self, click: Click, text: str) -> None:
        try:
            self.service.poster.ephemeral(click.channel, click.user, text)
        except Exception as err:
            log.error("could not answer %s about %s: %s", click.user, click.action_id, err)

    def _state_down(self, click: Click, err: BaseException) -> None:
        log.error("state store unreachable at a %s click: %s", click.action_id, err)
        self._tell(
            click,
            ":x: the bot's state store (Redis) is unreachable, so nothing was done; "
            "try again in a moment. If it persists, check REDIS_URL and the Redis service.",
        )

    def _claim(self, walk: Walk, name: str, user: str, ttl_s: int | float | None = None) -> bool:
        return self.service.claim(walk.walk_id, name, user, ttl_s)

    def _release(self, walk: Walk, name: str) -> None:
        """After an action has run (or failed), freeing its claim is best-effort: what happened is said."""
        self.service.release_quietly(walk.walk_id, name)

    def _audit(self, walk: Walk, click: Click, what: str, extra: list[dict[str, Any]] | None = None) -> None:
        self.service.tell.note(walk, f"<@{click.user}> {what} · {when(self.clock())}", extra)

    def _digest_walk(self, click: Click) -> Walk:
        """A digest row's buttons carry `<digest id>|<node>`: one node walk per digest and node."""
        did, node = parse_button_value(click.value)
        check_object_name(node, "node")
        posted = self.service.state.get(DIGEST_POSTED.format(did, click.channel))
        if posted is None or (
            click.message_ts is not None and posted not in (BEING_POSTED, click.message_ts)
        ):
            raise ValueError(f"{did} is not a digest this bot posted in this channel; nothing was done")
        flagged = {
            str(f.get("node"))
            for f in (self.service.state.get(DIGEST_KEY.format(did)) or {}).get("flagged", [])
        }
        if node not in flagged:
            raise ValueError(f"{node} is not flagged in {did}; nothing was done")
        return self.service.node_walk(f"{did}.{node}", node, click.channel, click.message_ts)

    def _diagnose(self, click: Click, walk: Walk) -> str:
        node = walk.target.node or walk.target.label  # a storm summary's row may name a pod
        # A started walk has its root posted; the claim only covers the run itself (a dead replica's
        # claim expires after the service's claim_s instead of blocking the button for the whole retention).
        if walk.root_ts is not None or not self._claim(walk, "diagnose", click.user, self.service.claim_s):
            self._tell(click, f"{escape(node)} is already being diagnosed in this message's thread.")
            return REPEATED
        self._audit(walk, click, f"asked to diagnose `{escape(node)}`")
        started = self.service.start(
            walk.channel, click.user, walk.target, thread_ts=walk.thread, walk_id=walk.walk_id
        )
        if started is None:
            self._release(walk, "diagnose")
            return FAILED
        return DONE

    # --- navigation (anyone) ------------------------------------------------------------------

    def _run_layer(self, click: Click, walk: Walk, layer: int | None, verb: str) -> str:
        if layer is None:
            self._tell(click, "there is no layer to go to from here: the walk has reached its end.")
            return NOTHING
        # Posted is a durable fact; a claim is a lease: another click still running the layer is
        # waited for, one whose replica died is taken over once its lease lapses (WalkService).
        if not self.service.take_layer(walk, layer, click.user):
            self._tell(click, f"layer {layer} has already been run for this walk: see the thread.")
            return REPEATED
        self._audit(walk, click, f"{verb} layer {layer}")
        # The layer was claimed for this click, so nothing ran only when it failed (and said so).
        return DONE if self.service.run_layers(walk, [layer], claimed=True) else FAILED

    def _descend(self, click: Click, walk: Walk) -> str:
        return self._run_layer(
            click, walk, next_after(self.service.results(walk.walk_id), click.from_layer), "descended to"
        )

    def _jump(self, click: Click, walk: Walk) -> str:
        return self._run_layer(
            click, walk, suggested(self.service.results(walk.walk_id), click.from_layer), "jumped to"
        )

    def _walk_all(self, click: Click, walk: Walk) -> str:
        left = remaining(self.service.results(walk.walk_id))
        if not left:
            self._tell(click, "every layer has already been run for this walk: see the thread.")
            return NOTHING
        # Held only while this click runs: each layer's own claim keeps it from running twice.
        if not self._claim(walk, "walk_all", click.user, self.service.claim_s):
            self._tell(click, "the remaining layers are already being walked for this thread.")
            return REPEATED
        try:
            self._audit(walk, click, "walked the remaining layers (" + ", ".join(map(str, left)) + ")")
            ran = self.service.run_layers(walk, left)
        finally:
            self._release(walk, "walk_all")
        # Layers another click took meanwhile are not failures; none run at all is.
        return DONE if ran else FAILED

    # --- node actions (operators) ---------------------------------------------------------------

    def _node(self, click: Click, walk: Walk) -> str | None:
        """The node the clicked message offered to act on (see blocks.node_in_question)."""
        results = self.service.results(walk.walk_id)
        layer = click.from_layer
        clicked = [results[layer]] if layer in results else list(results.values())
        node = node_in_question(walk.target, *clicked)
        if node is None:
            self._tell(click, f"{escape(walk.target.label)} is not on a node: no node to act on.")
            return None
        if self.actions is None:
            self._tell(click, "node actions are not available on this bot.")
            return None
        return node

    def _cordon(self, click: Click, walk: Walk) -> str:
        return self._schedule(click, walk, "cordon", "uncordon")

    def _uncordon(self, click: Click, walk: Walk) -> str:
        return self._schedule(click, walk, "uncordon", "cordon")

    def _schedule(self, click: Click, walk: Walk, verb: str, undo: str) -> str:
        """Cordon or uncordon the walk's node, once per thread until the other undoes it.

        Two records: `verb:node`, durable, says it was done (until the opposite action is done);
        `verb:node:running` is a lease (claim_s, renewed while the action runs) that keeps a second
        click from running it alongside. A holder SIGKILLed mid-action stops renewing it, so within
        the lease another click or replica (an agent taking the entry over) runs it instead of
        answering "already done" for an action nobody finished. Once the node action has run, the
        thread hears of it first (the audit line, or the failure); claims are then freed
        best-effort, so a store failure never hides it.
        """
        node = self._node(click, walk)
        if node is None or self.actions is None:
            return NOTHING
        done, running = f"{verb}:{node}", f"{verb}:{node}:running"
        if not self._take(walk, done, running, click.user):
            self._tell(click, f"{escape(node)} was already {verb}ed from this thread: nothing more to do.")
            return REPEATED
        actor = f"slack:{click.user}"
        try:
            reason = self._cordon_reason(walk) if verb == "cordon" else ""
        except StateUnavailable:
            self._release(walk, running)
            raise  # nothing was done yet: the clicker is told so
        try:
            if verb == "cordon":
                outcome = self.actions.cordon(node, actor, reason)
            else:
                outcome = self.actions.uncordon(node, actor)
        except Exception as err:
            # Freed before the failure is said: a retry prompted by the report must find it free.
            self._release(walk, running)
            self.service.tell.report_failure(walk, f"{verb} {node} requested by {click.user} failed", err)
            return FAILED
        if outcome.changed:
            undo_button = (
                [uncordon_actions(walk.walk_id, node, click.from_layer)] if verb == "cordon" else None
            )
            self._audit(walk, click, f"{verb}ed `{escape(node)}`: {escape(outcome.message)}", undo_button)
            self._finish(walk, done, running, click.user)
            # Done: the opposite action becomes possible again from this thread.
            self._release(walk, f"{undo}:{node}")
            return DONE
        # Nothing changed (refused by the breaker, already in that state): a later click may try again.
        self._audit(walk, click, f"asked to {verb} `{escape(node)}`: {escape(outcome.message)}")
        self._release(walk, running)
        return UNCHANGED

    def _take(self, walk: Walk, done: str, running: str, user: str) -> bool:
        """The running lease for this click, unless the action is done (or still running after a
        whole lease: a live holder renews it; a dead one's lapses within claim_s, then it is ours)."""
        return self.service.claims.take_action(walk.walk_id, done, running, user)

    def _finish(self, walk: Walk, done: str, running: str, user: str) -> None:
        """The durable record first, then the lease is freed (it no longer guards anything)."""
        self._claim(walk, done, user)
        self._release(walk, running)

    def _cordon_reason(self, walk: Walk) -> str:
        """The reason annotated on the node: the walk and its verdict."""
        reason = f"gpubot walk {walk.walk_id} ({walk.target.label})"
        verdict = self.service.walk_result(walk).verdict
        return reason + f": {verdict.code}" if verdict is not None else reason

    def _must_gather(self, click: Click, walk: Walk) -> str:
        """One bundle per node and thread: a lease while it is collected (renewed; a SIGKILLed
        holder's lapses within claim_s and the next click or replica collects it), then a durable
        record once it is attached."""
        node = self._node(click, walk)
        if node is None or self.actions is None:
            return NOTHING
        done, running = f"must_gather:{node}", f"must_gather:{node}:running"
        if not self._take(walk, done, running, click.user):
            self._tell(click, f"a must-gather for {escape(node)} is already in this thread (or on its way).")
            return REPEATED
        self._audit(walk, click, f"started a must-gather of `{escape(node)}`")
        try:
            # Who took it goes to the node's ledger with the bundle (as a cordon's actor does).
            bundle = self.actions.must_gather(
                node, walk.target, self.service.walk_result(walk), f"slack:{click.user}"
            )
            try:
                with open(bundle.path, "rb") as fh:
                    content = fh.read()
            finally:
                os.unlink(bundle.path)  # a temporary file: ours to remove once read
            self.service.poster.upload(
                walk.channel, Attachment(bundle.filename, content), thread_ts=walk.thread
            )
        except Exception as err:
            self._release(walk, running)  # before the report, as for cordon
            self.service.tell.report_failure(walk, f"must-gather of {node} failed", err)
            return FAILED
        self._finish(walk, done, running, click.user)
        self.service.tell.note(walk, f"must-gather of `{escape(node)}` attached: {escape(bundle.summary)}")
        return DONE
