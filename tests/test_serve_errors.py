"""`gpubot serve` start-up failures: one line naming the cause, the right exit code."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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


# --- a malformed Content-Length, over a real socket ------------------------------------------


def _raw_post(port: int, headers: list[str], body: bytes = b"") -> tuple[int, bytes]:
    """Send one POST byte for byte (urllib would fix the header) and read the status line."""
    head = "".join(f"{h}\r\n" for h in ["POST /slack/events HTTP/1.1", "Host: 127.0.0.1", *headers])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(head.encode() + b"\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(4096)  # a handler stuck reading the body times this out
            if not chunk:
                break
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    return status, answer


@contextlib.contextmanager
def _http_bot(tmp_path: Path) -> Iterator[int]:
    """The bot's HTTP server in-process against the fake Slack; yields its port."""
    from bot.slack.transport import start_http
    from tests.slack_harness import inprocess_bot

    with serve_slack() as slack:
        gpubot = inprocess_bot(slack.url, write_scenario(tmp_path))
        server = start_http(gpubot, "127.0.0.1", 0, events=True)
        try:
            yield int(server.server_address[1])
        finally:
            server.shutdown()
            server.server_close()
            gpubot.shutdown()


def test_bad_content_length_is_answered_not_hung_nor_a_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from tests.slack_harness import sign, slash_body

    with _http_bot(tmp_path) as port:
        started = time.monotonic()
        assert _raw_post(port, ["Content-Length: -1"], b"x")[0] == 400
        assert time.monotonic() - started < 3
        assert _raw_post(port, ["Content-Length: abc"])[0] == 400
        assert _raw_post(port, ["Content-Length: 5", "Content-Length: 6"], b"hello!")[0] == 400
        assert _raw_post(port, ["Content-Length: +5"], b"hello")[0] == 400
        assert _raw_post(port, [])[0] == 411
        assert _raw_post(port, ["Transfer-Encoding: chunked"], b"0\r\n\r\n")[0] == 411
        assert _raw_post(port, [f"Content-Length: {1 << 30}"])[0] == 413
        # A well-formed signed request still goes through to Bolt.
        body = slash_body("help")
        signed = [f"{k}: {v}" for k, v in sign(body).items()]
        status, answer = _raw_post(port, [*signed, f"Content-Length: {len(body)}"], body.encode())
        assert status == 200, answer
    assert "Traceback" not in capfd.readouterr().err


def test_a_client_that_resets_the_connection_is_no_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import struct

    with _http_bot(tmp_path) as port:
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                s.recv(4096)
                # Hang up with a reset while the server waits for the next keep-alive request.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        time.sleep(0.3)
    assert "Traceback" not in capfd.readouterr().err
