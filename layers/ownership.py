"""The node's other owners in every layer (spec/findings.md, "Who else acts on a node").

One pass over a layer's findings after the layer ran (layers/walk.py, run_layer):

- every finding about a node in an owner's flow names the owner and its state;
- owner maintenance is not a fault: on a node in the driver upgrade's, the driver manager's or
  the MIG manager's flow, missing GPUs, operators waiting in Init, a stuck validator and a driver
  pod not Ready become `info` lines naming the flow, with no `next` (so no jump to layer 5);
  `upgrade-failed` is not maintenance and stays `L3_DRIVER_UPGRADE_FAILED`;
- layer 1 says the owners of the pod's node (or of candidate nodes) first, health agents'
  conditions included: an owner's taint is the owner at work, not a toleration to add;
- layer 5 turns health agents' fault conditions into `L5_HEALTH_AGENT_CONDITION`, and the Xids
  they name into `L5_XID` evidence with the condition as their source.
"""

from __future__ import annotations

import msgspec.structs

from layers import nodepolicy, xid
from layers.facts import cordons
from layers.facts import healthagents as ha
from layers.facts import objects as o
from layers.facts import owners as ow
from layers.facts.context import WalkContext
from layers.facts.fold import MAX_LISTED, fold, listed
from layers.facts.placement import selector_misses
from layers.findings import Finding, LayerResult, Severity, finding, unknown
from layers.sources import K8sObject, SourceError

# What an owner's maintenance looks like from each layer, said as its flow at work.
MAINTENANCE: dict[str, str] = {
    "L1_ALLOCATABLE_BELOW_CAPACITY": "GPUs are not allocatable",
    "L1_GPU_NODE_NOT_ADVERTISING": "the device plugin is paused and the node advertises no GPU",
    "L2_WAITING_FOR_DRIVER": "GPU Operator pods wait in Init for the driver",
    "L2_VALIDATOR_STUCK": "the operator validator waits for the driver",
    "L2_OPERAND_FAILING": "a GPU Operator operand is not Ready",
    "L5_ALLOCATABLE_BELOW_CAPACITY": "GPUs are not allocatable",
}
OWNER_LINE = nodepolicy.OWNER_LINE
owner_line = nodepolicy.owner_line


def _node(ctx: WalkContext, name: str | None) -> K8sObject | None:
    if not name:
        return None
    try:
        return ctx.node(name)
    except SourceError:
        return None


def _maintenance(f: Finding, held: ow.Held) -> Finding:
    what = MAINTENANCE[f.code]
    return msgspec.structs.replace(
        f,
        severity=Severity.INFO,
        next=None,
        summary=(
            f"{f.node} is in the {held.owner}'s flow ({held.state}): {what}, as that flow does — "
            "not a fault; let it finish"
        ),
        evidence=(owner_line(held), f"without the owner this would read: {f.summary}", *f.evidence),
    )


def policy_of(ctx: WalkContext, name: str | None) -> tuple[nodepolicy.NodePolicy | None, str | None]:
    """The decision table's answer for one node of the walk (layers/nodepolicy.py), read once per
    walk with its driver pods (the driver manager's uncordon), and what could not be read to say it."""
    if not name:
        return None, None

    def read() -> tuple[nodepolicy.NodePolicy | None, str | None]:
        node = _node(ctx, name)
        if node is None:
            return None, None
        unread = None
        try:
            drivers = ctx.operator_pods_on(name, "driver")
        except SourceError as err:
            drivers, unread = (
                [],
                f"the driver pods on {name} could not be read ({err}), so whether the driver manager uncordons it after a driver restart is not known",
            )
        return nodepolicy.decide(node, driver_pods=drivers), unread

    return ctx.cached(("node_policy", name), read)


def _cordon_nodes(ctx: WalkContext) -> set[str]:
    """The nodes whose cordon button a walk offers: the pod's node, or the examined ones. Other
    nodes a finding names (the cordoned nodes of a fleet) get no per-node read: a walk's reads
    must not grow with the fleet."""
    if ctx.bound_node:
        return {ctx.bound_node}
    try:
        return set(ctx.examined_nodes())
    except SourceError:
        return set()


