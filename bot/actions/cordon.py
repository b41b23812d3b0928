"""Cordon and uncordon a GPU node: the one write the bot makes.

The rules (breaker, who may be undone, idempotence) are decided in
layers/remedy.py; this module reads the nodes, applies the patch through
ClusterWriter.patch_node, and says what happened. Nothing is sent when there
is nothing to change, or on a dry run.

The breaker is only as good as its count: two cordons that both list the
nodes before either patches would both pass it. So the list, the decision and
the patch run under one lock, "cordon-breaker": the state store's (Redis:
across replicas and the CLI) when one is given, else a lock of this process.
A cordon that cannot get the lock in time is refused: "another cordon is in
progress, try again".
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

from bot.actions.history import record_action
from bot.ledger.store import Ledger
from handlers.ports import LockNotAcquired, StateStore, StateUnavailable
from layers import nodepolicy
from layers import remedy as rm
from layers.facts.context import component
from layers.facts.objects import name as name_of
from layers.facts.target import check_object_name
from layers.sources import Cluster, ClusterWriter, K8sObject, SourceError


@dataclass(frozen=True)
class CordonOutcome:
    action: str  # "cordon", "uncordon", "already-cordoned", "not-cordoned", "refused"
    node: str
    message: str
    patch: dict[str, Any] | None = None
    applied: bool = False  # a PATCH was sent and accepted
    dry_run: bool = False

    @property
    def refused(self) -> bool:
        return self.action == "refused"


log = logging.getLogger("gpubot.cordon")

BREAKER_LOCK = "cordon-breaker"
# A plan and a patch are two API calls: seconds. The timeout frees the lock of a holder that died.
BREAKER_LOCK_TIMEOUT_S = 60.0
BREAKER_LOCK_WAIT_S = 15.0
BUSY = "another cordon is in progress, try again"

BreakerLock = Callable[[], AbstractContextManager[None]]

_process_breaker = threading.Lock()  # the lock of last resort: one process, no shared store


@contextmanager
def process_breaker_lock(wait_s: float = BREAKER_LOCK_WAIT_S) -> Iterator[None]:
    """Serialise cordons within this process (the CLI without REDIS_URL, tests)."""
    if not _process_breaker.acquire(timeout=wait_s):
        raise LockNotAcquired(f"lock {BREAKER_LOCK} is held elsewhere (waited {wait_s:g}s)")
    try:
        yield
    finally:
        _process_breaker.release()


def breaker_lock_name(cluster: str | None) -> str:
    """One breaker per cluster: clusters sharing a Redis (bot/cluster/) count their own nodes only."""
    return f"{BREAKER_LOCK}:{cluster}" if cluster else BREAKER_LOCK


def store_breaker_lock(
    store: StateStore,
    timeout_s: float = BREAKER_LOCK_TIMEOUT_S,
    wait_s: float = BREAKER_LOCK_WAIT_S,
    *,
    cluster: str | None = None,
) -> BreakerLock:
    """The breaker's lock in a state store: with Redis, every replica and CLI of the cluster sharing it."""
    name = breaker_lock_name(cluster)
    return lambda: store.lock(name, timeout_s=timeout_s, wait_s=wait_s)


def _forbidden(err: SourceError, node: str, what: str) -> SourceError:
    if err.kind != "forbidden":
        return err
    return SourceError(
        "forbidden",
        f"cannot {what} {node}: the Kubernetes API refused '{err.verb or 'patch'} {err.resource or 'nodes'}'",
        verb=err.verb or "patch",
        resource=err.resource or "nodes",
    )


def _not_found(node: str) -> SourceError:
    return SourceError("not_found", f'node "{node}" not found', resource="nodes")


def _apply(writer: ClusterWriter, node: str, patch: dict[str, Any], what: str) -> K8sObject:
    try:
        return writer.patch_node(node, patch)
    except SourceError as err:
        raise _forbidden(err, node, what) from None


