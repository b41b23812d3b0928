"""Who else acts on a node: its owners, read from their own marks (spec/findings.md, "Who else
acts on a node").

An owner is a controller that cordons, drains, repairs or re-creates a GPU node besides the
people in the channel. Owners are data: OWNERS is a table of marks (a label, annotation, taint or
condition with the values that mean "in its flow"), so the next owner is one entry and one test.
Everything here is pure over the node's JSON: layers, the digest, the buttons and the CLI's
cordon/uncordon all ask the same functions.

Who set `spec.unschedulable` is read from `metadata.managedFields` (the field manager of
`f:spec` → `f:unschedulable`), as the API server records it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from operator import methodcaller
from typing import Any, Literal

import msgspec

from layers.facts import healthagents as ha
from layers.facts import objects as o
from layers.sources import K8sObject

Where = Literal["label", "annotation", "taint"]
# quarantine: cordons and drains a sick node · maintenance: its own work (upgrade, MIG change)
# removal: deleting the node · repair: a platform repairs or replaces it
Kind = Literal["quarantine", "maintenance", "removal", "repair"]
# queued: holds the node but has not begun · running: its flow acts on the node · gave-up: it
# stopped and a person must act (spec/findings.md, "Holders and reporters")
Phase = Literal["queued", "running", "gave-up"]
# holder: its own mark says its flow took the node · reporter: a health agent's condition only
Role = Literal["holder", "reporter"]


class Mark(msgspec.Struct, frozen=True):
    """One mark an owner leaves. `key` ending in `*` matches any key with that prefix; starting
    with `*`, any key with that suffix (NVSentinel's `<prefix>cordon-by`, its prefix configurable).
    A taint's `values` are matched against the taint's value."""

    where: Where
    key: str
    values: tuple[str, ...] = ()  # empty: any non-empty value (any value for a taint)
    not_values: tuple[str, ...] = ()  # values that mean "not in its flow"
    value_prefix: str = ""  # the value starts with this (HyperPod's Unschedulable…)
    state: str = ""  # the state to say when the mark's value is not one (NVSentinel without its label)


class OwnerSpec(msgspec.Struct, frozen=True):
    name: str
    kind: Kind
    marks: tuple[Mark, ...]
    gave_up: tuple[str, ...] = ()  # states in which the owner stopped and a person must act
    release: str = ""  # what uncordoning the node would do to the owner's flow
    # States in which the owner has not begun its work on the node: it holds it, but what is wrong
    # there is not its doing (a new node's driver still compiling is labelled upgrade-required).
    not_begun: tuple[str, ...] = ()


# The owners' current code decides the exact keys (sources in docs/owners.md).
NVSENTINEL_STATE = "dgxc.nvidia.com/nvsentinel-state"
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
PAUSED_FOR_UPGRADE = "paused-for-driver-upgrade"
PAUSED_FOR_MIG = "paused-for-mig-change"
CA_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
CA_DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
KARPENTER_DISRUPTED = "karpenter.sh/disrupted"
KARPENTER_DISRUPTION_V0 = "karpenter.sh/disruption"  # before v1, value `disrupting`
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # a person's "leave it", not a hold
NVSENTINEL_CORDON_BY = "*/cordon-by"  # `<prefix>cordon-by`, default prefix k8saas.nvidia.com/
NVSENTINEL_EVENT = "quarantineHealthEvent"
# Annotations the owners set that a must-gather keeps (bot/actions/redact.py): NVSentinel's
# quarantine marks and Karpenter's "leave it".
OWNER_ANNOTATIONS = (
    NVSENTINEL_EVENT,
    "quarantineHealthEventIsCordoned",
    "quarantineHealthEventCordonPreExisting",
    KARPENTER_DO_NOT_DISRUPT,
)
OPERAND_DEPLOY_PREFIX = "nvidia.com/gpu.deploy."
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"
AKS_REMEDIATOR = "remediator.aks.microsoft.com/unschedulable"
HYPERPOD_HEALTH = "sagemaker.amazonaws.com/node-health-status"

OWNERS: tuple[OwnerSpec, ...] = (
    OwnerSpec(
        "NVSentinel",
        "quarantine",
        (
            Mark("label", NVSENTINEL_STATE),
            Mark("label", NVSENTINEL_CORDON_BY, values=("NVSentinel",), state="quarantined"),
            Mark("annotation", NVSENTINEL_EVENT, state="quarantined"),
        ),
        gave_up=("drain-failed", "remediation-failed"),
        release="uncordoning cancels NVSentinel's break-fix: it strips its quarantine state and marks "
        "the health events cancelled (NVSentinel docs/cancelling-breakfix.md)",
    ),
    OwnerSpec(
        "GPU Operator driver upgrade",
        "maintenance",
        (Mark("label", UPGRADE_STATE, not_values=("", "upgrade-done")),),
        gave_up=("upgrade-failed",),
        not_begun=("upgrade-required",),
        release="the upgrade controller cordoned it to replace the driver; uncordoning lets pods land on "
        "a node whose driver is being swapped",
    ),
    OwnerSpec(
        "GPU Operator driver manager",
        "maintenance",
        (Mark("label", OPERAND_DEPLOY_PREFIX + "*", values=(PAUSED_FOR_UPGRADE,)),),
        release="the driver manager paused the GPU operands to reload the driver and uncordons the node itself",
    ),
    OwnerSpec(
        "MIG manager",
        "maintenance",
        (
            Mark("label", OPERAND_DEPLOY_PREFIX + "*", values=(PAUSED_FOR_MIG,)),
            Mark("label", MIG_CONFIG_STATE, values=("pending", "rebooting")),
        ),
        release="the MIG manager is applying a MIG layout and uncordons the node when it is done",
    ),
    OwnerSpec(
        "cluster-autoscaler",
        "removal",
        (Mark("taint", CA_TO_BE_DELETED), Mark("taint", CA_DELETION_CANDIDATE)),
        release="cluster-autoscaler is removing the node: uncordoning does not keep it",
    ),
    OwnerSpec(
        "Karpenter",
        "removal",
        (Mark("taint", KARPENTER_DISRUPTED), Mark("taint", KARPENTER_DISRUPTION_V0, values=("disrupting",))),
        release="Karpenter is disrupting the node: uncordoning does not keep it",
    ),
    OwnerSpec(
        "AKS",
        "repair",
        (Mark("taint", AKS_REMEDIATOR),),
        release="AKS's remediator holds the node for repair",
    ),
    OwnerSpec(
        "SageMaker HyperPod",
        "repair",
        (Mark("label", HYPERPOD_HEALTH, value_prefix="Unschedulable"),),
        release="HyperPod's health agent marked the node for replacement or reboot",
    ),
)


class Held(msgspec.Struct, frozen=True):
    """A node in an owner's flow: who, in which state, since when and why."""

    owner: str
    kind: Kind
    state: str
    mark: str  # the mark that says so, as a person would grep for it
    since: str | None = None
    reason: str | None = None  # the owner's own words (cordon-reason, a condition's message)
    gave_up: bool = False
    release: str = ""
    begun: bool = True  # the owner's own work is under way on the node (its maintenance explains symptoms)
    role: Role = "holder"

    @property
    def phase(self) -> Phase:
        return "gave-up" if self.gave_up else "running" if self.begun else "queued"

    @property
    def text(self) -> str:
        return f"{self.owner} ({self.state})"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.owner, "state": self.state}  # the public shape (digest and node JSON)


