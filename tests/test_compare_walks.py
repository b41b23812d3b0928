"""scripts/compare_walks.py, the one tool that dumps walks before and after a change: it writes each
run of each scenario, through the snapshot and the API, and finds a difference when there is one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scripts import compare_walks


def test_it_dumps_every_run_and_finds_what_changed(tmp_path: Path, capsys: object) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    assert compare_walks.main([str(before), "--only", "bundled", "--api", "--pages", "2"]) == 0
    names = {p.name for p in before.iterdir()}
    assert "bot__scenarios__xid79-fell-off-bus.all.json" in names
    assert "bot__scenarios__xid79-fell-off-bus.api2.json" in names
    walked = json.loads((before / "bot__scenarios__xid79-fell-off-bus.all.json").read_text())
    through_api = json.loads((before / "bot__scenarios__xid79-fell-off-bus.api2.json").read_text())
    assert through_api["all"]["verdict"] == walked["verdict"]
    after.mkdir()
    for p in before.iterdir():
        (after / p.name).write_bytes(p.read_bytes())
    assert compare_walks.main(["--compare", str(before), str(after)]) == 0
    changed = after / "bot__scenarios__xid79-fell-off-bus.digest.json"
    changed.write_text(changed.read_text().replace("79", "80"))
    assert compare_walks.main(["--compare", str(before), str(after), "--diff"]) == 1


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = Path(compare_walks.__file__)
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_help_prints_usage_and_writes_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, "--help")
    assert done.returncode == 0 and "compare_walks.py" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_option_or_no_folder_is_bad_input(tmp_path: Path) -> None:
    for args in (("--out",), ()):
        done = _run(tmp_path, *args)
        assert done.returncode == 2 and done.stderr.splitlines()[-1].startswith("compare_walks.py: error:")
        assert list(tmp_path.iterdir()) == []
