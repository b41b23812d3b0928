"""scripts/dump_walks.py's arguments: `--help` prints the usage and creates nothing (it used to create a
folder named `--help` and dump every walk into it); an option it does not know is bad input, exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dump_walks.py"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )


def test_help_prints_usage_and_writes_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, "--help")
    assert done.returncode == 0 and "dump_walks.py" in done.stdout
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_option_is_bad_input(tmp_path: Path) -> None:
    done = _run(tmp_path, "--out")
    assert done.returncode == 2 and done.stderr.strip() == "usage: dump_walks.py OUT_DIR"
    assert list(tmp_path.iterdir()) == []
