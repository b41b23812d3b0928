"""Hostile requests against `gpubot serve --http` (a real process on 127.0.0.1): issue 10, items 2, 5, 11.

Each test names the adversarial input it sends. The bot runs with a one-second
HTTP timeout so slow clients are cut off quickly; its log must never carry a
traceback, nor any byte of an unsigned request.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.slack_api import FakeSlack
from tests.slack_harness import (
    BotProcess,
    action_body,
    bot_env,
    get,
    post,
    scenario_bot,
    sign,
    slash_body,
    wait_for,
    write_scenario,
)

MARK = "zq-unsigned-marker-7731"  # a string that must never reach the log


@pytest.fixture(scope="module")
def bot(slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    with scenario_bot(slack.url, tmp_path_factory.mktemp("hardening"), GPUBOT_HTTP_TIMEOUT_S="1") as proc:
        yield proc


def raw(port: int, data: bytes, *, timeout: float = 5.0) -> bytes:
    """Send bytes as they are (urllib would fix them) and read until the server closes or answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        answer = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while b"\r\n\r\n" not in answer:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0


def request(headers: list[str], body: bytes = b"", path: str = "/slack/events") -> bytes:
    head = "".join(f"{h}\r\n" for h in [f"POST {path} HTTP/1.1", "Host: 127.0.0.1", *headers])
    return head.encode() + b"\r\n" + body


def assert_clean_log(bot: BotProcess) -> None:
    text = bot.log_path.read_text(errors="replace")
    assert "Traceback" not in text, text[-3000:]
    assert MARK not in text, "an unsigned request's bytes reached the log"


# --- item 2: the signature first, on the raw bytes ------------------------------------------------


@pytest.mark.parametrize(
    ("name", "body", "headers"),
    [
        ("payload=notjson unsigned", f"payload=notjson{MARK}", {}),
        ("JSON under a form content type", '{"type": "' + MARK + '"}', {}),
        ("payload=[1,2] unsigned", f"payload=[1,2]&x={MARK}", {}),
        ("non-numeric timestamp", f"command=/gpu&text={MARK}", {"X-Slack-Request-Timestamp": "abc"}),
        ("stale timestamp", f"command=/gpu&text={MARK}", {"X-Slack-Request-Timestamp": "1000000000"}),
        ("12 KB a-a-a signature", f"text={MARK}", {"X-Slack-Signature": "a-" * 6000}),
        ("64 KB a-a-a body", "token=" + "a-" * 32768 + MARK, {}),
        ("URL-scheme bomb body", "a://" * 16384 + MARK, {}),
    ],
)
def test_unsigned_or_stale_requests_get_401_and_no_log_of_their_bytes(
    bot: BotProcess, name: str, body: str, headers: dict[str, str]
) -> None:
    signed = sign(body, secret="not-the-signing-secret")
    signed.update(headers)
    started = time.monotonic()
    status, _ = post(bot.url + "/slack/events", body, signed)
    assert status == 401, name
    assert time.monotonic() - started < 1.0, f"{name} held the bot"
    assert get(bot.url + "/healthz", timeout=1)[0] == 200
    assert_clean_log(bot)


def test_unsigned_refusals_are_logged_once_per_window_not_per_request(bot: BotProcess) -> None:
    before = bot.log_path.read_text(errors="replace").count("refused unsigned")
    for _ in range(40):
        assert post(bot.url + "/slack/events", f"text={MARK}", {"X-Slack-Signature": "v0=00"})[0] == 401
    after = bot.log_path.read_text(errors="replace").count("refused unsigned")
    assert after - before <= 1
    assert_clean_log(bot)


@pytest.mark.parametrize(
    ("name", "body", "content_type"),
    [
        ("signed payload=notjson", "payload=notjson", "application/x-www-form-urlencoded"),
        ("signed payload=[1,2]", "payload=[1,2]", "application/x-www-form-urlencoded"),
        ("signed JSON list", "[1, 2]", "application/json"),
        ("signed broken JSON", '{"type": ', "application/json"),
    ],
)
def test_signed_but_unreadable_bodies_get_400_not_a_traceback(
    bot: BotProcess, name: str, body: str, content_type: str
) -> None:
    headers = sign(body)
    headers["Content-Type"] = content_type
    status, text = post(bot.url + "/slack/events", body, headers)
    assert status == 400, (name, text)
    assert_clean_log(bot)


