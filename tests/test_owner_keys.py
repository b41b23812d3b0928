"""No module but the owners' reads an owner's mark (spec/findings.md, "One policy decides every
action": "No other code reads owner marks"). The owner data is layers/facts/owners.py (labels,
annotations, taints) and layers/facts/healthagents.py (the health agents' conditions, its one
reader); everything else imports their constants or asks layers/nodepolicy.py.

A string literal in bot/, handlers/ or layers/ (docstrings and comments aside) that holds an owner
mark's key fails here, naming the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OWNERS_MODULES = {"layers/facts/owners.py", "layers/facts/healthagents.py"}
MARK_KEYS = (
    "dgxc.nvidia.com/nvsentinel-state",
    "nvidia.com/gpu-driver-upgrade-state",
    "karpenter.sh/disrupted",
    "karpenter.sh/disruption",
    "karpenter.sh/do-not-disrupt",
    "ToBeDeletedByClusterAutoscaler",
    "DeletionCandidateOfClusterAutoscaler",
    "remediator.aks.microsoft.com",
    "sagemaker.amazonaws.com/node-health-status",
    "cordon-by",
    "quarantineHealthEvent",
    "AcceleratedHardwareReady",
    "XidCriticalError",
    "paused-for-mig-change",
    "paused-for-driver-upgrade",
    "mig.config.state",
    "GpuMemWatch",
    "SysLogsXIDError",
    "NVLinkStatusInactive",
)
# Literals that hold a key's text and are not a mark, each with why.
NOT_A_MARK = {
    # The device plugin's own log line names NVML's event type ("XidCriticalError: Xid=79 …").
    ("layers/facts/pluginlog.py", "XidCriticalError"),
}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring constants of a module, class or function."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def mark_literals(path: Path, rel: str) -> list[str]:
    """`rel:line: key` for every string literal of the file that holds an owner mark's key."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            for key in MARK_KEYS:
                if key in node.value and (rel, key) not in NOT_A_MARK:
                    found.append(f"{rel}:{node.lineno}: {key}")
    return found


def test_no_module_but_the_owners_holds_an_owner_marks_key() -> None:
    offenders: list[str] = []
    for package in ("bot", "handlers", "layers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in OWNERS_MODULES:
                offenders += mark_literals(path, rel)
    assert not offenders, "owner marks read outside the owners' modules:\n" + "\n".join(offenders)


def test_every_key_is_in_the_owners_modules() -> None:
    """The list above is the owners' marks: each key is in their modules (so a renamed key is seen)."""
    text = "".join((ROOT / m).read_text(encoding="utf-8") for m in sorted(OWNERS_MODULES))
    assert [k for k in MARK_KEYS if k not in text] == []


@pytest.mark.parametrize("key", ["dgxc.nvidia.com/nvsentinel-state", "karpenter.sh/disruption"])
def test_the_check_sees_a_key_in_any_module(tmp_path: Path, key: str) -> None:
    """The check fails on a module that spells a key (a reader added outside the owners' modules)."""
    module = tmp_path / "reader.py"
    module.write_text(f'"""A doc naming {key} is fine."""\n\nSTATE = "{key}"  # not fine\n')
    assert mark_literals(module, "layers/reader.py") == [f"layers/reader.py:3: {key}"]
