"""Cordons and the node's owners: who cordoned a node (its owner, gpubot's annotations, else the
field manager of `spec.unschedulable` in `metadata.managedFields`), a gpubot cordon that vanished
and who removed it, what the platform does after a cordon, and the words of a refusal
(spec/findings.md, "Who else acts on a node"; spec/interfaces.md, cordon/uncordon).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from layers.facts import objects as o
from layers.facts.owners import Held, holders_of
from layers.sources import K8sObject

# --- who cordoned it ---------------------------------------------------------------------

CORDONED_BY_ANNOTATION = "gpubot/cordoned-by"
CORDONED_AT_ANNOTATION = "gpubot/cordoned-at"
GPUBOT_FIELD_MANAGER = "gpubot"


class FieldOwner(msgspec.Struct, frozen=True):
    manager: str
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
            return FieldOwner(str(entry.get("manager") or "?"), entry.get("time"))
    return None


def cordoned_by(node: K8sObject) -> str | None:
    """Who cordoned the node, in words: the owner, else gpubot's annotation, else the field
    manager of spec.unschedulable and when. None when the node is schedulable."""
    if not o.is_unschedulable(node):
        return None
    field = unschedulable_manager(node)
    for h in holders_of(node):
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


AFTER_CORDON = "after a cordon: "


def uncordon_refusal(node: str, held: Held) -> str:
    """Why gpubot will not uncordon a node in an owner's flow, and what releasing it would do."""
    person = (
        f" {held.owner} gave up ({held.state}): a person must take the node; if you do, "
        f"`kubectl uncordon {node}` by hand, knowing what it does."
        if held.gave_up
        else f" Let {held.owner} finish."
    )
    return (
        f"refused to uncordon {node}: it is in {held.owner}'s flow ({held.state}, {held.mark}); "
        f"{held.release}.{person}"
    )


def cordon_advice(held: Sequence[K8sObject], cordoned: int) -> str:
    """What to do about cordoned candidates: never uncordon one an owner holds."""
    if not held:
        return "uncordon them once they are healthy"
    names = ", ".join(f"{o.name(n)} by {h.text}" for n in held[:3] for h in holders_of(n)[:1])
    rest = cordoned - len(held)
    return f"do not uncordon the {len(held)} held by an owner ({names}): let its flow finish" + (
        f"; uncordon the other {rest} once they are healthy" if rest else ""
    )
