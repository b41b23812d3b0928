"""Every gpubot process runs with the collector's thresholds of bot/ops/gctune.py (the CLI and
`serve` both enter through bot/cli/main.py)."""

from __future__ import annotations

import subprocess
import sys

from bot.ops.gctune import THRESHOLDS


def test_the_cli_sets_the_collectors_thresholds_and_leaves_it_enabled() -> None:
    code = (
        "import gc, sys; from bot.cli.main import main; main(['scenarios']);"
        "print(gc.get_threshold(), gc.isenabled(), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == f"{THRESHOLDS} True"
