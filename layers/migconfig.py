"""Layer 1's L1_MIG_CONFIG_FAILED: a candidate node's MIG layout was asked for and never applied.

It outranks L1_RESOURCE_MISMATCH: when the pod asks for a MIG profile that a failed node's
layout names, the request is right and the MIG manager is what to fix (spec/findings.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from layers.facts import migstate as mig
from layers.facts import objects as o
from layers.facts.candidates import mig_layout_offers
from layers.facts.context import WalkContext
from layers.facts.logs import LogReads
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 1
MAX_NODES = 10  # MIG manager logs read per walk: a fleet-wide failure is the digest's to list


def mig_config_failed(
    ctx: WalkContext, candidates: Sequence[K8sObject], requests: Mapping[str, int]
) -> tuple[list[Finding], set[str]]:
    """The findings, and the requested resources a failed reconfiguration explains."""
    out: list[Finding] = []
    explained: set[str] = set()
    now = ctx.telemetry.now()
    for node in [n for n in candidates if mig.not_applied(n)][:MAX_NODES]:
        name = o.name(node)
        log, where, problems = _manager_log(ctx, name, now)
        out.extend(problems)
        since = _pending_since(ctx, name, log)
        stuck = mig.state(node) == "pending" and since is not None and now - since > mig.PENDING_LIMIT_S
        if mig.state(node) != "failed" and not stuck:
            continue
        explained |= {r for r in requests if mig_layout_offers(node, r)}
        out.append(_finding(node, log, where, since, now))
    return out, explained


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