def test_a_signed_body_that_is_not_utf8_gets_400(bot: BotProcess) -> None:
    body = b"text=\xff\xfe"
    ts = int(time.time())
    import hashlib
    import hmac

    from tests.slack_harness import SECRET

    sig = "v0=" + hmac.new(SECRET.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    answer = raw(
        bot.port,
        request(
            [
                f"X-Slack-Signature: {sig}",
                f"X-Slack-Request-Timestamp: {ts}",
                "Content-Type: application/x-www-form-urlencoded",
                f"Content-Length: {len(body)}",
            ],
            body,
        ),
    )
    assert status_of(answer) == 400, answer


# --- item 8: replayed signed requests -------------------------------------------------------------


def test_the_same_signed_slash_command_three_times_starts_one_walk(bot: BotProcess, slack: FakeSlack) -> None:
    body = slash_body("why ml/trainer-0", channel="C0REPLAY")
    headers = sign(body)
    answers = [post(bot.url + "/slack/events", body, headers) for _ in range(3)]
    # Slack's redelivery of the same command, re-signed with a new timestamp and X-Slack-Retry-Num.
    retried = sign(body, int(time.time()) + 1)
    retried["X-Slack-Retry-Num"] = "1"
    answers.append(post(bot.url + "/slack/events", body, retried))
    assert all(status == 200 for status, _ in answers), answers
    wait_for(
        "the walk's root",
        lambda: [c for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == "C0REPLAY"],
    )
    time.sleep(0.5)  # a second walk would have posted its root by now
    roots = [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == "C0REPLAY" and not c.params.get("thread_ts")
    ]
    assert len(roots) == 1, [c.params.get("text") for c in roots]


def test_a_replayed_click_runs_once(bot: BotProcess, slack: FakeSlack) -> None:
    body = action_body("layer_descend", "walk-that-does-not-exist", channel="C0CLICKREPLAY")
    headers = sign(body)
    for _ in range(3):
        assert post(bot.url + "/slack/events", body, headers)[0] == 200
    wait_for("the answer to the click", lambda: slack.calls_to("chat.postEphemeral"))
    time.sleep(0.3)
    told = [c for c in slack.calls_to("chat.postEphemeral") if c.params.get("channel") == "C0CLICKREPLAY"]
    assert len(told) == 1


# --- item 11: Transfer-Encoding with Content-Length --------------------------------------------


def test_transfer_encoding_with_content_length_is_refused(bot: BotProcess) -> None:
    body = slash_body("help")
    signed = [f"{k}: {v}" for k, v in sign(body).items()]
    smuggled = b"0\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    for te in ("chunked", "Chunked", "identity, chunked"):
        answer = raw(
            bot.port,
            request([*signed, f"Transfer-Encoding: {te}", f"Content-Length: {len(body)}"], smuggled),
        )
        assert status_of(answer) == 400, answer
        assert b"Connection: close" in answer
    assert_clean_log(bot)


# --- item 5: timeouts -------------------------------------------------------------------------------


def test_slow_headers_are_cut_off_at_the_timeout(bot: BotProcess) -> None:
    """A slow-loris client: one header byte every 0.3 s (each recv alone would never time out)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", bot.port), timeout=5) as conn:
        with contextlib.suppress(ConnectionError, BrokenPipeError):
            for byte in b"POST /slack/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 40:
                conn.sendall(bytes([byte]))
                time.sleep(0.3)
                if time.monotonic() - started > 4:
                    break
        conn.settimeout(3)
        with contextlib.suppress(ConnectionError):
            assert conn.recv(4096) == b""  # closed by the server
    assert time.monotonic() - started < 4


def test_a_body_shorter_than_its_content_length_is_cut_off(bot: BotProcess) -> None:
    """Content-Length: 5000 with 10 bytes sent and the connection held open."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", bot.port), timeout=5) as conn:
        conn.sendall(request(["Content-Length: 5000"], b"0123456789"))
        answer = conn.recv(4096)
    assert status_of(answer) == 408, answer
    assert time.monotonic() - started < 3


def test_an_idle_connection_is_closed(bot: BotProcess) -> None:
    with socket.create_connection(("127.0.0.1", bot.port), timeout=5) as conn:
        started = time.monotonic()
        assert conn.recv(4096) == b""
    assert time.monotonic() - started < 3


def test_oversized_headers_get_431(bot: BotProcess) -> None:
    answer = raw(bot.port, request([f"X-Big-{i}: {'h' * 4000}" for i in range(20)], b""))
    assert status_of(answer) == 431, answer[:200]


def test_healthz_answers_while_hostile_clients_hold_connections(bot: BotProcess) -> None:
    """50 each of: idle connections, slow headers, short bodies, unsigned 64 KB bombs, TE+CL."""
    hold: list[socket.socket] = []
    bomb = ("token=" + "a-" * 32768).encode()
    try:
        for _ in range(50):
            for data in (
                b"",
                b"POST /slack/events HTTP/1.1\r\nHost: x\r\nX-Slow: a",
                request(["Content-Length: 5000"], b"0123456789"),
                request([f"Content-Length: {len(bomb)}", "X-Slack-Signature: v0=1"], bomb),
                request(["Transfer-Encoding: chunked", "Content-Length: 5"], b"0\r\n\r\n"),
            ):
                conn = socket.create_connection(("127.0.0.1", bot.port), timeout=5)
                if data:
                    conn.sendall(data)
                hold.append(conn)
        worst = 0.0
        for _ in range(10):
            started = time.monotonic()
            assert get(bot.url + "/healthz", timeout=2)[0] == 200
            worst = max(worst, time.monotonic() - started)
        assert worst < 0.5, f"/healthz took {worst:.3f}s under load"  # the benchmark measures it finely
    finally:
        for conn in hold:
            conn.close()
    assert_clean_log(bot)


