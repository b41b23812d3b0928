"""The thread as a reader sees it: each fact once, buttons where they act, a verdict that names who
holds the node.

Spec: interfaces.md, "The incident thread", item 4, and findings.md, "Who else acts on a node".

One pass over a walk's layers, in the order they are shown, before any renderer runs:

- an evidence line shown before in the walk is not shown again: a node's owner, health-agent and
  "after a cordon" lines stay where the node first appears and later messages refer to them
  ("held by X: see layer 1"); any other repeated line becomes a count of lines "as in layer N";
- each message's buttons: Cordon only where the message's findings fault or warn about the node
  and the owners' policy offers it, Must-gather once per node and walk (the first such message);
- the verdict line: what is wrong, on which node, who holds it and the one next step, the holder's
  advice in place of the catalog's drain or reboot.

Text (bot/render.py) and Slack (handlers/blocks.py) render from this model; JSON keeps every
finding's full evidence (machines want every fact: what text and Slack fold is there).
Every question about a node's owners goes through the three functions under "the owners' policy".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from layers.facts.cordons import AFTER_CORDON
from layers.findings import Finding, LayerResult, Severity, Target, WalkResult
from layers.nodeactions import NodePolicy
from layers.ownership import OWNER_LINE

Action = Literal["cordon", "uncordon", "must_gather"]
# The findings whose every evidence line is a fact about the node (its owners, its health agents).
NODE_FACT_CODES = ("L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION")
ADVICE_SEP = " — "  # a finding's summary: what is wrong, then the catalog's advice


# --- the owners' policy: every question about a node's owners is answered by its NodePolicy -----
# (layers/nodepolicy.py, the one decision table; each LayerResult keeps the policies of the nodes it
# examined, so a stored walk folds and offers as it was walked)


def policy_of(layers: Sequence[LayerResult], node: str | None) -> NodePolicy | None:
    """The node's policy as the walk's latest layer that examined it decided it."""
    for r in reversed(layers):
        p = r.policy_for(node)
        if p is not None:
            return p
    return None


def _holder_line(policy: NodePolicy | None) -> str | None:
    """Who holds the node, as "Owner (state)", or None (a reporter does not hold it)."""
    held = policy.holder if policy is not None else None
    if not held or held.get("role") != "holder":
        return None
    state = held.get("state")
    return f"{held.get('name')} ({state})" if state else str(held.get("name"))


def _offers(policy: NodePolicy | None, action: Action) -> bool:
    """Whether the owners' table offers `action` on the node. Without a policy (the node was not
    examined, or the walk was stored before policies were kept) the button is shown and the click
    asks the policy again at click time (handlers/clicks.py), never trusting the button."""
    if policy is None:
        return action in ("cordon", "must_gather")
    allowed = {"cordon": policy.cordon, "uncordon": policy.uncordon, "must_gather": policy.must_gather}[
        action
    ]
    return allowed.offered


def _next_step(policy: NodePolicy | None, summary: str) -> str | None:
    """The verdict's one next step: the catalog's advice as the table says it on this node. A
    finding whose summary the policy already advised (layers' findings ask it) is taken as it is."""
    advised = summary
    said = [a for a in (policy.advice_head, policy.advice_tail) if a] if policy is not None else []
    if policy is not None and not any(a in summary for a in said):
        advised = policy.advise_summary(summary)
    _, sep, advice = advised.partition(ADVICE_SEP)
    if sep:
        return advice or None
    return policy.advice_head or None if policy is not None and policy.replaces_action else None


# --- the model ------------------------------------------------------------------------------


class ShownFinding(msgspec.Struct, frozen=True):
    finding: Finding
    evidence: tuple[str, ...]  # the lines shown: none shown before in the walk
    refs: tuple[str, ...] = ()  # where the folded lines are ("held by X: see layer 1")

    @property
    def folded(self) -> tuple[str, ...]:
        """The finding's evidence lines not shown here (JSON keeps them all)."""
        shown = set(self.evidence)
        return tuple(e for e in self.finding.evidence if e not in shown)


class ShownLayer(msgspec.Struct, frozen=True):
    result: LayerResult
    findings: tuple[ShownFinding, ...]
    node: str | None = None  # the node this message's buttons act on
    cordon: bool = False
    must_gather: bool = False
    cordon_notes: tuple[str, ...] = ()  # the Cordon confirmation: the owner line, the platform's next step
    gather_first: bool = False  # the node is going away: Must-gather before anything else


class Verdict(msgspec.Struct, frozen=True):
    finding: Finding
    node: str | None
    what: str  # what is wrong
    holder: str | None  # who holds the node
    next_step: str | None


class Thread(msgspec.Struct, frozen=True):
    target: Target
    layers: tuple[ShownLayer, ...]


def node_in_question(target: Target, *results: LayerResult) -> str | None:
    """The node a message's must-gather and cordon buttons act on: the pod's node when it is bound
    (or the node of a node walk), else the node of the most severe warning or fault among these."""
    if target.node:
        return target.node
    named = [f for r in results for f in r.findings if f.node and f.severity >= Severity.WARN]
    return max(named, key=lambda f: f.severity).node if named else None


def in_order(result: LayerResult) -> list[Finding]:
    """A message's findings as every renderer shows them: the worst first, ties in the layer's order."""
    return sorted(result.findings, key=lambda f: -f.severity)


def cordon_notes(layers: Sequence[LayerResult]) -> dict[str, tuple[str, ...]]:
    """Every node's "after a cordon" lines (without the prefix), in the walk's order: a Cordon
    confirmation's words where a layer kept no policy for the node."""
    after: dict[str, dict[str, None]] = {}
    for r in layers:
        for f in r.findings:
            if f.node:
                for e in f.evidence:
                    if e.startswith(AFTER_CORDON):
                        after.setdefault(f.node, {})[e[len(AFTER_CORDON) :]] = None
    return {n: tuple(lines) for n, lines in after.items()}


def _is_fact(f: Finding, line: str) -> bool:
    return f.code in NODE_FACT_CODES or line.startswith((OWNER_LINE, AFTER_CORDON))


def _faults_on(result: LayerResult, node: str | None) -> bool:
    return node is not None and any(f.node == node and f.severity >= Severity.WARN for f in result.findings)


def fold(target: Target, layers: Sequence[LayerResult], earlier: Sequence[LayerResult] = ()) -> Thread:
    """The walk as shown. `earlier`: layers already posted in the thread (Slack posts one message
    per layer as it completes): their lines and buttons count as shown, they are not returned."""
    every = [*earlier, *layers]
    notes_of = cordon_notes(every)
    seen: dict[str, int] = {}  # line -> the layer that shows it
    fact_lines: set[str] = set()  # lines first shown as a fact about a node
    gathered: set[str] = set()
    out: list[ShownLayer] = []
    for i, r in enumerate(every):
        shown_findings: list[ShownFinding] = []
        referred: set[str] = set()  # nodes whose facts this message already referred to
        for f in in_order(r):
            keep: list[str] = []
            again: dict[int, int] = {}  # layer -> lines folded that it shows
            facts_folded: list[str] = []
            for e in f.evidence:
                if e not in seen:
                    seen[e] = r.layer
                    keep.append(e)
                    if f.node and _is_fact(f, e):
                        fact_lines.add(e)
                elif f.node and (e in fact_lines or _is_fact(f, e)):
                    facts_folded.append(e)
                else:
                    again[seen[e]] = again.get(seen[e], 0) + 1
            refs: list[str] = []
            if facts_folded and f.node and f.node not in referred:
                referred.add(f.node)
                src = min(seen[e] for e in facts_folded)
                holder = _holder_line(policy_of(every[: i + 1], f.node))
                refs.append(_fact_ref(f.node, holder, src, r.layer, facts_folded))
            for layer, n in sorted(again.items()):
                where = "above" if layer == r.layer else f"in layer {layer}"
                refs.append(f"{n} more line(s) as {where}")
            shown_findings.append(ShownFinding(f, tuple(keep), tuple(refs)))
        node = node_in_question(target, r)
        faults = _faults_on(r, node)
        policy = policy_of(every[: i + 1], node)
        gather = bool(faults and node not in gathered and _offers(policy, "must_gather"))
        if faults and node:
            gathered.add(node)
        if i < len(earlier):
            continue
        # Every Cordon confirmation repeats the owner line and the platform's next step, whichever
        # layer's message it is on (the policy's `confirm`; the walk's own lines where it has none).
        notes = policy.confirm if policy is not None else notes_of.get(node or "", ())
        out.append(
            ShownLayer(
                r,
                tuple(shown_findings),
                node,
                cordon=faults and _offers(policy, "cordon"),
                must_gather=gather,
                cordon_notes=tuple(dict.fromkeys(notes)),
                gather_first=gather and policy is not None and policy.must_gather_first,
            )
        )
    return Thread(target, tuple(out))


def _fact_ref(node: str, holder: str | None, src: int, layer: int, lines: Sequence[str]) -> str:
    """Where the folded facts about `node` are (layer `src`): who holds it, else what they are about."""
    where = "above" if src == layer else f"see layer {src}"
    if holder:
        return f"held by {holder}: {where}"
    about = [
        *(["its health agent's condition"] if any(not e.startswith(AFTER_CORDON) for e in lines) else []),
        *(["what a cordon of it does"] if any(e.startswith(AFTER_CORDON) for e in lines) else []),
    ]
    return f"{node}, {' and '.join(about)}: {where}"


# --- the verdict ----------------------------------------------------------------------------


def verdict(walk: WalkResult) -> Verdict | None:
    """The walk's verdict as the root message and the CLI say it. Never contradicts the holder: on a
    node a holder is repairing, maintaining or removing, its advice replaces the catalog's."""
    v = walk.verdict
    if v is None:
        return None
    node = v.node or walk.target.node
    policy = policy_of(walk.layers, node)
    what = v.summary.partition(ADVICE_SEP)[0]
    return Verdict(v, node, what, _holder_line(policy), _next_step(policy, v.summary))
