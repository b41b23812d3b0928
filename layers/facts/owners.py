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
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import methodcaller
from typing import Any, Literal

from layers.facts import objects as o
from layers.sources import K8sObject

Where = Literal["label", "annotation", "taint", "condition"]
# quarantine: cordons and drains a sick node · maintenance: its own work (upgrade, MIG change)
# removal: deleting the node · repair: a platform repairs or replaces it
Kind = Literal["quarantine", "maintenance", "removal", "repair"]


@dataclass(frozen=True)
class Mark:
    """One mark an owner leaves. `key` ending in `*` matches any key with that prefix."""

    where: Where
    key: str
    values: tuple[str, ...] = ()  # empty: any non-empty value
    not_values: tuple[str, ...] = ()  # values that mean "not in its flow"
    value_prefix: str = ""  # the value starts with this (HyperPod's Unschedulable…)
    status: str = ""  # a condition's status that puts the node in the flow


@dataclass(frozen=True)
class OwnerSpec:
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
AKS_REMEDIATOR = "remediator.aks.microsoft.com/unschedulable"
HYPERPOD_HEALTH = "sagemaker.amazonaws.com/node-health-status"

OWNERS: tuple[OwnerSpec, ...] = (
    OwnerSpec(
        "NVSentinel",
        "quarantine",
        (Mark("label", NVSENTINEL_STATE),),
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
        (Mark("label", "nvidia.com/gpu.deploy.*", values=(PAUSED_FOR_UPGRADE,)),),
        release="the driver manager paused the GPU operands to reload the driver and uncordons the node itself",
    ),
    OwnerSpec(
        "MIG manager",
        "maintenance",
        (
            Mark("label", "nvidia.com/gpu.deploy.*", values=(PAUSED_FOR_MIG,)),
            Mark("label", "nvidia.com/mig.config.state", values=("pending", "rebooting")),
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
        (Mark("taint", KARPENTER_DISRUPTED),),
        release="Karpenter is disrupting the node: uncordoning does not keep it",
    ),
    OwnerSpec(
        "EKS node auto repair",
        "repair",
        (Mark("condition", "AcceleratedHardwareReady", status="False"),),
        release="the EKS node monitoring agent reports the GPUs unhealthy; auto repair replaces or "
        "reboots the node after 10 minutes",
    ),
    OwnerSpec(
        "GKE",
        "repair",
        (Mark("condition", "XidCriticalError", status="True"),),
        release="GKE's device plugin reports a critical Xid; the node is repaired by GKE",
    ),
    OwnerSpec(
        "AKS",
        "repair",
        (
            Mark("taint", AKS_REMEDIATOR),
            Mark("condition", "GPUMissing", status="True"),
            Mark("condition", "XIDErrors", status="True"),
            Mark("condition", "NVLinkStatusInactive", status="True"),
        ),
        release="AKS's remediator holds the node for repair",
    ),
    OwnerSpec(
        "SageMaker HyperPod",
        "repair",
        (Mark("label", HYPERPOD_HEALTH, value_prefix="Unschedulable"),),
        release="HyperPod's health agent marked the node for replacement or reboot",
    ),
)


@dataclass(frozen=True)
class Held:
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

    @property
    def text(self) -> str:
        return f"{self.owner} ({self.state})"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.owner, "state": self.state}


def _taints(node: K8sObject) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


def _conditions(node: K8sObject) -> list[dict[str, Any]]:
    return list((node.get("status") or {}).get("conditions") or [])


def _value_ok(mark: Mark, value: str) -> bool:
    if mark.value_prefix:
        return value.startswith(mark.value_prefix)
    if mark.values:
        return value in mark.values
    return value not in mark.not_values and value != ""


def _keyed(mark: Mark, items: dict[str, str]) -> Iterable[tuple[str, str]]:
    if mark.key.endswith("*"):
        prefix = mark.key[:-1]
        return sorted((k, v) for k, v in items.items() if k.startswith(prefix))
    return [(mark.key, items[mark.key])] if mark.key in items else []


