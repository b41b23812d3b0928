"""The bot's HTTP server: waitress serving bot/slack/wsgi.py's routes, every one behind the same limits.

waitress reads requests on one event-loop thread and runs the application on a
bounded pool (`Limits.threads`), so a slow client costs a socket, never a
thread. What waitress does not do the way the bot needs, this module adds
through its documented extension points (the channel, parser and error-task
classes of its server):

- the request line and headers must arrive within `header_s` *in total* from
  the connection's accept or its last answer (waitress's `channel_timeout` is
  an inactivity timeout, which a client sending one byte a second never hits);
  past it the connection is closed. This is also the keep-alive idle limit;
- framing and size are judged from the headers, before one body byte is read
  (bot/slack/httpframing.py: no `Transfer-Encoding`, one `Content-Length`, each
  path's own body limit);
- the body must arrive within `body_s` in total, else 408, and whole: a client
  that half-closes mid-body gets 400; either way the connection then closes;
- an answer the client does not read for `write_s` closes the connection;
- at most `max_connections` connections at once: past that a connection gets a
  503 and is closed at once (waitress's `connection_limit` would leave it
  waiting in the backlog);
- out of file descriptors, the accept loop pauses instead of spinning, and logs
  once per window instead of a traceback per attempt;
- GET /healthz and /metrics have a pool of their own, so liveness and scrapes
  never queue behind routes waiting on Redis or Slack.

Refusals are logged once per `LOG_EVERY_S` with their count, never per
request and never with a traceback (`expose_tracebacks` is off: a client
never sees one either), and answered in plain short text with `Connection: close`.
"""

from __future__ import annotations

import errno
import logging
import resource
import socket
import threading
import time
from typing import Any

from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher

from bot.slack.httpframing import FramedParser, Limits, Refusal, RefusalTask, body_length
from bot.slack.wsgi import (
    LOG_EVERY_S,
    RateLimitedLog,
    Request,
    Response,
    Route,
    Routes,
    RouteTable,
)

__all__ = [
    "LOG_EVERY_S",
    "HttpServer",
    "Limits",
    "RateLimitedLog",
    "Request",
    "Response",
    "Route",
    "Routes",
    "body_length",
    "connection_cap",
    "start_server",
]

log = logging.getLogger("gpubot.http")

# File descriptors kept free of connections: Redis, the Kubernetes and Slack clients, log files.
FD_RESERVE = 64
_FD_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
# Answered by their own small pool: a liveness probe or a scrape never waits behind routes that
# wait on Redis or Slack (with one thread per connection, as before waitress, they never did).
PROBE_ROUTES = frozenset({("GET", "/healthz"), ("GET", "/metrics")})
PROBE_THREADS = 2
GUARD_EVERY_S = 0.2  # how often deadlines are looked at: the loop's longest sleep
ACCEPT_PAUSE_S = 0.05  # out of descriptors: how long the listening socket is left alone


class _GuardedChannel(HTTPChannel):  # type: ignore[misc]
    """A connection whose read phases run on total deadlines (`_Server.guard`)."""

    error_task_class = RefusalTask

    def __init__(
        self, server: _Server, sock: socket.socket, addr: Any, adj: Adjustments, map: Any = None
    ) -> None:
        super().__init__(server, sock, addr, adj, map=map)
        self.waiting_since = time.monotonic()  # the headers' clock: since accept, or the last answer

    def service(self) -> None:
        super().service()
        self.waiting_since = time.monotonic()

    def handle_read(self) -> None:
        request = self.request
        if request is None or not request.headers_finished or request.completed or self.requests:
            super().handle_read()
            return
        # Mid-body, an end of stream is a client that half-closed and waits for an answer
        # (waitress would close without one).
        try:
            data = self.socket.recv(self.adj.recv_bytes)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.handle_close()
            return
        if not data:
            short = Refusal(400, "the body is shorter than its Content-Length\n", "refused short bodies")
            self.server.refuse_body(self, request, short)
            return
        self.last_activity = time.time()
        self.received(data)


class _QueueNote:
    """waitress's queue logger, which warns on every request queued behind busy workers: here
    one line per window with the count, as for refusals."""

    def __init__(self, refusals: RateLimitedLog, pool: str) -> None:
        self.refusals = refusals
        self.pool = pool

    def warning(self, _fmt: str, depth: int) -> None:
        self.refusals.note(f"requests waiting for a free {self.pool} thread", f"{depth} queued")


def _pool(threads: int, note: _QueueNote) -> ThreadedTaskDispatcher:
    pool = ThreadedTaskDispatcher()
    pool.queue_logger = note
    pool.set_thread_count(threads)
    return pool