def test_connections_past_the_cap_get_503_and_the_bot_recovers(slack: FakeSlack, tmp_path: Path) -> None:
    env = bot_env(slack.url, GPUBOT_HTTP_MAX_CONNECTIONS="8", GPUBOT_HTTP_TIMEOUT_S="2")
    proc = BotProcess(["--scenario", str(write_scenario(tmp_path))], env, tmp_path / "bot.log")
    held: list[socket.socket] = []
    try:
        for _ in range(8):  # idle connections fill every slot
            held.append(socket.create_connection(("127.0.0.1", proc.port), timeout=5))
        time.sleep(0.2)
        answer = raw(proc.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(answer) == 503, answer
        for conn in held:
            conn.close()
        wait_for("a free slot", lambda: get(proc.url + "/healthz", timeout=1)[0] == 200, timeout=5)
    finally:
        for conn in held:
            conn.close()
        proc.stop()
    text = (tmp_path / "bot.log").read_text()
    assert "Traceback" not in text
    assert text.count("refused connections past the cap") == 1


_EXHAUSTED_SERVER = """
import os, resource, sys
from bot.slack.httpserver import Response, start_server
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
server = start_server({("GET", "/healthz"): lambda r: Response.text(200, "ok\\n")}, "127.0.0.1", 0)
print(server.server_address[1], flush=True)
sys.stdin.readline()
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print("exhausted", len(held), flush=True)
sys.stdin.readline()
for fd in held:
    os.close(fd)
print("released", flush=True)
sys.stdin.readline()
"""


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_file_descriptors_the_accept_loop_waits_instead_of_spinning() -> None:
    """Every descriptor of the process taken (by /dev/null opens), then a client connects."""
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", _EXHAUSTED_SERVER],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        port = int(proc.stdout.readline())
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().startswith("exhausted")
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(0.2)  # the connection waits in the backlog; accept() fails with EMFILE
            before = _cpu_s(proc.pid)
            time.sleep(1.0)
            burnt = _cpu_s(proc.pid) - before
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.stdout.readline().startswith("released")
            answer = conn.recv(4096)
        assert burnt < 0.2, f"the accept loop burnt {burnt:.2f}s of CPU in 1s"
        assert status_of(answer) == 200, answer
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=5)
    assert "Traceback" not in err
    assert err.count("could not accept connections") <= 1, err


# --- item 9: signed clicks of the wrong shape ---------------------------------------------------


def _signed_click(bot: BotProcess, payload: dict[str, object]) -> tuple[int, str]:
    import json
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(payload)})
    return post(bot.url + "/slack/events", body, sign(body))


@pytest.mark.parametrize(
    ("name", "change", "told"),
    [
        ("no user", lambda p: p.pop("user"), False),
        ("user as a string", lambda p: p.update(user="U0ASKER"), False),
        ("list block_id", lambda p: p["actions"][0].update(block_id=["layer1_actions"]), True),
        ("message as a string", lambda p: p.update(message="1795000001.000100"), True),
        ("actions null", lambda p: p.update(actions=None), True),
        ("value as an object", lambda p: p["actions"][0].update(value={"walk": "x"}), True),
    ],
)
def test_a_signed_click_of_the_wrong_shape_runs_nothing_and_answers_the_clicker(
    bot: BotProcess, slack: FakeSlack, name: str, change: object, told: bool
) -> None:
    from tests.slack_harness import action_payload

    channel = "C0SHAPE" + str(abs(hash(name)) % 10000)
    payload = action_payload("walk_all", "walk-0001", channel=channel)
    change(payload)  # type: ignore[operator]
    before = len(slack.calls)
    started = time.monotonic()
    status, _ = _signed_click(bot, payload)
    assert time.monotonic() - started < 1.0
    if told:
        assert status == 200
        answer = wait_for(
            "the answer to the clicker",
            lambda: [c for c in slack.calls_to("chat.postEphemeral") if c.params.get("channel") == channel],
        )
        assert "nothing was done" in answer[0].params["text"]
    else:
        assert status == 400
    time.sleep(0.2)
    ran = [c for c in slack.calls[before:] if c.method in ("chat.postMessage", "chat.update")]
    assert ran == [], f"{name}: something ran"
    assert_clean_log(bot)
