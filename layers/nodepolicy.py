"""One node, one truth: the decision table of spec/findings.md ("Who else acts on a node", "One
policy decides every action") as one function.

    policy = decide(node, driver_pods=...)   # pure over the node's JSON (and its driver pods)

`NodePolicy` answers, for every surface (a finding's advice, the verdict, the buttons of every
message, their confirmations, the digest, the CLI's `cordon` / `uncordon [--force]` / `diag`, the
gateway's queued clicks, the ledger's owner column):

- `cordon`, `uncordon` (the button), `uncordon_force` (the CLI's `--force`, operators),
  `diagnostics`, `must_gather`: an `Allowed(offered, said)`; `said` is the sentence to say
  instead when not offered (or the note that goes with it when offered);
- `confirm`: the lines every confirmation repeats first, whichever layer's message it came from:
  the owner line and the platform's next step (GKE Autopilot re-creation, EKS auto repair, the
  driver manager's uncordon after a driver restart);
- `advise(catalog_action)`: the advice a finding or the verdict gives on this node;
- `replaces_action`: the catalog's drain / reset / reboot must not be advised here;
- `row`: the table's row (ROWS), `holder` the owner deciding it, `owners` every owner read.

The owner data (marks, phases) is layers/facts/owners.py; who cordoned a node is
layers/facts/cordons.py. No other module reads owner marks (tests/test_owner_keys.py).
A `NodePolicy` round-trips through `to_dict` / `from_dict`, so a stored walk's buttons keep it.
"""

from __future__ import annotations

from collections.abc import Sequence

from layers.facts import cordons
from layers.facts import objects as o
from layers.facts import owners as ow
from layers.nodeactions import Allowed, NodePolicy, Row
from layers.sources import K8sObject

OWNER_LINE = "owner: "


def owner_line(held: ow.Held) -> str:
    """`owner: X (state) — mark, since …, reason: …`: the line a walk shows once per node."""
    since = f", since {held.since}" if held.since else ""
    why = f", reason: {held.reason}" if held.reason else ""
    role = " (reports; does not hold the node)" if held.role == "reporter" else ""
    return f"{OWNER_LINE}{held.text}{role} — {held.mark}{since}{why}"


def _confirm_line(held: ow.Held | None) -> str:
    """The owner in one short sentence, for a confirmation dialog (300 characters in Slack)."""
    if held is None:
        return ""
    if held.role == "reporter" and held.phase != "gave-up":
        return f"{held.owner} reports {held.state}."
    if held.phase == "gave-up":
        return f"{held.owner} gave up ({held.state}): a person must act."
    if held.phase == "queued":
        return f"{held.owner} is queued here ({held.state}): it keeps a cordon it finds."
    return f"Held by {held.owner} ({held.state})."


_RUNNING_ORDER = {"removal": 0, "quarantine": 1, "repair": 1, "maintenance": 2}


def deciding(owners: Sequence[ow.Held]) -> ow.Held | None:
    """The owner whose row applies: a running holder (removal, then quarantine/repair, then
    maintenance), else one that gave up, else a queued one, else a reporter."""
    holders = [h for h in owners if h.role == "holder"]
    running = sorted((h for h in holders if h.phase == "running"), key=lambda h: _RUNNING_ORDER[h.kind])
    for group in (
        running,
        [h for h in owners if h.phase == "gave-up"],
        [h for h in holders if h.phase == "queued"],
    ):
        if group:
            return group[0]
    reporters = [h for h in owners if h.role == "reporter"]
    return reporters[0] if reporters else None


def _row(held: ow.Held | None, gpubot: bool, person: bool) -> Row:
    if held is not None and held.phase == "gave-up":
        return "gave-up"
    if held is not None and held.role == "holder":
        if held.phase == "queued":
            return "queued"
        return (
            "running-removal"
            if held.kind == "removal"
            else ("running-maintenance" if held.kind == "maintenance" else "running-repair")
        )
    if gpubot:
        return "cordoned-by-gpubot"
    if person:
        return "cordoned-by-person"
    return "reported" if held is not None else "no-owner"


def platform_notes(node: K8sObject, owners: Sequence[ow.Held], driver_pods: Sequence[K8sObject]) -> list[str]:
    """What the platform does after a cordon of this node: GKE Autopilot, EKS auto repair, the driver manager."""
    notes: list[str] = []
    if cordons.is_gke_autopilot(node):
        notes.append("GKE Autopilot re-creates a node cordoned ~10 min: collect the must-gather first.")
    for h in owners:
        if h.role == "reporter" and h.release and h.release not in " ".join(notes):
            notes.append(h.release[0].upper() + h.release[1:] + ".")
    switch = cordons.driver_manager_uncordons(driver_pods)
    if switch:
        notes.append(f"The driver manager ({switch}) uncordons it when its driver pod restarts.")
    return notes


