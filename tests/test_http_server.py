"""bot/slack/httpserver.py in-process (waitress under the bot's limits): what the process tests
(tests/test_http_hardening.py) cannot reach quickly — a full pool, an unread answer, a trickled
body, a route's bug — each on a real socket on 127.0.0.1."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from bot.slack.httpserver import HttpServer, Limits, Request, Response, Routes, start_server


@contextlib.contextmanager
def serving(routes: Routes, limits: Limits) -> Iterator[HttpServer]:
    server = start_server(routes, "127.0.0.1", 0, limits)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def exchange(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    """Send `data`, read until the server closes (or the timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        answer = b""
        with contextlib.suppress(TimeoutError, ConnectionError):
            while chunk := conn.recv(65536):
                answer += chunk
    return answer


def healthz(port: int) -> float:
    started = time.monotonic()
    answer = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer
    return time.monotonic() - started


def test_healthz_answers_while_every_worker_waits_in_a_slow_route(caplog: pytest.LogCaptureFixture) -> None:
    """Twice as many requests as threads stuck in a route (Redis stalled): liveness still answers,
    and the queued requests are one log line, not one each (waitress warns per request)."""
    # Another test of this worker may have set the logging level: this one reads warnings.
    caplog.set_level(logging.WARNING, logger="gpubot.http")
    release = threading.Event()

    def stuck(_req: Request) -> Response:
        release.wait(10)
        return Response.text(200, "late\n")

    routes = {("GET", "/healthz"): lambda _r: Response.text(200, "ok\n"), ("POST", "/slow"): stuck}
    with serving(routes, Limits(threads=4, header_s=5, body_s=5)) as server:
        port = server.server_address[1]
        clients = [
            threading.Thread(
                target=exchange, args=(port, b"POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            )
            for _ in range(8)
        ]
        for c in clients:
            c.start()
        time.sleep(0.3)  # every worker is now inside `stuck`
        try:
            assert max(healthz(port) for _ in range(5)) < 0.5
        finally:
            release.set()
            for c in clients:
                c.join()
    waiting = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage() or "queue" in r.name]
    assert len(waiting) == 1 and "requests waiting for a free route thread" in waiting[0], waiting


def test_an_answer_the_client_does_not_read_closes_the_connection_after_write_s() -> None:
    big = b"x" * (64 << 20)  # far past what the kernel's buffers on both sides can hold
    routes = {("GET", "/big"): lambda _r: Response(200, big)}
    with serving(routes, Limits(write_s=1, header_s=30)) as server:
        conn = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=10)
        with conn:
            conn.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
            time.sleep(3)  # not reading: the server's sends stall, and after write_s it gives up
            received = 0
            with contextlib.suppress(ConnectionError):
                while chunk := conn.recv(1 << 20):
                    received += len(chunk)
        # Closed (recv returned b"" or the connection was reset), not the whole answer then held open.
        assert received < len(big)


def test_a_trickled_body_gets_408_when_its_total_time_is_up() -> None:
    """One body byte every 0.2 s: waitress's inactivity timeout alone would wait for all 5,000."""
    routes = {("POST", "/in"): lambda r: Response.text(200, f"{len(r.body)}\n")}
    with serving(routes, Limits(body_s=1, header_s=5)) as server:
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as conn:
            conn.sendall(b"POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n")
            answer = b""
            with contextlib.suppress(ConnectionError):
                for _ in range(40):
                    conn.sendall(b"a")
                    time.sleep(0.2)
                    conn.setblocking(False)
                    with contextlib.suppress(BlockingIOError):
                        answer += conn.recv(4096)
                    conn.setblocking(True)
                    if answer:
                        break
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"Connection: close" in answer
        assert time.monotonic() - started < 2.5


def test_a_route_that_raises_answers_500_without_its_traceback() -> None:
    def broken(_req: Request) -> Response:
        raise RuntimeError("zq-internal-detail")

    with serving({("GET", "/broken"): broken}, Limits()) as server:
        answer = exchange(
            server.server_address[1], b"GET /broken HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
    assert answer.startswith(b"HTTP/1.1 500"), answer
    assert b"Traceback" not in answer and b"zq-internal-detail" not in answer


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ([], 411),
        (["Transfer-Encoding: chunked"], 411),
        (["Transfer-Encoding: identity"], 411),  # waitress alone: 501
        (["Transfer-Encoding: chunked", "Content-Length: 5"], 400),
        (["Content-Length: 5", "Content-Length: 5"], 200),  # the same length twice is one length
        (["Content-Length: 2000"], 413),  # the path's own limit, before any body byte
    ],
)
def test_framing_is_judged_from_the_headers_before_the_body(headers: list[str], status: int) -> None:
    told: list[tuple[str, int]] = []
    limits = Limits(
        body_limit=lambda path, _h: 1000 if path == "/in" else None,
        on_refusal=lambda path, code: told.append((path, code)),
    )
    routes = {("POST", "/in"): lambda r: Response.text(200, f"{len(r.body)}\n")}
    head = "".join(f"{h}\r\n" for h in ["POST /in HTTP/1.1", "Host: x", "Connection: close", *headers])
    with serving(routes, limits) as server:
        answer = exchange(
            server.server_address[1], head.encode() + b"\r\n" + (b"hello" if status == 200 else b"")
        )
    assert answer.startswith(f"HTTP/1.1 {status}".encode()), answer
    assert told == ([] if status == 200 else [("/in", status)])


def test_a_body_cut_short_by_a_half_close_gets_400() -> None:
    """Content-Length: 5000, ten bytes, then the client shuts its side and waits for the answer."""
    routes = {("POST", "/in"): lambda r: Response.text(200, f"{len(r.body)}\n")}
    with (
        serving(routes, Limits(body_s=5, header_s=5)) as server,
        socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as conn,
    ):
        conn.sendall(b"POST /in HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n0123456789")
        conn.shutdown(socket.SHUT_WR)
        started = time.monotonic()
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert time.monotonic() - started < 1.0


def test_connections_accepted_while_idle_ones_expire_are_answered() -> None:
    """Idle connections closed by their deadline while new ones arrive: every new one is answered.

    The deadlines once ran inside the loop's poll registration; a connection accepted in that
    turn could reuse a just-closed descriptor's number and be closed by the old one's POLLNVAL,
    so its client saw a reset (CI: 1 run in 6 under load). Here idle connections are opened
    throughout, so every look at the deadlines closes some, while three clients ask back to back."""
    routes: Routes = {("GET", "/healthz"): lambda r: Response.text(200, "ok\n")}
    failures: list[BaseException] = []
    answered = [0]
    with serving(routes, Limits(header_s=0.2, body_s=0.2, write_s=0.2)) as server:
        port = server.server_address[1]
        stop = time.monotonic() + 3.0

        def ask() -> None:
            while time.monotonic() < stop and not failures:
                try:
                    healthz(port)
                    answered[0] += 1
                except (AssertionError, OSError) as err:
                    failures.append(err)

        askers = [threading.Thread(target=ask) for _ in range(3)]
        for thread in askers:
            thread.start()
        idle: list[socket.socket] = []
        try:
            while time.monotonic() < stop and not failures:
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
                if len(idle) > 200:  # long closed by the server: the test's descriptors stay few
                    idle.pop(0).close()
                time.sleep(0.002)
        finally:
            for thread in askers:
                thread.join()
            for conn in idle:
                conn.close()
    assert not failures, f"{failures[0]!r} after {answered[0]} answers"
    assert answered[0] > 30
