"""The Xid catalog: severities per spec/findings.md (L5_XID), unknown numbers, Xid 154."""

from __future__ import annotations

import csv

import pytest

from layers.findings import Severity
from layers.xid import XidAction, action_for, catalog, lookup, parse_recovery_action
from tests import fixtures

# spec/findings.md L5_XID: immediate action RESTART_APP or IGNORE → warn.
WARN_XIDS = [13, 31, 43, 63, 68, 69, 92, 94]
# Any GPU reset, machine restart, workflow or support action → fault.
FAULT_XIDS = [48, 62, 64, 74, 79, 95, 109, 119, 120, 140]

# Every Xid in gpu-stack.md §E's table and text (the catalog rows the playbook quotes).
GPU_STACK_XIDS = [
    8, 13, 31, 32, 38, 43, 44, 45, 46, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95,
    109, 110, 119, 120, 121, 136, 137, 140, 143, 144, 145, 146, 147, 148, 149, 150,
    151, 154, 155, 156, 157, 158, 159, 160, 161, 167, 168, 169, 171, 172,
]  # fmt: skip
# and their mnemonics as the playbook prints them, spot-checked
GPU_STACK_NAMES = {
    48: "ROBUST_CHANNEL_GPU_ECC_DBE",
    79: "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
    119: "GSP_RPC_TIMEOUT",
    154: "GPU_RECOVERY_ACTION_CHANGED",
    149: "NVLINK_NETIR_ERROR",
}

REFERENCE_CSV = fixtures.REFERENCE / "xid-catalog.csv"


@pytest.mark.parametrize("xid", WARN_XIDS)
def test_application_level_xids_are_warn(xid: int) -> None:
    entry = lookup(xid)
    assert entry.action in (XidAction.RESTART_APP, XidAction.IGNORE)
    assert lookup(xid).severity is Severity.WARN


@pytest.mark.parametrize("xid", FAULT_XIDS)
def test_reset_restart_workflow_xids_are_fault(xid: int) -> None:
    assert lookup(xid).action in (
        XidAction.RESET_GPU,
        XidAction.RESTART_BM,
        XidAction.RESTART_VM,
        XidAction.WORKFLOW,
        XidAction.CONTACT_SUPPORT,
    )
    assert lookup(xid).severity is Severity.FAULT


def test_specific_actions_from_the_catalog() -> None:
    assert lookup(79).action is XidAction.RESTART_BM
    assert lookup(79).immediate_action == "RESTART_BM"
    assert lookup(48).action is XidAction.WORKFLOW
    assert lookup(48).immediate_action == "WORKFLOW_XID_48"
    assert lookup(151).action is XidAction.RESTART_VM
    assert lookup(151).severity is Severity.FAULT
    assert lookup(1).action is XidAction.CONTACT_SUPPORT
    assert lookup(119).investigatory_action == "INVESTIGATE_SW"


def test_xid_45_cleanup_is_warn_although_its_bucket_is_a_workflow() -> None:
    assert lookup(45).immediate_action == "WORKFLOW_XID_45"
    assert lookup(45).severity is Severity.WARN


def test_xid_154_is_info() -> None:
    assert lookup(154).action is XidAction.INFO
    assert lookup(154).severity is Severity.INFO


def test_no_action_in_the_catalog_is_warn() -> None:
    # 162-172 carry no action in the catalog.
    for xid in (162, 167, 171, 172):
        assert lookup(xid).action is XidAction.NONE
        assert catalog().get(xid) == lookup(xid)
        assert lookup(xid).severity is Severity.WARN


def test_unknown_number_gets_a_warn_placeholder() -> None:
    entry = lookup(9999)
    assert entry.name == "Xid 9999 (not in the catalog)"
    assert entry.severity is Severity.WARN
    assert entry.action is XidAction.NONE
    assert catalog().get(entry.number) != entry
    assert entry.advice


@pytest.mark.parametrize("xid", GPU_STACK_XIDS)
def test_every_xid_of_the_playbook_is_in_the_catalog(xid: int) -> None:
    entry = lookup(xid)
    assert catalog().get(entry.number) == entry
    assert entry.meaning and entry.advice
    assert "not in the catalog" not in entry.name


def test_mnemonics_match_the_playbook() -> None:
    for xid, name in GPU_STACK_NAMES.items():
        assert lookup(xid).name == name


def test_catalog_is_complete_and_loaded_once() -> None:
    assert catalog() is catalog()
    assert set(catalog()) == set(range(1, 173))


@pytest.mark.skipif(not REFERENCE_CSV.exists(), reason="reference catalog not present")
def test_action_buckets_agree_with_the_reference_catalog() -> None:
    lines = [line for line in REFERENCE_CSV.read_text().splitlines() if not line.startswith("#")]
    rows = list(csv.reader(lines))[1:]
    assert len(rows) == len(catalog())
    for row in rows:
        entry = lookup(int(row[1]))
        assert entry.name == row[2].strip()
        assert entry.immediate_action == row[8].strip()
        assert entry.action is action_for(row[8])
        # our meanings are our own words, not the catalog's descriptions
        assert entry.meaning not in (row[3].strip(), row[11].strip())


@pytest.mark.parametrize(
    ("line", "action"),
    [
        # spec / catalog example
        ("GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)", "Node Reboot Required"),
        # samples/25 (dmesg, NVLink5)
        (
            "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)",
            "Drain and Reset",
        ),
        (
            "NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 (Drain and Reset) "
            "to 0x1 (GPU Reset Required)",
            "GPU Reset Required",
        ),
        # kubectl --timestamps prefix, lower case, extra whitespace
        (
            "2025-02-27T15:10:02.123Z kernel: nvrm: xid (pci:0008:01:00): 154, gpu recovery action "
            "changed from 0x0 (None)  to  0x8 ( Drain P2P )",
            "Drain P2P",
        ),
    ],
)
def test_parse_recovery_action(line: str, action: str) -> None:
    assert parse_recovery_action(line) == action


def test_parse_recovery_action_other_lines() -> None:
    assert (
        parse_recovery_action("NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 00")
        is None
    )
    assert parse_recovery_action("") is None
