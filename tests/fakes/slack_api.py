"""A fake Slack Web API for tests: the real slack_sdk WebClient talks to it over HTTP.

Point `WebClient(base_url=fake.url)` (or SLACK_API_URL) at it. It records every
call (method, parameters from the query string, form or JSON body, headers
without the token), answers the methods the bot and Bolt use, and serves the
files upload v2 flow with an absolute upload URL on itself. Failures are
injected per method: `fail("chat.postMessage", 429, times=1, retry_after=1)`.
The upload POST itself is the method "upload". Binds 127.0.0.1 only.
"""

from __future__ import annotations

import itertools
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

HIDDEN_HEADERS = {"authorization", "cookie"}


@dataclass(frozen=True)
class Call:
    method: str
    params: dict[str, Any]
    headers: dict[str, str]
    body: bytes = b""
    at: float = 0.0  # time.monotonic() when it arrived


@dataclass
class _Fault:
    status: int
    times: int
    retry_after: float | None = None
    delay: float = 0.0
    body: dict[str, Any] | str | None = None  # what to answer instead of Slack's own error


@dataclass
class FakeSlack:
    """The server's state; `url` is the WebClient base_url (ending in /api/)."""

    url: str = ""
    calls: list[Call] = field(default_factory=list)
    usergroups: dict[str, list[str]] = field(default_factory=dict)  # group id -> user ids
    socket_url: str = "ws://127.0.0.1:9/socket"
    bot_user_id: str = "U0GPUBOT"
    _faults: dict[str, list[_Fault]] = field(default_factory=dict)
    _delays: dict[str, float] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ts: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    _files: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    uploads: dict[str, bytes] = field(default_factory=dict)  # file id -> bytes received
    # What chat.postMessage took, per channel, in order: conversations.history / .replies read it.
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    _lost: dict[str, list[float]] = field(default_factory=dict)
    _resets: dict[str, int] = field(default_factory=dict)

    def calls_to(self, method: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.method == method]

    def fail(
        self,
        method: str,
        status: int,
        times: int = 1,
        retry_after: float | None = None,
        body: dict[str, Any] | str | None = None,
    ) -> None:
        """The next `times` calls of `method` answer `status` (429 carries Retry-After when given);
        `body` replaces the answer (a proxy's HTML page, a JSON error of Slack's shape)."""
        with self._lock:
            self._faults.setdefault(method, []).append(_Fault(status, times, retry_after, body=body))

    def lose_answers(self, method: str, seconds: float, times: int = 1) -> None:
        """The next `times` calls of `method` take effect, then answer only after `seconds`: a client
        with a shorter timeout never hears that Slack took them (the duplicate-post hazard)."""
        with self._lock:
            self._lost.setdefault(method, []).extend([seconds] * times)

    def reset_connections(self, method: str, times: int = 1) -> None:
        """The next `times` calls of `method` are read, not taken, and answered with a TCP reset."""
        with self._lock:
            self._resets[method] = self._resets.get(method, 0) + times

    def slow(self, method: str, seconds: float) -> None:
        """Every call of `method` waits this long before answering."""
        with self._lock:
            self._delays[method] = seconds

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self._faults.clear()
            self._delays.clear()
            self._lost.clear()
            self._resets.clear()
            self.uploads.clear()
            self.messages.clear()

    # --- used by the handler -------------------------------------------------------

    def _record(self, call: Call) -> tuple[_Fault | None, float]:
        with self._lock:
            self.calls.append(call)
            delay = self._delays.get(call.method, 0.0)
            queue = self._faults.get(call.method) or []
            if not queue:
                return None, delay
            fault = queue[0]
            fault.times -= 1
            if fault.times <= 0:
                queue.pop(0)
            return fault, delay

    def _history(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        """Newest first (history) or parent first (replies), after `oldest`; metadata only when asked."""
        channel = str(p.get("channel", ""))
        with self._lock:
            known = [dict(m) for m in self.messages.get(channel, [])]
        if method == "conversations.history":
            found = [m for m in reversed(known) if "thread_ts" not in m]
        else:
            parent = str(p.get("ts", ""))
            found = [m for m in known if m["ts"] == parent or m.get("thread_ts") == parent]
        oldest = float(p.get("oldest") or 0)
        found = [m for m in found if float(m["ts"]) > oldest][: int(p.get("limit") or 100)]
        if str(p.get("include_all_metadata", "")).lower() not in ("true", "1"):
            for m in found:
                m.pop("metadata", None)
        return {"ok": True, "messages": found, "has_more": False}

    def answer(self, method: str, p: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://fake.slack.test/",
                "team": "Fake",
                "user": "gpubot",
                "team_id": "T0FAKE",
                "user_id": self.bot_user_id,
                "bot_id": "B0FAKE",
            }
        if method == "chat.postMessage":
            # Real Slack's ts are times: conversations.history's `oldest` compares against them.
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            channel = str(p.get("channel", ""))
            message: dict[str, Any] = {
                "type": "message",
                "text": p.get("text"),
                "ts": ts,
                "user": self.bot_user_id,
            }
            if p.get("thread_ts"):
                message["thread_ts"] = p["thread_ts"]
            if p.get("blocks"):
                message["blocks"] = json.loads(p["blocks"]) if isinstance(p["blocks"], str) else p["blocks"]
            raw = p.get("metadata")
            if raw:
                message["metadata"] = json.loads(raw) if isinstance(raw, str) else raw
            with self._lock:
                self.messages.setdefault(channel, []).append(message)
            return {"ok": True, "channel": channel, "ts": ts, "message": message}
        if method in ("conversations.history", "conversations.replies"):
            return self._history(method, p)
        if method == "chat.update":
            return {"ok": True, "channel": p.get("channel"), "ts": p.get("ts"), "text": p.get("text")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"{1_795_000_000 + next(self._ts)}.000200"}
        if method == "views.open":
            return {"ok": True, "view": {"id": "V0FAKE", "type": "modal"}}
        if method == "usergroups.users.list":
            group = str(p.get("usergroup", ""))
            if group not in self.usergroups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": list(self.usergroups[group])}
        if method == "apps.connections.open":
            return {"ok": True, "url": self.socket_url}
        if method == "files.getUploadURLExternal":
            file_id = f"F{next(self._files):08d}"
            base = self.url.removesuffix("/api/")
            return {"ok": True, "upload_url": f"{base}/upload/v1/{file_id}", "file_id": file_id}
        if method == "files.completeUploadExternal":
            raw = p.get("files") or "[]"
            files = json.loads(raw) if isinstance(raw, str) else raw
            missing = [f["id"] for f in files if f.get("id") not in self.uploads]
            if missing:
                return {"ok": False, "error": "file_not_found", "missing": missing}
            out = [{"id": f["id"], "title": f.get("title"), "name": f.get("title")} for f in files]
            return {"ok": True, "files": out}
        return {"ok": False, "error": "unknown_method"}


class _Handler(BaseHTTPRequestHandler):
    fake: FakeSlack
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else ~44 ms per keep-alive request

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(
        self, status: int, payload: dict[str, Any] | str, headers: dict[str, str] | None = None
    ) -> None:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        ctype = "text/plain" if isinstance(payload, str) else "application/json; charset=utf-8"
        headers = dict(headers or {})
        self.send_header("Content-Type", headers.pop("Content-Type", ctype))
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HIDDEN_HEADERS}
        if url.path.startswith("/upload/v1/"):
            file_id = url.path.rsplit("/", 1)[-1]
            call = Call("upload", {"file_id": file_id, "length": len(body)}, headers, body, time.monotonic())
        elif url.path.startswith("/api/"):
            params: dict[str, Any] = dict(parse_qsl(url.query))
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if ctype == "application/json" and body:
                params.update(json.loads(body))
            elif body:
                params.update(parse_qsl(body.decode(), keep_blank_values=True))
            call = Call(url.path.removeprefix("/api/"), params, headers, body, time.monotonic())
        else:
            self._send(404, {"ok": False, "error": "not_found"})
            return
        fault, delay = self.fake._record(call)
        with self.fake._lock:
            lost = self.fake._lost.get(call.method)
            late = lost.pop(0) if lost else 0.0
            reset = self.fake._resets.get(call.method, 0)
            if reset:
                self.fake._resets[call.method] = reset - 1
        if reset:
            # SO_LINGER 0: close() sends RST, not FIN. The client's read fails with a reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if late:
            answer = self.fake.answer(call.method, call.params)  # taken now, told much later
            time.sleep(late)
            self._send(200, answer)
            return
        if delay:
            time.sleep(delay)
        if fault is not None:
            extra = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
            error = "ratelimited" if fault.status == 429 else "internal_error"
            if isinstance(fault.body, str):
                extra["Content-Type"] = "text/html"
            self._send(fault.status, fault.body or {"ok": False, "error": error}, extra)
            return
        if call.method == "upload":
            with self.fake._lock:
                self.fake.uploads[call.params["file_id"]] = body
            self._send(200, f"OK - {len(body)}")
            return
        self._send(200, self.fake.answer(call.method, call.params))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up mid-answer


@contextmanager
def serve_slack() -> Iterator[FakeSlack]:
    """Run the fake on 127.0.0.1 and a free port for the block's duration."""
    fake = FakeSlack()
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = _Server(("127.0.0.1", 0), handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/api/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
