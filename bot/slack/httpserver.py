"""The bot's HTTP server: every route behind the same limits, in one place.

A route is a function from a `Request` (method, path, query, headers, the raw
body bytes) to a `Response`; `start_server` serves a table of them. Before any
route runs, the server has:

- read the request line and headers within `header_s` in total (a client that
  sends one byte a second is cut off, not waited for) and within
  `max_header_bytes`;
- refused `Transfer-Encoding` (411 alone: chunked bodies are not read; 400 with
  `Content-Length`, the request-smuggling shape), a missing, malformed or
  disagreeing `Content-Length` (411/400) and a body over `max_body` (413);
- read the body within `body_s` in total, and answered 400 when the client
  closed before sending all it announced.

At most `max_connections` connections are served at once (each holds a
thread); past that a connection gets a 503 and is closed at once. When the
process runs out of file descriptors, the accept loop pauses instead of
spinning on a listening socket that stays readable. Refusals are logged once
per `LOG_EVERY_S` with their count, never per request, and never with a
traceback.
"""

from __future__ import annotations

import errno
import io
import logging
import resource
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("gpubot.http")

LOG_EVERY_S = 10.0
# File descriptors kept free of connections: Redis, the Kubernetes and Slack clients, log files.
FD_RESERVE = 64
_FD_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass(frozen=True)
class Limits:
    """What one connection may cost. The defaults suit Slack (payloads of a few kB, sent at once)."""

    header_s: float = 10.0  # request line and headers, in total; also the keep-alive idle limit
    body_s: float = 10.0  # the body, in total
    write_s: float = 10.0  # sending the answer to a client that does not read
    max_connections: int = 512
    max_body: int = 1 << 20
    max_header_bytes: int = 32 << 10
    # A request's own body limit (path, lower-case headers), else `max_body`: Alertmanager's
    # notifications run to megabytes, and only a sender with the alert token may send that much.
    body_limit: Callable[[str, Mapping[str, str]], int | None] | None = None
    # Told (path, status) of each request refused before its route ran: the alert webhook counts them.
    on_refusal: Callable[[str, int], None] | None = None


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes = b""
    headers: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @staticmethod
    def text(status: int, text: str) -> Response:
        return Response(status, text.encode())


Route = Callable[[Request], Response]
Routes = Mapping[tuple[str, str], Route]  # (method, path) -> route