def name_owners(
    ctx: WalkContext, findings: list[Finding], layer: int = 1
) -> tuple[list[Finding], list[nodepolicy.NodePolicy]]:
    """Each finding about a node in an owner's flow names the owner, gives the advice the decision
    table allows there (a holder's repair is not fought with a drain), and the layer keeps the
    policy of each node its message may offer actions on (the pod's node, or the examined ones)."""
    out: list[Finding] = []
    unread: list[str] = []
    policies: dict[str, nodepolicy.NodePolicy] = {}
    for name in sorted(_cordon_nodes(ctx)):
        policy, missed = policy_of(ctx, name)
        if policy is not None:
            policies[name] = policy
        if missed and missed not in unread:
            unread.append(missed)
    for f in findings:
        node = _node(ctx, f.node)
        if node is None or f.node is None or f.severity == Severity.OK:
            out.append(f)
            continue
        held, maint = ow.owner_of(node), ow.in_maintenance(node)
        if maint is not None and f.code in MAINTENANCE and f.severity > Severity.INFO:
            f = _maintenance(f, maint)
        elif held is not None and not any(e.startswith(OWNER_LINE) for e in f.evidence):
            f = msgspec.structs.replace(f, evidence=(*f.evidence, owner_line(held)))
        out.append(_advised(f, policies.get(f.node or "") or nodepolicy.decide(node)))
    out += [unknown(layer, what) for what in unread]
    return out, list(policies.values())


def _advised(f: Finding, policy: nodepolicy.NodePolicy | None) -> Finding:
    """The finding with the advice the decision table gives on its node."""
    if policy is None or f.severity < Severity.WARN:
        return f
    summary = policy.advise_summary(f.summary)
    return f if summary == f.summary else msgspec.structs.replace(f, summary=summary)


def _layer1(ctx: WalkContext) -> list[Finding]:
    if ctx.pod is None:
        return []
    bound = ctx.bound_node
    if bound:
        node = _node(ctx, bound)
        if node is None:
            return []
        lines = [owner_line(h) for h in ow.holders_of(node)]
        for c in ha.agent_conditions(node):
            lines += c.evidence()
        if not lines:
            return []
        policy = policy_of(ctx, bound)[0]  # what could not be read is said by name_owners
        lines += [cordons.AFTER_CORDON + n for n in (policy.next_steps if policy else ())]
        agents = sorted({c.agent for c in ha.agent_conditions(node)})
        said = (
            f"health agent(s) {', '.join(agents)} report a GPU fault there (layer 5 has it)" if agents else ""
        )
        held = ow.owner_of(node)
        who = f"{held.owner} holds it ({held.state}, {held.phase})" if held else ""
        return [
            finding(
                "L1_NODE_OWNER",
                f"{bound}: " + "; ".join(p for p in (who, said) if p),
                evidence=lines,
                commands=[f"kubectl get node {bound} -o jsonpath='{{.status.conditions}}'"],
                node=bound,
            )
        ]
    try:
        candidates = list(ctx.candidates().nodes)
        # A node an owner tainted (removing or repairing it) is no candidate, yet it is why the
        # scheduler said "untolerated taint": name it when the pod's selector would take it.
        seen = {o.name(n) for n in candidates}
        candidates += [
            n
            for n in ctx.gpu_nodes()
            if o.name(n) not in seen
            and any(ow.owner_taint(t) for t in (n.get("spec") or {}).get("taints") or [])
            and not selector_misses(ctx.pod, n)
        ]
    except SourceError:
        return []
    pairs = [(n, h) for n in candidates for h in ow.holders_of(n)[:1]]
    if not pairs:
        return []
    names = [f"{o.name(n)}: {h.text}" for n, h in pairs]
    lines = [f"{o.name(n)}: {owner_line(h)[len(OWNER_LINE) :]}" for n, h in pairs]
    lines += [f"{o.name(n)}: {c.text}" for n, _ in pairs for c in ha.agent_conditions(n)]
    removing = [o.name(n) for n, h in pairs if h.kind in ("removal", "repair")]
    tail = (
        f"; {len(removing)} of them are being removed or repaired by their owner: not a toleration to add"
        if removing
        else ""
    )
    return [
        finding(
            "L1_NODE_OWNER",
            f"{len(pairs)} candidate GPU node(s) are in an owner's flow ({', '.join(names[:3])}"
            + (" …" if len(names) > 3 else "")
            + f"){tail}",
            evidence=listed(lines, MAX_LISTED),
            commands=["kubectl get nodes -L " + ow.NVSENTINEL_STATE + "," + ow.UPGRADE_STATE],
            node=o.name(pairs[0][0]) if len(pairs) == 1 else None,
        )
    ]