def decide(node: K8sObject, *, driver_pods: Sequence[K8sObject] = ()) -> NodePolicy:
    """The decision table's answer for one node (spec/findings.md, "One policy decides every action").

    `driver_pods`: the GPU Operator driver pods on the node (their k8s-driver-manager's
    ENABLE_GPU_POD_EVICTION says whether a driver restart uncordons it); empty when unknown.
    """
    name = o.name(node)
    owners = ow.owners_of(node)
    held = deciding(owners)
    unschedulable = o.is_unschedulable(node)
    gpubot = unschedulable and cordons.CORDONED_BY_ANNOTATION in o.annotations_of(node)
    person = unschedulable and not gpubot
    by = cordons.cordoned_by(node) if unschedulable else None
    row = _row(held, gpubot, person)
    lines = tuple(owner_line(h) for h in owners)
    x, state = (held.owner, held.state) if held else ("", "")

    cordon = Allowed(True, "")
    uncordon = Allowed(False, f"{name} is not cordoned")
    force = Allowed(False, f"{name} is not cordoned")
    diag = Allowed(True, "")
    head, tail, replaces, first = "", "", False, False
    if gpubot:
        cordon = Allowed(False, f"{name} is already {by}")
        uncordon = Allowed(True, f"undo gpubot's cordon of {name} ({by})")
        force = Allowed(True, f"{name} is {by}")
    elif person:
        cordon = Allowed(False, f"{name} is already {by} (not gpubot)")
        uncordon = Allowed(
            False, f"{name} is {by}, not by gpubot: an operator may run `gpubot uncordon {name} --force`"
        )
        force = Allowed(True, f"{name} is {by}")
    if row == "queued":
        tail = f"a driver upgrade is queued here ({x}: {state})"
    elif held is not None and row.startswith("running-"):
        refusal = cordons.uncordon_refusal(name, held)
        uncordon = force = Allowed(False, refusal)
        replaces = True
        if row == "running-removal":
            cordon = Allowed(False, f"{x} is removing {name} ({state}): it needs no cordon")
            diag = Allowed(False, f"{x} is removing {name} ({state}): the node is going away")
            head, first = f"{x} is removing this node: pods move elsewhere", True
        elif row == "running-maintenance":
            cordon = Allowed(False, f"{name} is held by {x} ({state})")
            diag = Allowed(False, f"{x} is at work on {name} ({state}): the GPUs are being reconfigured")
            head = f"maintenance by {x} ({state}): wait for it"
        else:
            cordon = Allowed(False, f"{name} is held by {x} ({state})")
            diag = Allowed(False, f"{x} is repairing {name} ({state}): diagnostics would fight it")
            head = f"{x} is repairing it ({state}): no action; collect a must-gather if the evidence matters"
    elif row == "gave-up":
        head = f"{x} gave up ({state}): a person must act"
        if unschedulable:
            cordon = Allowed(False, f"{name} is held by {x} (gave up: {state})")
            uncordon = Allowed(
                False,
                f"{x} gave up on {name} ({state}): a person must take it; an operator may run "
                f"`gpubot uncordon {name} --force`",
            )
            force = Allowed(True, f"{x} gave up on {name} ({state}); releasing it is a person's call")
    elif row == "reported":
        tail = f"{x} reports {state}"
    return NodePolicy(
        node=name,
        row=row,
        cordon=cordon,
        uncordon=uncordon,
        uncordon_force=force,
        diagnostics=diag,
        must_gather=Allowed(True, "collect it first: the node is going away" if first else ""),
        next_steps=tuple(platform_notes(node, owners, driver_pods)),
        line=_confirm_line(held),
        holder=None
        if held is None
        else {**held.to_dict(), "phase": held.phase, "role": held.role, "kind": held.kind},
        owners=lines,
        cordoned_by=by,
        must_gather_first=first,
        advice_head=head,
        replaces_action=replaces,
        advice_tail=tail,
    )


def ledger_owner(node: K8sObject) -> dict[str, str] | None:
    """The ledger's owner column: the deciding owner's name, state and phase, and the table's
    refusal of diagnostics there (`diagnostics`, so `/gpu node` offers no Run diagnostics), else None."""
    held = deciding(ow.owners_of(node))
    if held is None:
        return None
    out = {**held.to_dict(), "phase": held.phase}
    diag = decide(node).diagnostics
    if not diag.offered:
        out["diagnostics"] = diag.said
    return out
