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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
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


# The owners' current code decides the exact keys (sources in docs/owners.md).
NVSENTINEL_STATE = "dgxc.nvidia.com/nvsentinel-state"
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_INITIAL_UNSCHEDULABLE = "nvidia.com/gpu-driver-upgrade.node-initial-state.unschedulable"
PAUSED_FOR_UPGRADE = "paused-for-driver-upgrade"
PAUSED_FOR_MIG = "paused-for-mig-change"
CA_TO_BE_DELETED = "ToBeDeletedByClusterAutoscaler"
CA_DELETION_CANDIDATE = "DeletionCandidateOfClusterAutoscaler"
KARPENTER_DISRUPTED = "karpenter.sh/disrupted"
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
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
                shown = f"taint {mark.key}" + (f"={t['value']}" if t.get("value") else "") + f":{t.get('effect')}"
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


def owners_of(node: K8sObject) -> list[Held]:
    """Every owner whose flow the node is in, in the table's order."""
    out: list[Held] = []
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
        if h.kind == "maintenance" and not h.gave_up:
            return h
    return None


def owner_taint(taint: dict[str, Any]) -> str | None:
    """The owner whose taint this is (the owner removing or repairing the node), else None."""
    for spec in OWNERS:
        if any(m.where == "taint" and m.key == taint.get("key") for m in spec.marks):
            return spec.name
    return None


# --- who cordoned it ---------------------------------------------------------------------

CORDONED_BY_ANNOTATION = "gpubot/cordoned-by"
CORDONED_AT_ANNOTATION = "gpubot/cordoned-at"
GPUBOT_FIELD_MANAGER = "gpubot"


@dataclass(frozen=True)
class FieldOwner:
    manager: str
    operation: str
    time: str | None

    @property
    def text(self) -> str:
        return self.manager + (f" at {self.time}" if self.time else "")


def unschedulable_manager(node: K8sObject) -> FieldOwner | None:
    """The field manager that set `spec.unschedulable` (metadata.managedFields, FieldsV1)."""
    for entry in (node.get("metadata") or {}).get("managedFields") or []:
        fields = entry.get("fieldsV1") or {}
        spec = fields.get("f:spec") if isinstance(fields, dict) else None
        if isinstance(spec, dict) and "f:unschedulable" in spec:
            return FieldOwner(str(entry.get("manager") or "?"), str(entry.get("operation") or ""), entry.get("time"))
    return None


def cordoned_by(node: K8sObject) -> str | None:
    """Who cordoned the node, in words: the owner, else gpubot's annotation, else the field
    manager of spec.unschedulable and when. None when the node is schedulable."""
    if not o.is_unschedulable(node):
        return None
    field = unschedulable_manager(node)
    for h in owners_of(node):
        if h.kind in ("quarantine", "maintenance") or (h.owner == "AKS" and h.mark.startswith("taint")):
            by = f"cordoned by {h.owner} ({h.state}" + (f", since {h.since}" if h.since else "") + ")"
            return by + (f"; field manager {field.text}" if field else "")
    notes = o.annotations_of(node)
    if CORDONED_BY_ANNOTATION in notes:
        when = notes.get(CORDONED_AT_ANNOTATION)
        return f"cordoned by gpubot for {notes[CORDONED_BY_ANNOTATION]}" + (f" at {when}" if when else "")
    if field is not None:
        return f"cordoned by field manager {field.text}"
    return "cordoned by an unknown client (no managedFields entry for spec.unschedulable)"


def vanished_cordon(node: K8sObject) -> str | None:
    """A cordon gpubot made that is gone without gpubot: its annotations are on a schedulable node.
    Says who removed it: the field manager of `spec.unschedulable` (kubectl uncordon and the driver
    manager write `false`), else the last manager that wrote the node after gpubot's cordon."""
    notes = o.annotations_of(node)
    if CORDONED_BY_ANNOTATION not in notes or o.is_unschedulable(node):
        return None
    at = notes.get(CORDONED_AT_ANNOTATION)
    field = unschedulable_manager(node)
    if field is not None and field.manager != GPUBOT_FIELD_MANAGER:
        who = f"removed by {field.text}"
    else:
        later = [
            e
            for e in (node.get("metadata") or {}).get("managedFields") or []
            if e.get("manager") != GPUBOT_FIELD_MANAGER and at and str(e.get("time") or "") > at
        ]
        later.sort(key=lambda e: str(e.get("time") or ""))
        who = (
            f"removed by an unrecorded writer; last to write the node after it: {later[-1].get('manager')} "
            f"at {later[-1].get('time')}"
            if later
            else "removed by an unrecorded writer"
        )
    return (
        f"gpubot's cordon of {o.name(node)} (for {notes[CORDONED_BY_ANNOTATION]}"
        + (f", at {at}" if at else "")
        + f") is gone: {who}"
    )


# --- what the platform does after a cordon -----------------------------------------------

DRIVER_MANAGER_SWITCHES = ("ENABLE_GPU_POD_EVICTION", "ENABLE_AUTO_DRAIN")


def is_gke_autopilot(node: K8sObject) -> bool:
    """GKE Autopilot names its nodes gk3-… and labels them with a GKE node pool."""
    return o.name(node).startswith("gk3-") and "cloud.google.com/gke-nodepool" in o.labels(node)


def driver_manager_uncordons(driver_pods: Sequence[K8sObject]) -> str | None:
    """The k8s-driver-manager init container uncordons the node when the driver pod restarts if
    ENABLE_GPU_POD_EVICTION or ENABLE_AUTO_DRAIN is true (both default true). The switch, else None."""
    for pod in driver_pods:
        for c in o.containers(pod, init=True):
            if c.get("name") != "k8s-driver-manager":
                continue
            env = {str(e.get("name")): str(e.get("value", "")).lower() for e in c.get("env") or []}
            for switch in DRIVER_MANAGER_SWITCHES:
                if env.get(switch, "true") == "true":
                    return f"{switch}={env.get(switch, 'true (its default)')}"
    return None


def cordon_notes(node: K8sObject, driver_pods: Sequence[K8sObject] = ()) -> list[str]:
    """What the platform will do after gpubot cordons this node (the confirmation says it)."""
    notes: list[str] = []
    for h in owners_of(node):
        if h.kind == "removal":
            notes.append(f"{h.owner} is already removing it ({h.mark}): it needs no cordon")
    if is_gke_autopilot(node):
        notes.append(
            "GKE Autopilot re-creates a node cordoned for ~10 minutes (node auto-repair): collect the must-gather first"
        )
    switch = driver_manager_uncordons(driver_pods)
    if switch:
        notes.append(
            f"the GPU Operator's driver manager ({switch}) uncordons the node when its driver pod restarts: "
            "the cordon may not last"
        )
    return notes


def cordon_advice(held: Sequence[K8sObject], cordoned: int) -> str:
    """What to do about cordoned candidates: never uncordon one an owner holds."""
    if not held:
        return "uncordon them once they are healthy"
    names = ", ".join(f"{o.name(n)} by {h.text}" for n in held[:3] for h in owners_of(n)[:1])
    rest = cordoned - len(held)
    return f"do not uncordon the {len(held)} held by an owner ({names}): let its flow finish" + (
        f"; uncordon the other {rest} once they are healthy" if rest else ""
    )
