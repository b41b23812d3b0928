"""Cordon and uncordon a GPU node: the one write the bot makes.

The rules (breaker, who may be undone, idempotence) are decided in
layers/remedy.py; this module reads the nodes, applies the patch through
ClusterWriter.patch_node, and says what happened. Nothing is sent when there
is nothing to change, or on a dry run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from layers import remedy as rm
from layers.sources import Cluster, ClusterWriter, K8sObject, SourceError
from layers.target import check_object_name


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
) -> CordonOutcome:
    """Cordon a GPU node unless the breaker says no. Raises SourceError (not_found, forbidden, ...)."""
    check_object_name(node, "node")
    try:
        nodes = cluster.list_nodes()
    except SourceError as err:
        raise _forbidden(err, node, "check the circuit breaker before cordoning") from None
    decision = rm.cordon_plan(
        nodes, node, reason, actor, time.time() if now is None else now, max_fraction=max_fraction
    )
    if decision.action == "not-found":
        raise _not_found(node)
    if decision.action != "cordon" or decision.patch is None:
        return CordonOutcome(decision.action, node, decision.message)
    if dry_run:
        return CordonOutcome(
            "cordon", node, f"dry run: would {decision.message}", decision.patch, dry_run=True
        )
    _apply(writer, node, decision.patch, "cordon")
    return CordonOutcome("cordon", node, f"cordoned {node}: {reason.strip()}", decision.patch, applied=True)


def uncordon(
    cluster: Cluster, writer: ClusterWriter, node: str, *, force: bool = False, dry_run: bool = False
) -> CordonOutcome:
    """Undo a cordon gpubot made (any cordon with force)."""
    check_object_name(node, "node")
    try:
        obj: K8sObject | None = cluster.get_node(node)
    except SourceError as err:
        if err.kind == "not_found":
            raise _not_found(node) from None
        raise _forbidden(err, node, "uncordon") from None
    decision = rm.uncordon_plan(obj, node, force=force)
    if decision.action != "uncordon" or decision.patch is None:
        return CordonOutcome(decision.action, node, decision.message)
    if dry_run:
        return CordonOutcome(
            "uncordon", node, f"dry run: would {decision.message}", decision.patch, dry_run=True
        )
    _apply(writer, node, decision.patch, "uncordon")
    return CordonOutcome(
        "uncordon",
        node,
        decision.message.replace("uncordon ", "uncordoned ", 1),
        decision.patch,
        applied=True,
    )
