"""The Xid catalog: what each Xid means, what the catalog says to do, how bad it is.

Data: layers/data/xid_catalog.csv (numbers, mnemonics and action buckets from
NVIDIA's Xid catalog; meanings and advice in our own words). Severity follows
spec/findings.md (L5_XID): the catalog's immediate action decides.
"""

from __future__ import annotations

import csv
import io
import re
from enum import StrEnum
from functools import cache
from importlib import resources

import msgspec

from layers.findings import Finding, Severity


class XidAction(StrEnum):
    """The catalog's immediate-action buckets, folded to what the bot acts on."""

    IGNORE = "IGNORE"
    RESTART_APP = "RESTART_APP"
    RESET_GPU = "RESET_GPU"
    RESTART_VM = "RESTART_VM"
    RESTART_BM = "RESTART_BM"
    WORKFLOW = "WORKFLOW"  # a multi-step procedure (decode registers, check seating, update firmware …)
    CONTACT_SUPPORT = "CONTACT_SUPPORT"
    INFO = "INFO"  # Xid 154: a notice naming another Xid's recovery action
    NONE = "NONE"  # the catalog names no action


# Buckets that are not one of the enum's names. Every one of them asks for a
# procedure beyond restarting the application, hence WORKFLOW (→ fault);
# CHECK_UVM ("reset the GPU if UVM/vGPU is used") is taken at its worst.
_BUCKET_ACTIONS: dict[str, XidAction] = {
    "WORKFLOW_XID_45": XidAction.WORKFLOW,
    "WORKFLOW_XID_48": XidAction.WORKFLOW,
    "WORKFLOW_NVLINK_ERR": XidAction.WORKFLOW,
    "WORKFLOW_NVLINK5_ERR": XidAction.WORKFLOW,
    "CHECK_MECHANICALS": XidAction.WORKFLOW,
    "UPDATE_SWFW": XidAction.WORKFLOW,
    "CHECK_UVM": XidAction.WORKFLOW,
    "XID_154": XidAction.INFO,
    "": XidAction.NONE,
}

# Xid 45 is clean-up after other errors (or an aborted application): it points
# at the other Xid, never at the card by itself.
_CLEANUP_XID = 45
_RECOVERY_NOTICE_XID = 154


class XidEntry(msgspec.Struct, frozen=True):
    number: int
    name: str  # the catalog's mnemonic
    meaning: str
    immediate_action: str  # the catalog's bucket text, e.g. "RESET_GPU", "WORKFLOW_XID_48"
    investigatory_action: str
    action: XidAction
    severity: Severity
    advice: str


def action_for(bucket: str) -> XidAction:
    """Map a catalog immediate-action bucket onto an XidAction."""
    bucket = bucket.strip()
    if bucket in _BUCKET_ACTIONS:
        return _BUCKET_ACTIONS[bucket]
    try:
        return XidAction(bucket)
    except ValueError:
        # A bucket this code has not seen is some procedure: treat it as one.
        return XidAction.WORKFLOW


def _severity(number: int, action: XidAction) -> Severity:
    if number == _RECOVERY_NOTICE_XID or action is XidAction.INFO:
        return Severity.INFO
    if number == _CLEANUP_XID:
        return Severity.WARN
    if action in (XidAction.RESTART_APP, XidAction.IGNORE, XidAction.NONE):
        return Severity.WARN
    # GPU reset, machine restart, a workflow or support: the card needs attention.
    return Severity.FAULT


def _unknown_name(number: int) -> str:
    return f"Xid {number} (not in the catalog)"


@cache
def catalog() -> dict[int, XidEntry]:
    """Every Xid of the catalog by number, read once from the package data."""
    text = resources.files("layers").joinpath("data/xid_catalog.csv").read_text(encoding="utf-8")
    lines = (line for line in io.StringIO(text) if not line.startswith("#"))
    entries: dict[int, XidEntry] = {}
    for row in csv.DictReader(lines):
        number = int(row["number"])
        action = action_for(row["immediate_action"])
        entries[number] = XidEntry(
            number=number,
            name=row["name"],
            meaning=row["meaning"],
            immediate_action=row["immediate_action"],
            investigatory_action=row["investigatory_action"],
            action=action,
            severity=_severity(number, action),
            advice=row["advice"],
        )
    return entries


def lookup(xid: int) -> XidEntry:
    """The catalog entry of an Xid; a number the catalog lacks gets a WARN placeholder."""
    entry = catalog().get(xid)
    if entry is not None:
        return entry
    return XidEntry(
        number=xid,
        name=_unknown_name(xid),
        meaning="Not in the Xid catalog this bot carries (a newer driver may define it)",
        immediate_action="",
        investigatory_action="",
        action=XidAction.NONE,
        severity=Severity.WARN,
        advice="Look it up in NVIDIA's current Xid catalog; collect diagnostics and watch for repeats",
    )


# "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
_RECOVERY_ACTION = re.compile(
    r"recovery\s+action\s+changed\s+from\s+[^\s(]+(?:\s*\([^)]*\))?\s+to\s+(?:0x[0-9a-f]+\s*)?\(\s*([^)]*[^)\s])\s*\)",
    re.IGNORECASE,
)


def parse_recovery_action(text: str) -> str | None:
    """The action an Xid 154 line reports it changed to, e.g. "Node Reboot Required"."""
    m = _RECOVERY_ACTION.search(text)
    return m.group(1) if m else None


def recovery_summary(where: str, action: str | None) -> str:
    """Xid 154's summary: the recovery action it reports, when the kernel line is in the evidence."""
    if action:
        return (
            f"Xid 154 on {where}: the GPU's recovery action changed to {action!r} — take that action for "
            "the Xid it accompanies"
        )
    return (
        f"Xid 154 on {where}: the GPU's recovery action changed; the action it names is not in this "
        "evidence — read it from the kernel log (dmesg | grep -i xid) and take it"
    )


def name_recovery_action(findings: list[Finding], node: str, action: str, source: str) -> None:
    """Say the recovery action an Xid 154 reported in each other Xid of the node it accompanies (in place)."""
    note = f"recovery action the driver set (Xid 154, {source}): {action}"
    for i, f in enumerate(findings):
        if (
            f.code != "L5_XID"
            or f.node != node
            or f.summary.startswith(("Xid 154 ", "last Xid "))
            or note in f.evidence
        ):
            continue
        findings[i] = msgspec.structs.replace(
            f,
            summary=f"{f.summary}; the driver's recovery action for it: {action} (Xid 154)",
            evidence=(*f.evidence, note),
        )
