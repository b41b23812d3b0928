"""`gpubot serve` start-up failures: one line naming the cause, the right exit code."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from tests.fakes.slack_api import serve_slack
from tests.slack_harness import bot_env, write_scenario


def _serve(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "serve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return proc.returncode, proc.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _last_line(stderr: str) -> str:
    # serve logs JSON lines as it starts; the error is the CLI's last plain line
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_port_already_in_use(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path)
    with serve_slack() as slack, socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = _serve(["--http", "--port", str(port), "--scenario", str(scenario)], bot_env(slack.url))
    assert code == 2
    line = _last_line(err)
    assert f"127.0.0.1:{port}" in line and "in use" in line


def test_socket_mode_with_a_refused_app_token(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path)
    with serve_slack() as slack:
        slack.fail("apps.connections.open", 401, times=10)
        env = bot_env(slack.url, SLACK_APP_TOKEN="xapp-1-A0-1-revoked")
        code, err = _serve(["--port", str(_free_port()), "--scenario", str(scenario)], env)
    assert code == 3
    assert "SLACK_APP_TOKEN" in _last_line(err)