class _Server(TcpWSGIServer):  # type: ignore[misc]
    """waitress's TCP server with the connection cap, the deadlines and a pausing accept."""

    channel_class = _GuardedChannel

    def __init__(self, app: Any, limits: Limits, max_connections: int, adj: Adjustments) -> None:
        self.limits = limits
        self.max_connections = max_connections
        self.refusals = RateLimitedLog(log)
        self._paused_until = 0.0
        self._next_guard = 0.0
        self.probes = _pool(PROBE_THREADS, _QueueNote(self.refusals, "probe"))
        routes = _pool(limits.threads, _QueueNote(self.refusals, "route"))
        super().__init__(app, adj=adj, dispatcher=routes)

    def add_task(self, channel: _GuardedChannel) -> None:
        """The channel's next request to its pool: probes to theirs, the rest to waitress's."""
        request = channel.requests[0] if channel.requests else None
        if request is not None and not request.error and (request.command, request.path) in PROBE_ROUTES:
            self.probes.add_task(channel)
        else:
            self.task_dispatcher.add_task(channel)

    def readable(self) -> bool:
        return bool(self.accepting) and time.monotonic() >= self._paused_until

    def guard_if_due(self) -> None:
        """The deadlines, at most every GUARD_EVERY_S; they replace waitress's own maintenance
        (its inactivity timeout is laxer). Called between turns of the loop, never from
        `readable()` as waitress's is: that runs while poll() registers descriptors, and a
        channel closed there leaves its descriptor registered; a connection accepted in the same
        turn gets that number back, and the closed one's POLLNVAL then closes the new one."""
        now = time.monotonic()
        if now >= self._next_guard:
            self._next_guard = now + GUARD_EVERY_S
            self.guard(now)

    def guard(self, now: float) -> None:
        limits = self.limits
        for channel in list(self.active_channels.values()):
            if channel.requests:  # being answered: the route's time is not the client's
                continue
            if channel.total_outbufs_len:
                if time.time() - channel.last_activity > limits.write_s:
                    channel.handle_close()  # the client does not read its answer
                continue
            request = channel.request
            if request is not None and request.headers_finished and not request.completed:
                if now - request.headers_at > limits.body_s:
                    late = Refusal(408, "the body did not arrive in time\n", "refused slow bodies")
                    self.refuse_body(channel, request, late)
            elif now - channel.waiting_since > limits.header_s and not _unread(channel.socket):
                # Headers trickled, or idle: no answer owed. Bytes waiting in the kernel are the
                # loop running behind on a loaded host, not a slow client: they are read first.
                channel.handle_close()

    def refuse_body(self, channel: _GuardedChannel, request: FramedParser, refusal: Refusal) -> None:
        """Answer a request whose body will not arrive whole, as if it were complete: then close."""
        with channel.requests_lock:
            request.error = refusal
            request.completed = True
            request.connection_close = True
            channel.request = None
            channel.requests.append(request)
            self.add_task(channel)

    def handle_accept(self) -> None:
        try:
            conn, addr = self.socket.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        except OSError as err:
            if err.errno in _FD_ERRORS:
                # The listening socket stays readable: without a pause the accept loop spins.
                self.refusals.note("could not accept connections", err.strerror or str(err))
                self._paused_until = time.monotonic() + ACCEPT_PAUSE_S
            else:
                log.debug("accept failed: %s", err)
            return
        if len(self.active_channels) >= self.max_connections:
            self.refusals.note("refused connections past the cap", f"{self.max_connections} in use")
            _busy(conn)
            return
        try:
            self.set_socket_options(conn)
        except OSError:  # the client hung up before it was served
            conn.close()
            return
        self.channel_class(self, conn, addr, self.adj, map=self._map)

    def tell_refusal(self, path: Any, status: int) -> None:
        """`on_refusal` (path, status), when the request line was read far enough to have a path."""
        if self.limits.on_refusal is None or not isinstance(path, str):
            return
        try:
            self.limits.on_refusal(path, status)
        except Exception:  # a counter of ours failing must not cost the answer
            log.error("counting a refusal failed", exc_info=True)


class HttpServer:
    """The running server: its address, `shutdown()` (stop serving) and `server_close()` (release)."""

    def __init__(self, server: _Server) -> None:
        self._server = server
        sockname = server.socket.getsockname()
        self.server_address: tuple[str, int] = (sockname[0], int(sockname[1]))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpubot-http", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        # One turn at a time so `shutdown` is seen within GUARD_EVERY_S; poll(), not select(), so
        # descriptors past 1024 still work.
        while not self._stop.is_set():
            self._server.guard_if_due()
            wasyncore.loop(timeout=GUARD_EVERY_S, map=self._server._map, use_poll=True, count=1)

    def shutdown(self) -> None:
        self._stop.set()
        self._server.pull_trigger()
        self._thread.join(timeout=5)

    def server_close(self) -> None:
        self._server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)
        self._server.probes.shutdown(cancel_pending=True, timeout=5)
        wasyncore.close_all(self._server._map)


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


def _unread(sock: socket.socket) -> bool:
    """Whether the client's bytes wait in the kernel, not yet read by the loop."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return False  # reset or closed: the close goes ahead


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
    cap = connection_cap(limits.max_connections)
    adj = Adjustments(
        host=host,
        port=port,
        threads=limits.threads,
        backlog=128,  # a burst of commands waits in the backlog instead of being refused
        connection_limit=cap + 16,  # never reached: `_Server.handle_accept` answers 503 at `cap`
        channel_timeout=int(max(limits.header_s, limits.body_s, limits.write_s)) + 1,
        max_request_header_size=limits.max_header_bytes,
        max_request_body_size=1 << 62,  # each request's own limit is the parser's (`FramedParser`)
        expose_tracebacks=False,
        log_socket_errors=False,  # a client hanging up is no error of ours
        ident="gpubot",
        clear_untrusted_proxy_headers=False,
    )
    parser = type("Parser", (FramedParser,), {"limits": limits})
    channel = type("Channel", (_GuardedChannel,), {"parser_class": parser})
    server_class = type("Server", (_Server,), {"channel_class": channel})
    return HttpServer(server_class(RouteTable(routes), limits, cap, adj))
