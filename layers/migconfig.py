"""Layer 1's L1_MIG_CONFIG_FAILED: a candidate node's MIG layout was asked for and never applied.

It outranks L1_RESOURCE_MISMATCH: when the pod asks for a MIG profile that a failed node's
layout names, the request is right and the MIG manager is what to fix (spec/findings.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import msgspec.structs

from layers.facts import migstate as mig
from layers.facts import objects as o
from layers.facts.candidates import mig_layout_offers
from layers.facts.context import WalkContext
from layers.facts.fold import shown
from layers.facts.logs import LogReads
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 1
MAX_NODES = 10  # MIG manager logs read per walk; the nodes beyond are named, never dropped
NOT_APPLIED_CMD = (
    f"kubectl get nodes -l '{mig.STATE_LABEL} in (failed,pending)' -L {mig.CONFIG_LABEL},{mig.STATE_LABEL}"
)


def mig_config_failed(
    ctx: WalkContext, candidates: Sequence[K8sObject], requests: Mapping[str, int]
) -> tuple[list[Finding], set[str]]:
    """The findings, and the requested resources a failed reconfiguration explains."""
    out: list[Finding] = []
    explained: set[str] = set()
    now = ctx.telemetry.now()
    not_applied = [n for n in candidates if mig.not_applied(n)]
    checked, rest = not_applied[:MAX_NODES], not_applied[MAX_NODES:]
    for node in checked:
        name = o.name(node)
        log, where, problems = _manager_log(ctx, name, now)
        out.extend(problems)
        since = _pending_since(ctx, name, log)
        stuck = mig.state(node) == "pending" and since is not None and now - since > mig.PENDING_LIMIT_S
        if mig.state(node) != "failed" and not stuck:
            continue
        explained |= {r for r in requests if mig_layout_offers(node, r)}
        out.append(_finding(node, log, where, since, now))
    if rest:
        # Their label alone says a failed layout was asked for: that explains the request without a read.
        explained |= {
            r for n in rest if mig.state(n) == "failed" for r in requests if mig_layout_offers(n, r)
        }
        out = _say_unread(out, rest)
    return out, explained


def _say_unread(out: list[Finding], rest: Sequence[K8sObject]) -> list[Finding]:
    """The candidates past MAX_NODES, in the evidence of every MIG finding (or one unknown without one)."""
    states = Counter(mig.state(n) for n in rest)
    line = (
        f"… and {len(rest)} more node{'s' if len(rest) != 1 else ''} with the MIG config not applied, not read "
        f"(MIG manager log and events, {MAX_NODES} nodes read per walk): {shown([o.name(n) for n in rest])} "
        f"({', '.join(f'{s} {c}' for s, c in sorted(states.items()))}); see {NOT_APPLIED_CMD}"
    )
    if not any(f.code == "L1_MIG_CONFIG_FAILED" for f in out):
        summary = (
            f"the MIG manager was checked on the first {MAX_NODES} candidate nodes whose MIG config is not "
            f"applied; {len(rest)} more were not"
        )
        return [*out, unknown(LAYER, summary, evidence=[line])]
    return [
        msgspec.structs.replace(f, evidence=(*f.evidence, line), commands=(*f.commands, NOT_APPLIED_CMD))
        if f.code == "L1_MIG_CONFIG_FAILED"
        else f
        for f in out
    ]


def _manager_log(ctx: WalkContext, node: str, now: float) -> tuple[mig.ManagerLog | None, str, list[Finding]]:
    try:
        pods = ctx.operator_pods_on(node, "mig-manager")
    except SourceError as err:
        return None, "", [unknown(LAYER, f"could not list the MIG manager on {node}: {err}", node=node)]
    for pod in pods:
        reads = LogReads(ctx, LAYER)
        text = reads.log(pod, mig.MIG_MANAGER_CONTAINER)
        if reads.failed:
            return None, "", reads.unknowns("the MIG manager's reconfiguration was not checked")
        return mig.read_manager_log(text, now), f"{o.namespace(pod) or 'default'}/{o.name(pod)}", []
    return None, "", []


def _pending_since(ctx: WalkContext, node: str, log: mig.ManagerLog | None) -> float | None:
    if log is not None and log.pending_since is not None:
        return log.pending_since
    try:
        return mig.pending_since_events(ctx.events("Node", None, node))
    except SourceError:
        return None  # no events to tell: the label alone says pending, not for how long


def _finding(
    node: K8sObject, log: mig.ManagerLog | None, where: str, since: float | None, now: float
) -> Finding:
    name, state, layout = o.name(node), mig.state(node), mig.layout(node) or "(none)"
    offered = ", ".join(f"{r}={q}" for r, q in sorted(o.advertised(node).items())) or "no GPU resource"
    how = "failed" if state == "failed" else f"pending for {int((now - (since or now)) // 60)} min"
    evidence = [f"{mig.CONFIG_LABEL}={layout}", f"{mig.STATE_LABEL}={state}", f"advertised: {offered}"]
    if log is not None:
        evidence += [f"[{where}] {line}" for line in log.errors]
    commands = [f"kubectl get node {name} -L {mig.CONFIG_LABEL},{mig.STATE_LABEL}"]
    if where:
        ns, pod = where.split("/", 1)
        commands.append(f"kubectl logs -n {ns} {pod} -c {mig.MIG_MANAGER_CONTAINER} --tail=50")
    return finding(
        "L1_MIG_CONFIG_FAILED",
        f"{name}: the MIG manager could not apply {mig.CONFIG_LABEL}={layout} ({how}), so the node still "
        f"advertises its old layout ({offered}): the pod's request is right — free the GPUs (drain GPU "
        "clients) and re-apply the layout",
        evidence=evidence,
        commands=commands,
        node=name,
    )
