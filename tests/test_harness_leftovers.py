"""A `gpubot serve` a failed fixture leaves running is killed when the test process exits.

A fixture that starts a gateway and then an agent that never becomes ready raises before its
teardown: the gateway outlived the run once (PPID 1) and loaded the machine for every later test.
tests/slack_harness.py stops every bot still running at exit; here a child process starts one,
never stops it, and exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import wait_for

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.slack_harness import BotProcess, bot_env, write_scenario
folder = Path({folder!r})
bot = BotProcess(["--scenario", str(write_scenario(folder))], bot_env({slack!r}), folder / "bot.log")
print(bot.proc.pid, flush=True)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose, but only its parent could reap it: read its state.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    return True


def test_a_bot_left_running_is_killed_when_the_test_process_exits(slack: FakeSlack, tmp_path: Path) -> None:
    child = subprocess.run(  # the bot is ready (it answered /readyz) when the child exits
        [sys.executable, "-c", _CHILD.format(root=str(ROOT), folder=str(tmp_path), slack=slack.url)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert child.returncode == 0, child.stderr
    pid = int(child.stdout.split()[0])
    try:
        wait_for("the bot left running gone", lambda: not _alive(pid), timeout=10)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