def _match(mark: Mark, node: K8sObject) -> tuple[str, str, str | None, str | None] | None:
    """(state, mark shown, since, reason) when the mark is on the node."""
    if mark.where in ("label", "annotation"):
        items = o.labels(node) if mark.where == "label" else o.annotations_of(node)
        for key, value in _keyed(mark, items):
            if _value_ok(mark, str(value)):
                return str(value), f"{mark.where} {key}={value}", None, None
        return None
    if mark.where == "taint":
        for t in _taints(node):
            if t.get("key") == mark.key:
                shown = (
                    f"taint {mark.key}" + (f"={t['value']}" if t.get("value") else "") + f":{t.get('effect')}"
                )
                return _taint_state(mark.key), shown, _taint_since(t), None
        return None
    for c in _conditions(node):
        if c.get("type") == mark.key and str(c.get("status")) == mark.status:
            state = f"{mark.key}={mark.status}" + (f" ({c['reason']})" if c.get("reason") else "")
            return state, f"condition {mark.key}={mark.status}", c.get("lastTransitionTime"), c.get("message")
    return None


def _taint_state(key: str) -> str:
    return {
        CA_TO_BE_DELETED: "deleting the node",
        CA_DELETION_CANDIDATE: "deletion candidate",
        KARPENTER_DISRUPTED: "disrupting the node",
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


def _keys(where: Where) -> tuple[frozenset[str], tuple[str, ...]]:
    """The exact keys and the key prefixes of OWNERS' marks on one kind of place."""
    marks = [m for spec in OWNERS for m in spec.marks if m.where == where]
    return (
        frozenset(m.key for m in marks if not m.key.endswith("*")),
        tuple(m.key[:-1] for m in marks if m.key.endswith("*")),
    )


_LABEL_KEYS, _LABEL_PREFIXES = _keys("label")
_ANNOTATION_KEYS, _ANNOTATION_PREFIXES = _keys("annotation")
_TAINT_KEYS = _keys("taint")[0]
_CONDITION_TYPES = _keys("condition")[0]


def _marked(items: dict[str, str], keys: frozenset[str], prefixes: tuple[str, ...]) -> bool:
    return not keys.isdisjoint(items) or (
        bool(prefixes) and any(map(methodcaller("startswith", prefixes), items))
    )


def _may_be_held(node: K8sObject) -> bool:
    """Some mark of OWNERS' is on the node, its value aside: without one no owner holds it. One pass
    over the node's keys, so a pending pod's 65,000 candidates are not matched mark by mark."""
    return (
        _marked(o.labels(node), _LABEL_KEYS, _LABEL_PREFIXES)
        or _marked(o.annotations_of(node), _ANNOTATION_KEYS, _ANNOTATION_PREFIXES)
        or any(t.get("key") in _TAINT_KEYS for t in _taints(node))
        or any(c.get("type") in _CONDITION_TYPES for c in _conditions(node))
    )


def owners_of(node: K8sObject) -> list[Held]:
    """Every owner whose flow the node is in, in the table's order."""
    out: list[Held] = []
    if not _may_be_held(node):
        return out
    for spec in OWNERS:
        for mark in spec.marks:
            hit = _match(mark, node)
            if hit is None:
                continue
            state, shown, since, reason = hit
            if spec.name == "NVSentinel":
                reason, since = _nvsentinel_reason(node)
            out.append(
                Held(
                    spec.name,
                    spec.kind,
                    state,
                    shown,
                    since=since,
                    reason=reason,
                    gave_up=state in spec.gave_up,
                    release=spec.release,
                    begun=state not in spec.not_begun,
                )
            )
            break
    return out


def owner_of(node: K8sObject | None) -> Held | None:
    """The node's first owner (the table's order: a quarantine before an upgrade before removal)."""
    if node is None:
        return None
    held = owners_of(node)
    return held[0] if held else None


def in_maintenance(node: K8sObject | None) -> Held | None:
    """An owner whose own work explains missing GPUs, Init operators and a driver pod not Ready:
    the driver upgrade (not once it failed), the driver manager or the MIG manager."""
    for h in owners_of(node) if node is not None else []:
        if h.kind == "maintenance" and not h.gave_up and h.begun:
            return h
    return None


def owner_taint(taint: dict[str, Any]) -> str | None:
    """The owner whose taint this is (the owner removing or repairing the node), else None."""
    for spec in OWNERS:
        if any(m.where == "taint" and m.key == taint.get("key") for m in spec.marks):
            return spec.name
    return None
