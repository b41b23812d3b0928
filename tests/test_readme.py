"""The README stays a user's guide: short, its quick start the two commands CI runs, and every
setting the code reads documented in docs/configuration.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAX_LINES = 350


def _quick_start_commands() -> list[str]:
    section = README.split("## Quick start", 1)[1]
    block = section.split("```", 2)[1]
    return [line for line in block.splitlines()[1:] if line.strip()]


def test_readme_is_short_and_has_no_history() -> None:
    assert len(README.splitlines()) <= MAX_LINES
    assert "## Changelog" not in README, "history belongs in CHANGELOG.md"
    assert README.startswith("# gpubot\n")


def test_quick_start_is_two_commands_and_ci_runs_the_second() -> None:
    commands = _quick_start_commands()
    assert len(commands) == 2, commands
    assert "gpubot demo" in commands[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci, f".ci/run must call the README's test command {commands[1]!r}"


def test_every_setting_the_code_reads_is_documented() -> None:
    read: set[str] = set()
    for path in (ROOT / "bot").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        read |= set(re.findall(r"\"((?:GPUBOT|SLACK|REDIS|PROMETHEUS)_[A-Z0-9_]+)\"", text))
    documented = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    missing = sorted(name for name in read if f"`{name}`" not in documented)
    assert not missing, f"settings read by bot/ but not in docs/configuration.md: {missing}"


def test_readme_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if target.startswith("http"):
            continue
        assert (ROOT / target).exists(), f"README links to a missing file: {target}"


def test_tests_and_benchmarks_read_nothing_outside_the_repository() -> None:
    """A contributor's clone has only the repository: fixtures live in tests/fixtures/."""
    needle = "/work/" + "shared"
    outside = [
        str(path.relative_to(ROOT))
        for folder in ("tests", "benchmarks", "bot", "layers", "handlers")
        for path in (ROOT / folder).rglob("*.py")
        if needle in path.read_text(encoding="utf-8")
    ]
    assert not outside, f"files that read outside the repository: {outside}"