class RateLimitedLog:
    """One log line per `every_s` for a kind of event, saying how many happened since the last."""

    def __init__(
        self, logger: logging.Logger, level: int = logging.WARNING, every_s: float = LOG_EVERY_S
    ) -> None:
        self.logger = logger
        self.level = level
        self.every_s = every_s
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def note(self, kind: str, detail: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._count[kind] = self._count.get(kind, 0) + 1
            if now - self._last.get(kind, -self.every_s) < self.every_s:
                return
            self._last[kind], count = now, self._count.pop(kind)
        # `detail` is ours (a reason), never the client's text: nothing of the request reaches the log.
        self.logger.log(self.level, "%s: %d in the last %.0fs (last: %s)", kind, count, self.every_s, detail)


class _TooLarge(Exception):
    pass


class _DeadlineSocket(io.RawIOBase):
    """The connection's read side with a total deadline and a byte budget for the current phase.

    A per-recv socket timeout alone lets a client trickle a byte every few seconds forever."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = 0.0
        self.budget = 0

    def arm(self, seconds: float, budget: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.budget = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("read deadline passed")
        if self.budget <= 0:
            raise _TooLarge()
        self.sock.settimeout(left)
        view = memoryview(buffer)[: self.budget]
        n = self.sock.recv_into(view)
        self.budget -= n
        return n


def body_length(values: Sequence[str] | None, max_body: int) -> tuple[int, tuple[int, str] | None]:
    """The body's length from its Content-Length header(s), or the refusal (status, text).

    Missing: 411; not a non-negative integer, or several that disagree: 400; over
    `max_body`: 413. `int()` alone would accept "-1" (then read to EOF, holding the
    thread) and " +5", and raise on "abc"."""
    if not values:
        return 0, (411, "length required: send Content-Length\n")
    distinct = {v.strip() for v in values}
    raw = distinct.pop() if len(distinct) == 1 else ""
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        return 0, (400, "bad Content-Length: expected one non-negative integer\n")
    length = int(raw)
    if length > max_body:
        return 0, (413, "payload too large\n")
    return length, None


class _Handler(BaseHTTPRequestHandler):
    routes: Routes
    limits: Limits
    refusals: RateLimitedLog
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else ~40 ms per keep-alive answer
    _raw: _DeadlineSocket

    def setup(self) -> None:
        super().setup()
        self._raw = _DeadlineSocket(self.connection)
        self.rfile = io.BufferedReader(self._raw)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def handle_one_request(self) -> None:
        # Slack's headers are under 2 kB; the budget also covers what the buffer reads ahead.
        self._raw.arm(self.limits.header_s, self.limits.max_header_bytes + io.DEFAULT_BUFFER_SIZE)
        try:
            super().handle_one_request()
        except _TooLarge:
            self.close_connection = True
            self.refusals.note("refused requests with oversized headers", "431")
            self._tell_refusal(431)  # counted before the answer: who reads the answer sees the count
            self._send(431, b"request header fields too large\n")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # http.server's own refusals (a bad request line, too many headers): plain, short, closed.
        self.close_connection = True
        self.refusals.note("refused malformed requests", f"{code} {message or ''}".strip())
        self._send(code, f"{message or 'bad request'}\n".encode())

    def _send(self, status: int, body: bytes, headers: Mapping[str, Sequence[str]] | None = None) -> None:
        self.connection.settimeout(self.limits.write_s)
        self.send_response_only(status)
        self.send_header("Date", self.date_time_string())
        sent_type = False
        for name, values in (headers or {}).items():
            if name.lower() in ("content-length", "connection", "date"):
                continue
            for v in values:
                self.send_header(name, v)
            sent_type = sent_type or name.lower() == "content-type"
        if not sent_type:
            self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, text: str, kind: str) -> None:
        """The body's end is unknown or the request is hostile: answer and close the connection."""
        self.close_connection = True
        self.refusals.note(kind, f"{status} {text.strip()}")
        self._tell_refusal(status)  # counted before the answer: who reads the answer sees the count
        self._send(status, text.encode())

    def _tell_refusal(self, status: int) -> None:
        """`on_refusal` (path, status), when the request line was read far enough to have a path."""
        path = getattr(self, "path", None)
        if self.limits.on_refusal is None or not isinstance(path, str):
            return
        try:
            self.limits.on_refusal(urlsplit(path).path, status)
        except Exception:  # a counter of ours failing must not cost the answer
            log.error("counting a refusal failed", exc_info=True)

    def _read_body(self) -> bytes | None:
        """The body by its Content-Length, within the limits; None when refused (and answered)."""
        te = self.headers.get_all("Transfer-Encoding")
        cl = self.headers.get_all("Content-Length")
        if te:
            if cl:
                self._refuse(400, "Transfer-Encoding with Content-Length is refused\n", "refused smuggling")
            else:
                self._refuse(411, "length required: chunked bodies are not read\n", "refused chunked bodies")
            return None
        if not cl and self.command in ("GET", "HEAD"):
            return b""
        max_body = self.limits.max_body
        if self.limits.body_limit is not None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            max_body = self.limits.body_limit(urlsplit(self.path).path, headers) or max_body
        length, refusal = body_length(cl, max_body)
        if refusal is not None:
            self._refuse(refusal[0], refusal[1], "refused bad Content-Length")
            return None
        self._raw.arm(self.limits.body_s, length)
        try:
            body = self.rfile.read(length) if length else b""
        except TimeoutError:
            self._refuse(408, "the body did not arrive in time\n", "refused slow bodies")
            return None
        if len(body) < length:
            self._refuse(400, "the body is shorter than its Content-Length\n", "refused short bodies")
            return None
        return body

    def _dispatch(self) -> None:
        url = urlsplit(self.path)
        body = self._read_body()
        if body is None:
            return
        route = self.routes.get((self.command, url.path))
        if route is None:
            known = any(path == url.path for _, path in self.routes)
            self._send(405 if known else 404, b"method not allowed\n" if known else b"not found\n")
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            response = route(Request(self.command, url.path, url.query, headers, body))
        except Exception:  # a bug of ours: logged once with its traceback, answered 500
            log.error("%s %s failed", self.command, url.path, exc_info=True)
            response = Response.text(500, "internal error\n")
        self._send(response.status, response.body, response.headers)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _dispatch


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # a burst of commands waits in the backlog instead of being refused

    def __init__(self, address: tuple[str, int], handler: type[_Handler], max_connections: int) -> None:
        super().__init__(address, handler)
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self._refusals: RateLimitedLog = handler.refusals

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return super().get_request()
        except OSError as err:
            if err.errno in _FD_ERRORS:
                # The listening socket stays readable: without a pause the accept loop spins.
                self._refusals.note("could not accept connections", err.strerror or str(err))
                time.sleep(0.05)
            raise

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refusals.note("refused connections past the cap", f"{self.max_connections} in use")
            _busy(request)
            return
        threading.Thread(target=self._serve, args=(request, client_address), daemon=True).start()

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # socketserver prints a raw traceback to stderr; a client that hangs up or stalls is no
        # error of ours, and anything else belongs in the JSON log, not on bare stderr.
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            log.debug("client %s went away: %s", client_address, error)
        else:
            log.error("error serving %s", client_address, exc_info=True)


_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: 5\r\nRetry-After: 1\r\nConnection: close\r\n\r\nbusy\n"
)


def _busy(sock: socket.socket) -> None:
    """Answer 503 without waiting for the client (the accept loop must not block), then close."""
    try:
        sock.setblocking(False)
        sock.send(_BUSY)
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    finally:
        sock.close()


def connection_cap(wanted: int) -> int:
    """`wanted`, or fewer when the open-files limit would run out first (raised to its hard cap)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - FD_RESERVE))


def start_server(routes: Routes, host: str, port: int, limits: Limits | None = None) -> HttpServer:
    """Serve `routes` on a background thread; the server's `shutdown()` stops it."""
    limits = limits or Limits()
    handler = type(
        "Handler",
        (_Handler,),
        {"routes": dict(routes), "limits": limits, "refusals": RateLimitedLog(log)},
    )
    server = HttpServer((host, port), handler, connection_cap(limits.max_connections))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    return server