def _taints(node: K8sObject) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def _value_ok(mark: Mark, value: str) -> bool:
    if mark.value_prefix:
        return value.startswith(mark.value_prefix)
    if mark.values:
        return value in mark.values
    return value not in mark.not_values and value != ""


def _key_hit(mark: Mark, key: str) -> bool:
    if mark.key.endswith("*"):
        return key.startswith(mark.key[:-1])
    if mark.key.startswith("*"):
        return key.endswith(mark.key[1:])
    return key == mark.key


def _keyed(mark: Mark, items: dict[str, str]) -> Iterable[tuple[str, str]]:
    if "*" in mark.key:
        return sorted((k, v) for k, v in items.items() if _key_hit(mark, k))
    return [(mark.key, items[mark.key])] if mark.key in items else []


def _match(mark: Mark, node: K8sObject) -> tuple[str, str, str | None] | None:
    """(state, mark shown, since) when the mark is on the node."""
    if mark.where in ("label", "annotation"):
        items = o.labels(node) if mark.where == "label" else o.annotations_of(node)
        for key, value in _keyed(mark, items):
            if mark.where == "annotation" and not mark.values and mark.state:
                return mark.state, f"annotation {key}", None  # its value is a JSON event
            if _value_ok(mark, str(value)):
                return mark.state or str(value), f"{mark.where} {key}={value}", None
        return None
    for t in _taints(node):
        value = str(t.get("value") or "")
        if t.get("key") == mark.key and (not mark.values or value in mark.values):
            shown = f"taint {mark.key}" + (f"={value}" if value else "") + f":{t.get('effect')}"
            return _taint_state(mark.key), shown, _taint_since(t)
    return None