def _layer5(ctx: WalkContext, findings: list[Finding]) -> list[Finding]:
    """Health agents' fault conditions on the examined nodes, and the Xids they name."""
    extra: list[Finding] = []
    try:
        examined = ctx.examined_nodes()
    except SourceError:
        return []
    for name in examined:
        node = _node(ctx, name)
        for c in ha.agent_conditions(node):
            held = ow.owner_of(node)
            state = [owner_line(held)] if held else []
            extra.append(
                finding(
                    "L5_HEALTH_AGENT_CONDITION",
                    f"{c.agent} reports {c.type}={c.status} on {name}"
                    + (f" ({c.reason})" if c.reason else "")
                    + (f": recommended action {', '.join(dict.fromkeys(c.actions))}" if c.actions else ""),
                    evidence=[*c.evidence(), *state],
                    commands=[
                        f"kubectl get node {name} -o jsonpath='{{.status.conditions[?(@.type==\"{c.type}\")]}}'"
                    ],
                    node=name,
                )
            )
            # The kernel's Xid 154 line in the condition names the recovery action (spec: L5_XID).
            action = xid.parse_recovery_action(c.message) if 154 in c.xids else None
            for number in c.xids:
                source = f"source: node condition {c.type} ({c.agent})"
                same = [
                    i
                    for i, f in enumerate(findings)
                    if f.code == "L5_XID" and f.node == name and f.summary.startswith(f"Xid {number} on")
                ]
                if same:
                    f = findings[same[0]]
                    said = (
                        xid.recovery_summary(f.node or name, action)
                        if number == 154 and action
                        else f.summary
                    )
                    findings[same[0]] = msgspec.structs.replace(
                        f, summary=said, evidence=(*f.evidence, source)
                    )
                    continue
                entry = xid.lookup(number)
                extra.append(
                    finding(
                        "L5_XID",
                        xid.recovery_summary(name, action)
                        if number == 154
                        else f"Xid {number} on {name}, {entry.name}: {entry.meaning} — {entry.advice}",
                        severity=entry.severity,
                        evidence=[
                            source,
                            *c.evidence()[:2],
                            f"catalog action: {entry.immediate_action or 'none'}",
                        ],
                        node=name,
                    )
                )
            if action:
                source = f"node condition {c.type}"
                xid.name_recovery_action(findings, name, action, source)
                xid.name_recovery_action(extra, name, action, source)
    return extra


def adjust(ctx: WalkContext, result: LayerResult) -> LayerResult:
    """The layer's findings with the node's owners said, and their maintenance not a fault."""
    findings, policies = name_owners(ctx, list(result.findings), result.layer)
    if result.layer == 1:
        findings += _layer1(ctx)
    elif result.layer == 5:
        # Many examined nodes with an agent's condition (a pending pod's fleet): the first stay, one
        # finding names the rest, as the layers fold other per-node findings.
        extra = fold(_layer5(ctx, findings), codes=("L5_HEALTH_AGENT_CONDITION",))
        by_node = {p.node: p for p in policies}
        findings += [_advised(f, by_node.get(f.node or "") or policy_of(ctx, f.node)[0]) for f in extra]
    if list(findings) == list(result.findings):
        return msgspec.structs.replace(result, policies=tuple(policies))
    if any(f.severity > Severity.OK for f in findings[len(result.findings) :]):
        # "<layer>_OK" means none of the layer's checks found anything: no longer true.
        findings = [f for f in findings if not f.code.endswith("_OK")]
    return LayerResult.build(result.layer, findings, policies)
