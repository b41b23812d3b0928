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
from dataclasses import dataclass, field
from typing import Literal

from layers.facts.cordons import AFTER_CORDON
from layers.facts.owners import OWNERS
from layers.findings import Finding, LayerResult, Severity, Target, WalkResult
from layers.ownership import OWNER_LINE

Action = Literal["cordon", "uncordon", "must_gather"]
# The findings whose every evidence line is a fact about the node (its owners, its health agents).
NODE_FACT_CODES = ("L1_NODE_OWNER", "L5_HEALTH_AGENT_CONDITION")
ADVICE_SEP = " — "  # a finding's summary: what is wrong, then the catalog's advice


@dataclass(frozen=True)
class NodeFacts:
    """What the walk says about a node's owners, read from the findings' evidence."""

    node: str
    owner_lines: tuple[str, ...] = ()  # "owner: X (state) — mark, since …"
    after_cordon: tuple[str, ...] = ()  # what the platform does after a cordon (without the prefix)


# --- the owners' policy: every call to owner and cordon logic is here ----------------------
# (the lead points these at the one policy function of issue 26 at merge)


def _holder_line(facts: NodeFacts | None) -> str | None:
    """Who holds the node, as "Owner (state)", or None."""
    if facts is None or not facts.owner_lines:
        return None
    return facts.owner_lines[0][len(OWNER_LINE) :].partition(ADVICE_SEP)[0]


def _offers(facts: NodeFacts | None, action: Action) -> bool:
    """Whether the owners' table offers `action` on the node from a walk's message. Today's rule
    (layers/remedy.py, cordon_plan): a node in an owner's flow is not cordoned by gpubot. Uncordon is
    offered only under the audit line of the bot's own cordon (handlers/buttons.py), never here."""
    if action == "cordon":
        return _holder_line(facts) is None
    return action == "must_gather"


def _holder_advice(facts: NodeFacts | None) -> tuple[str, bool] | None:
    """On a held node, (what to do instead, whether it replaces the catalog's action): the
    advice column of the decision table (spec/findings.md, "One policy decides every action")."""
    holder = _holder_line(facts)
    if holder is None:
        return None
    spec = next((s for s in OWNERS if holder.startswith(s.name + " (")), None)
    state = holder[len(spec.name) + 2 : -1] if spec else holder
    if spec is None:
        return f"held by {holder}: do not act against it", True
    if state in spec.gave_up:
        return f"{spec.name} gave up ({state}): a person must act", False
    if state in spec.not_begun:
        return "a driver upgrade is queued here", False
    if spec.kind == "maintenance":
        return f"maintenance by {spec.name} ({state}): wait for it", True
    if spec.kind == "removal":
        return f"{spec.name} is removing this node: pods move elsewhere", True
    return (
        f"{spec.name} is repairing it ({state}): no action; collect a must-gather if the evidence matters",
        True,
    )


# --- the model ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShownFinding:
    finding: Finding
    evidence: tuple[str, ...]  # the lines shown: none shown before in the walk
    refs: tuple[str, ...] = ()  # where the folded lines are ("held by X: see layer 1")

    @property
    def folded(self) -> tuple[str, ...]:
        """The finding's evidence lines not shown here (JSON keeps them all)."""
        shown = set(self.evidence)
        return tuple(e for e in self.finding.evidence if e not in shown)


@dataclass(frozen=True)
class ShownLayer:
    result: LayerResult
    findings: tuple[ShownFinding, ...]
    node: str | None = None  # the node this message's buttons act on
    cordon: bool = False
    must_gather: bool = False
    cordon_notes: tuple[str, ...] = ()  # the Cordon confirmation: the owner line, the platform's next step


@dataclass(frozen=True)
class Verdict:
    finding: Finding
    node: str | None
    what: str  # what is wrong
    holder: str | None  # who holds the node
    next_step: str | None


@dataclass(frozen=True)
class Thread:
    target: Target
    layers: tuple[ShownLayer, ...]
    facts: dict[str, NodeFacts] = field(default_factory=dict)


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


def node_facts(layers: Sequence[LayerResult]) -> dict[str, NodeFacts]:
    """Every node's owner and after-a-cordon lines, in the walk's order."""
    owners: dict[str, dict[str, None]] = {}
    after: dict[str, dict[str, None]] = {}
    for r in layers:
        for f in r.findings:
            node = f.node
            if not node:
                continue
            for e in f.evidence:
                if e.startswith(OWNER_LINE):
                    owners.setdefault(node, {})[e] = None
                elif e.startswith(AFTER_CORDON):
                    after.setdefault(node, {})[e[len(AFTER_CORDON) :]] = None
    nodes = dict.fromkeys([*owners, *after])
    return {
        n: NodeFacts(
            n,
            tuple(owners.get(n, ())),
            tuple(after.get(n, ())),
        )
        for n in nodes
    }


def _is_fact(f: Finding, line: str) -> bool:
    return f.code in NODE_FACT_CODES or line.startswith((OWNER_LINE, AFTER_CORDON))


def _faults_on(result: LayerResult, node: str | None) -> bool:
    return node is not None and any(f.node == node and f.severity >= Severity.WARN for f in result.findings)


def fold(target: Target, layers: Sequence[LayerResult], earlier: Sequence[LayerResult] = ()) -> Thread:
    """The walk as shown. `earlier`: layers already posted in the thread (Slack posts one message
    per layer as it completes): their lines and buttons count as shown, they are not returned."""
    every = [*earlier, *layers]
    facts = node_facts(every)
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
                refs.append(_fact_ref(f.node, _holder_line(facts.get(f.node)), src, r.layer, facts_folded))
            for layer, n in sorted(again.items()):
                where = "above" if layer == r.layer else f"in layer {layer}"
                refs.append(f"{n} more line(s) as {where}")
            shown_findings.append(ShownFinding(f, tuple(keep), tuple(refs)))
        node = node_in_question(target, r)
        faults = _faults_on(r, node)
        nf = facts.get(node) if node else None
        gather = bool(faults and node not in gathered and _offers(nf, "must_gather"))
        if faults and node:
            gathered.add(node)
        if i < len(earlier):
            continue
        notes = (
            *([f"Held by {_holder_line(nf)}."] if _holder_line(nf) else []),
            *(nf.after_cordon if nf else ()),
        )
        out.append(
            ShownLayer(
                r,
                tuple(shown_findings),
                node,
                cordon=faults and _offers(nf, "cordon"),
                must_gather=gather,
                cordon_notes=tuple(dict.fromkeys(notes)),
            )
        )
    return Thread(target, tuple(out), facts)


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


def verdict(walk: WalkResult, facts: dict[str, NodeFacts] | None = None) -> Verdict | None:
    """The walk's verdict as the root message and the CLI say it. Never contradicts the holder: on a
    node a holder is repairing, maintaining or removing, its advice replaces the catalog's."""
    v = walk.verdict
    if v is None:
        return None
    node = v.node or walk.target.node
    facts = node_facts(walk.layers) if facts is None else facts
    nf = facts.get(node) if node else None
    what, _, advice = v.summary.partition(ADVICE_SEP)
    holder = _holder_line(nf)
    instead = _holder_advice(nf)
    if instead is None:
        return Verdict(v, node, what, None, advice or None)
    words, replaces = instead
    if replaces:
        return Verdict(v, node, what, holder, words)
    return Verdict(v, node, what, holder, "; ".join(p for p in (words, advice) if p))