def cordon(
    cluster: Cluster,
    writer: ClusterWriter,
    node: str,
    reason: str,
    actor: str,
    *,
    max_fraction: float = 0.25,
    dry_run: bool = False,
    now: float | None = None,
    breaker_lock: BreakerLock | None = None,
    ledger: Ledger | None = None,
) -> CordonOutcome:
    """Cordon a GPU node unless the breaker says no. Raises SourceError (not_found, forbidden, ...).

    The breaker's count and the patch happen under `breaker_lock` (default: this process's lock);
    a dry run changes nothing and takes no lock. An applied cordon is written to `ledger` (who,
    when, why): the node's annotations say it only while it lasts."""
    check_object_name(node, "node")
    if dry_run:
        return _cordon(cluster, writer, node, reason, actor, max_fraction, True, now)
    now = time.time() if now is None else now
    held = (breaker_lock or process_breaker_lock)()
    try:
        held.__enter__()
    except LockNotAcquired:
        return CordonOutcome("refused", node, f"{BUSY} ({node} was not cordoned)")
    except StateUnavailable as err:
        raise SourceError(
            "unavailable", f"cannot take the circuit breaker's lock to cordon {node}: {err}"
        ) from None
    try:
        outcome = _cordon(cluster, writer, node, reason, actor, max_fraction, False, now)
    except BaseException:
        with contextlib.suppress(StateUnavailable):
            held.__exit__(None, None, None)
        raise
    try:
        held.__exit__(None, None, None)
    except StateUnavailable as err:
        # The cordon is done; the lock expires on its own after its timeout.
        log.warning("cordon of %s applied, but the breaker's lock was not released: %s", node, err)
    return _recorded(outcome, ledger, now, actor, reason.strip())


def _recorded(
    outcome: CordonOutcome, ledger: Ledger | None, now: float, actor: str, detail: str
) -> CordonOutcome:
    """An applied cordon or uncordon written to the node's ledger; a failed write said in its message."""
    if not outcome.applied:
        return outcome
    note = record_action(ledger, outcome.node, outcome.action, now, actor, detail)
    return dataclasses.replace(outcome, message=f"{outcome.message} ({note})") if note else outcome


def _cordon(
    cluster: Cluster,
    writer: ClusterWriter,
    node: str,
    reason: str,
    actor: str,
    max_fraction: float,
    dry_run: bool,
    now: float | None,
) -> CordonOutcome:
    try:
        nodes = cluster.list_nodes()
    except SourceError as err:
        raise _forbidden(err, node, "check the circuit breaker before cordoning") from None
    decision = rm.cordon_plan(
        nodes, node, reason, actor, time.time() if now is None else now, max_fraction=max_fraction
    )
    if decision.action == "not-found":
        raise _not_found(node)
    notes = _after_cordon(cluster, nodes, node) if decision.action == "cordon" else []
    done = f"cordoned {node}: {reason.strip()}" + "".join(f" · {n}" for n in notes)
    outcome = _carry_out(writer, node, decision, "cordon", done, dry_run)
    if dry_run and notes:
        return dataclasses.replace(outcome, message=outcome.message + "".join(f" · {n}" for n in notes))
    return outcome


def _after_cordon(cluster: Cluster, nodes: list[K8sObject], node: str) -> list[str]:
    """What the platform does next (GKE Autopilot re-creation, the driver manager's uncordon),
    from the node and its driver pod's k8s-driver-manager settings; a failed read says nothing."""
    obj = next((n for n in nodes if name_of(n) == node), None)
    if obj is None:
        return []
    try:
        pods = cluster.list_pods(field_selector=f"spec.nodeName={node}")
    except SourceError:
        pods = []
    return list(nodepolicy.decide(obj, driver_pods=[p for p in pods if component(p) == "driver"]).confirm)


def uncordon(
    cluster: Cluster,
    writer: ClusterWriter,
    node: str,
    *,
    force: bool = False,
    dry_run: bool = False,
    actor: str = "",
    ledger: Ledger | None = None,
    now: float | None = None,
) -> CordonOutcome:
    """Undo a cordon gpubot made (any cordon with force). An applied uncordon is written to
    `ledger` (who, when): the cordon's annotations it removes were the only trace of it."""
    check_object_name(node, "node")
    try:
        obj: K8sObject | None = cluster.get_node(node)
    except SourceError as err:
        if err.kind == "not_found":
            raise _not_found(node) from None
        raise _forbidden(err, node, "uncordon") from None
    decision = rm.uncordon_plan(obj, node, force=force)
    done = decision.message.replace("uncordon ", "uncordoned ", 1)
    outcome = _carry_out(writer, node, decision, "uncordon", done, dry_run)
    return _recorded(outcome, ledger, time.time() if now is None else now, actor, done)


def _carry_out(
    writer: ClusterWriter,
    node: str,
    decision: rm.CordonDecision | rm.UncordonDecision,
    verb: str,
    done: str,
    dry_run: bool,
) -> CordonOutcome:
    """A plan's decision: nothing to do (it says why), a dry run (what would change), or applied."""
    if decision.action != verb or decision.patch is None:
        return CordonOutcome(decision.action, node, decision.message)
    if dry_run:
        return CordonOutcome(verb, node, f"dry run: would {decision.message}", decision.patch, dry_run=True)
    _apply(writer, node, decision.patch, verb)
    return CordonOutcome(verb, node, done, decision.patch, applied=True)
