"""The digest's owner signals (spec/interfaces.md, `digest --format json`; spec/findings.md, "Who
else acts on a node", the digest): each flagged node's owner and state, the GPU nodes that are
not Ready, health agents' fault conditions, the nodes an owner gave up on (a person must act,
with the owner's reason), and gpubot cordons that vanished without gpubot, with who removed them.

Pure over the node objects; layers/digest.py asks once per node and merges the reasons.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from layers import nodepolicy
from layers.facts import cordons
from layers.facts import healthagents as ha
from layers.facts import owners as ow
from layers.nodepolicy import NodePolicy
from layers.sources import K8sObject

NODE_NOT_READY = "NODE_NOT_READY"
HEALTH_AGENT_CONDITION = "HEALTH_AGENT_CONDITION"
OWNER_NEEDS_PERSON = "OWNER_NEEDS_PERSON"
OWNER_REASONS = (OWNER_NEEDS_PERSON, HEALTH_AGENT_CONDITION, NODE_NOT_READY)


class OwnerFacts(msgspec.Struct, frozen=True):
    reasons: tuple[str, ...] = ()
    owner: ow.Held | None = None
    needs_person: str | None = None  # why a person must take the node, in the owner's words
    conditions: tuple[str, ...] = ()  # the health agents' fault conditions, one line each
    policy: NodePolicy | None = None  # the decision table's answer for the node (its buttons ask it)


def not_ready(node: K8sObject) -> bool:
    """The node's Ready condition says False or Unknown (a node without one is not judged)."""
    ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return bool(ready) and ready[0].get("status") != "True"


def _gave_up(node: K8sObject, owners: list[ow.Held]) -> str | None:
    for held in owners:
        if held.role == "holder" and any(
            held.state in spec.gave_up for spec in ow.OWNERS if spec.name == held.owner
        ):
            why = f": {held.reason}" if held.reason else ""
            return f"{held.owner} gave up ({held.state}, {held.mark}){why}"
    return ha.needs_person(node)  # the agent's own words: it recommends CONTACT_SUPPORT


def owner_facts(node: K8sObject | None, gpu_node: bool) -> OwnerFacts:
    """What the owners say about one node of the digest (a GPU node, or one publishing DRA GPUs)."""
    if node is None:
        return OwnerFacts()
    reasons: list[str] = []
    owners = ow.owners_of(node)
    person = _gave_up(node, owners)
    if person:
        reasons.append(OWNER_NEEDS_PERSON)
    agents = ha.agent_conditions(node)
    if agents and gpu_node:
        reasons.append(HEALTH_AGENT_CONDITION)
    if gpu_node and not_ready(node):
        reasons.append(NODE_NOT_READY)
    lines = tuple(
        c.text + (f": recommended action {', '.join(dict.fromkeys(c.actions))}" if c.actions else "")
        for c in agents
    )
    policy = nodepolicy.decide(node)
    held = nodepolicy.deciding(owners)
    return OwnerFacts(tuple(reasons), held, person, lines, policy)


def vanished_cordons(nodes: Iterable[K8sObject]) -> list[str]:
    """gpubot cordons gone without gpubot, each with who removed it."""
    return [line for n in nodes if (line := cordons.vanished_cordon(n))]