def _taint_state(key: str) -> str:
    return {
        CA_TO_BE_DELETED: "deleting the node",
        CA_DELETION_CANDIDATE: "deletion candidate",
        KARPENTER_DISRUPTED: "disrupting the node",
        KARPENTER_DISRUPTION_V0: "disrupting the node",
        AKS_REMEDIATOR: "remediating",
    }.get(key, key)


def _taint_since(taint: dict[str, Any]) -> str | None:
    """cluster-autoscaler's taints carry Unix seconds as their value; others have timeAdded."""
    value = str(taint.get("value") or "")
    if value.isdigit() and len(value) <= 12:
        return datetime.fromtimestamp(int(value), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    added = taint.get("timeAdded")
    return str(added) if added else None


def _nvsentinel_reason(node: K8sObject) -> tuple[str | None, str | None]:
    """NVSentinel's `<prefix>cordon-reason` / `cordon-timestamp` labels (prefix configurable,
    default k8saas.nvidia.com/)."""
    reason = since = None
    for key, value in o.labels(node).items():
        if key.endswith("/cordon-reason"):
            reason = value
        elif key.endswith("/cordon-timestamp"):
            since = value
    return reason, since


def _keys(where: Where) -> tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]:
    """The exact keys, key prefixes and key suffixes of OWNERS' marks on one kind of place."""
    marks = [m for spec in OWNERS for m in spec.marks if m.where == where]
    return (
        frozenset(m.key for m in marks if "*" not in m.key),
        tuple(m.key[:-1] for m in marks if m.key.endswith("*")),
        tuple(m.key[1:] for m in marks if m.key.startswith("*")),
    )


_LABEL_KEYS = _keys("label")
_ANNOTATION_KEYS = _keys("annotation")
_TAINT_KEYS = _keys("taint")[0]


def _marked(items: dict[str, str], keys: tuple[frozenset[str], tuple[str, ...], tuple[str, ...]]) -> bool:
    exact, prefixes, suffixes = keys
    return (
        not exact.isdisjoint(items)
        or (bool(prefixes) and any(map(methodcaller("startswith", prefixes), items)))
        or (bool(suffixes) and any(map(methodcaller("endswith", suffixes), items)))
    )


def _may_be_held(node: K8sObject) -> bool:
    """Some mark of OWNERS' is on the node, its value aside: without one no owner holds it. One pass
    over the node's keys, so a pending pod's 65,000 candidates are not matched mark by mark."""
    return (
        _marked(o.labels(node), _LABEL_KEYS)
        or _marked(o.annotations_of(node), _ANNOTATION_KEYS)
        or any(t.get("key") in _TAINT_KEYS for t in _taints(node))
    )


# Field managers of a person's cordon: an agent's condition on a node a person cordoned is still a report.
PERSON_MANAGERS = ("kubectl", "k9s", "Mozilla", "gpubot")


