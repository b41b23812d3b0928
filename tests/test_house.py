"""The house rules a reviewer checks by hand, held by CI: small modules, a map that is the tree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bot", "handlers", "layers")
MAX_LINES = 400


def test_no_module_of_the_packages_is_over_400_lines() -> None:
    # Split by responsibility when one grows past this (CONTRIBUTING.md); tests and builders are
    # data-heavy and not held to it.
    long = {
        path.relative_to(ROOT).as_posix(): n
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_architecture_module_map_is_the_tree() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "architecture_map.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_module_the_architecture_prose_names_exists() -> None:
    # The prose above the map names modules by path (`bot/slack/post.py`); a rename must reach it.
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").split("<!-- MAP", 1)[0]
    named = set(re.findall(r"\b((?:bot|handlers|layers)/[\w/]+\.py)\b", text))
    assert named, "the prose names no module: the pattern is wrong"
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
