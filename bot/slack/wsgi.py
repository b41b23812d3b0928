"""The bot's routes as one WSGI application, served by waitress (bot/slack/httpserver.py).

A route is a function from a `Request` (method, path, query, headers, the raw
body bytes) to a `Response`. By the time the application runs, the server has
read the whole body within its limits (its framing, size and time checks are
in bot/slack/httpserver.py), so a route never reads a socket. Bolt's WSGI
adapter (`slack_bolt.adapter.wsgi`) reads the environ here; its request handler
is not used whole because it builds Bolt's request, parsing the body, before
anything checks the signature (bot/slack/slackroute.py checks it first).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from slack_bolt.adapter.wsgi.http_request import WsgiHttpRequest

log = logging.getLogger("gpubot.http")

LOG_EVERY_S = 10.0
# Set by the server on every answer of its own; a route's value for these would contradict it.
_SERVER_HEADERS = frozenset({"content-length", "connection", "date", "server", "transfer-encoding"})


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: str
    headers: Mapping[str, str]  # lower-case names; a repeated header's values joined by ", "
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
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


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


def status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"


class RouteTable:
    """The WSGI application: (method, path) → route; 404 for an unknown path, 405 for a known one."""

    def __init__(self, routes: Routes) -> None:
        self.routes = dict(routes)
        self.paths = {path for _, path in self.routes}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = WsgiHttpRequest(environ)
        response = self.answer(request, environ)
        headers: list[tuple[str, str]] = []
        for name, values in response.headers.items():
            if name.lower() not in _SERVER_HEADERS:
                headers.extend((name, v) for v in values)
        if not any(name.lower() == "content-type" for name, _ in headers):
            headers.append(("Content-Type", "text/plain; charset=utf-8"))
        headers.append(("Content-Length", str(len(response.body))))
        start_response(status_line(response.status), headers)
        return [response.body]

    def answer(self, request: WsgiHttpRequest, environ: dict[str, Any]) -> Response:
        route = self.routes.get((request.method, request.path))
        if route is None:
            if request.path in self.paths:
                return Response.text(405, "method not allowed\n")
            return Response.text(404, "not found\n")
        # The server has read exactly Content-Length bytes (bot/slack/httpserver.py refused the rest).
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers = {k: v if isinstance(v, str) else ", ".join(v) for k, v in request.get_headers().items()}
        try:
            return route(Request(request.method, request.path, request.query_string, headers, body))
        except Exception:  # a bug of ours: logged once with its traceback, answered 500 without it
            log.error("%s %s failed", request.method, request.path, exc_info=True)
            return Response.text(500, "internal error\n")