def _platform_cordoned(node: K8sObject) -> bool:
    """The node is cordoned, and not by a person or gpubot (so a platform's repair did it)."""
    if not o.is_unschedulable(node):
        return False
    for entry in (node.get("metadata") or {}).get("managedFields") or []:
        spec = (entry.get("fieldsV1") or {}).get("f:spec")
        if isinstance(spec, dict) and "f:unschedulable" in spec:
            return not str(entry.get("manager") or "").startswith(PERSON_MANAGERS)
    return "gpubot/cordoned-by" not in o.annotations_of(node)


def _reporters(node: K8sObject, holders: list[Held]) -> list[Held]:
    """Health agents' fault conditions (layers/facts/healthagents.py, their one reader) as owners:
    reporters, or holders when the platform's repair has also cordoned the node. A
    `Recommended Action=CONTACT_SUPPORT` is the agent giving up: a person must act."""
    out: list[Held] = []
    named = {h.owner for h in holders}
    for c in ha.agent_conditions(node):
        if c.contact_support and c.agent in named:
            continue  # said on the holder (below)
        holds = c.agent != "NVSentinel" and _platform_cordoned(node)
        out.append(
            Held(
                c.agent,
                "repair",
                f"{c.type}={c.status}" + (f" ({c.reason})" if c.reason else ""),
                f"condition {c.type}={c.status}",
                since=c.since,
                reason=c.message[:200] or None,
                gave_up=c.contact_support,
                release=ha.next_step(c.agent),
                role="holder" if holds else "reporter",
            )
        )
    return out


def owners_of(node: K8sObject) -> list[Held]:
    """Every owner of the node: holders in the table's order, then health agents' reports."""
    out: list[Held] = []
    support = {c.agent for c in ha.agent_conditions(node) if c.contact_support}
    if _may_be_held(node):
        for spec in OWNERS:
            for mark in spec.marks:
                hit = _match(mark, node)
                if hit is None:
                    continue
                state, shown, since = hit
                reason = None
                if spec.name == "NVSentinel":
                    reason, since = _nvsentinel_reason(node)
                gave_up = state in spec.gave_up or spec.name in support
                out.append(
                    Held(
                        spec.name,
                        spec.kind,
                        state,
                        shown,
                        since=since,
                        reason=reason,
                        gave_up=gave_up,
                        release=spec.release,
                        begun=state not in spec.not_begun,
                    )
                )
                break
    return out + _reporters(node, out)


def holders_of(node: K8sObject) -> list[Held]:
    """The owners that hold the node (their own marks, or a platform's repair that cordoned it)."""
    return [h for h in owners_of(node) if h.role == "holder"]


def owner_of(node: K8sObject | None) -> Held | None:
    """The node's first holder (the table's order: a quarantine before an upgrade before removal)."""
    if node is None:
        return None
    held = holders_of(node)
    return held[0] if held else None


def in_maintenance(node: K8sObject | None) -> Held | None:
    """An owner whose own work explains missing GPUs, Init operators and a driver pod not Ready:
    the driver upgrade (not once it failed), the driver manager or the MIG manager."""
    for h in owners_of(node) if node is not None else []:
        if h.kind == "maintenance" and h.phase == "running":
            return h
    return None


def owner_taint(taint: dict[str, Any]) -> str | None:
    """The owner whose taint this is (the owner removing or repairing the node), else None."""
    value = str(taint.get("value") or "")
    for spec in OWNERS:
        for m in spec.marks:
            if m.where == "taint" and m.key == taint.get("key") and (not m.values or value in m.values):
                return spec.name
    return None


def operand_paused(node: K8sObject, operand: str) -> str | None:
    """The pause an owner put on one GPU Operator operand (`nvidia.com/gpu.deploy.<operand>`):
    PAUSED_FOR_UPGRADE (the driver manager) or PAUSED_FOR_MIG (the MIG manager), else None."""
    value = str(o.labels(node).get(OPERAND_DEPLOY_PREFIX + operand) or "")
    return value if value in (PAUSED_FOR_UPGRADE, PAUSED_FOR_MIG) else None
