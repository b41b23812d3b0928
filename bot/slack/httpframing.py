"""How a request's framing is judged, as soon as its headers are in (waitress's parser, extended).

- `Transfer-Encoding` is refused: 411 alone (chunked bodies are not read), 400
  with `Content-Length` (the request-smuggling shape); waitress would read a
  chunked body, and answer 501 to `identity`;
- a missing (411), malformed or disagreeing (400) `Content-Length`, and a body
  over the request's own limit (413, from its path and headers: only
  Alertmanager with its token may send megabytes), are refused before one body
  byte is read;
- every refusal, ours and waitress's (a bad request line, headers past their
  size: 431), is answered by `RefusalTask`: counted, logged once per window,
  short plain text, `Connection: close`, never a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from waitress.adjustments import Adjustments
from waitress.buffers import OverflowableBuffer
from waitress.parser import HTTPRequestParser, ParsingError, TransferEncodingNotImplemented
from waitress.receiver import FixedStreamReceiver
from waitress.task import ErrorTask
from waitress.utilities import Error

from bot.slack.wsgi import status_line


@dataclass(frozen=True)
class Limits:
    """What one connection may cost. The defaults suit Slack (payloads of a few kB, sent at once)."""

    header_s: float = 10.0  # request line and headers, in total; also the keep-alive idle limit
    body_s: float = 10.0  # the body, in total
    write_s: float = 10.0  # sending the answer to a client that does not read
    max_connections: int = 512
    max_body: int = 1 << 20
    max_header_bytes: int = 32 << 10
    # Requests whose application runs at once; the others wait, read whole, in memory or spooled
    # (GET /healthz and /metrics have PROBE_THREADS of their own).
    threads: int = 16
    # A request's own body limit (path, lower-case headers), else `max_body`: Alertmanager's
    # notifications run to megabytes, and only a sender with the alert token may send that much.
    body_limit: Callable[[str, Mapping[str, str]], int | None] | None = None
    # Told (path, status) of each request refused before its route ran: the alert webhook counts them.
    on_refusal: Callable[[str, int], None] | None = None


def body_length(values: Sequence[str] | None, max_body: int) -> tuple[int, tuple[int, str] | None]:
    """The body's length from its Content-Length header(s), or the refusal (status, text).

    Missing: 411; not a non-negative integer, or several that disagree: 400; over
    `max_body`: 413. `int()` alone would accept " +5", and raise on "abc"."""
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


class Refusal(Error):  # type: ignore[misc]
    """A refusal of ours, answered by `RefusalTask` with its own short text."""

    def __init__(self, code: int, text: str, kind: str) -> None:
        super().__init__(text)
        self.code = code
        self.reason = status_line(code).split(" ", 1)[1]
        self.text = text
        self.kind = kind


# waitress's own refusals, by status: what the rate-limited log calls them.
KINDS = {431: "refused requests with oversized headers", 413: "refused bad Content-Length"}


def framing(header_plus: bytes) -> tuple[list[str], list[str]]:
    """The Transfer-Encoding and Content-Length values as sent, each occurrence apart."""
    te: list[str] = []
    cl: list[str] = []
    for line in header_plus.split(b"\r\n")[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        key = name.lower()
        if key in (b"transfer-encoding", b"content-length"):
            (te if key == b"transfer-encoding" else cl).append(value.strip(b" \t").decode("latin-1"))
    return te, cl


class FramedParser(HTTPRequestParser):  # type: ignore[misc]
    """waitress's parser, with the bot's framing rules checked as soon as the headers are in."""

    limits: Limits = Limits()

    def __init__(self, adj: Adjustments) -> None:
        super().__init__(adj)
        self.headers_at = 0.0  # monotonic time the headers were complete: the body's clock starts

    def parse_header(self, header_plus: bytes) -> None:
        te, cl = framing(header_plus)
        try:
            super().parse_header(header_plus)
        except (ParsingError, TransferEncodingNotImplemented):
            # Raised past the request line only by the framing headers, which are judged below.
            if "path" not in self.__dict__ or not (te or cl):
                raise
        self.headers_at = time.monotonic()
        refusal = self._refusal(te, cl)
        if refusal is not None:
            self.error = refusal
            self.body_rcv, self.chunked, self.content_length = None, False, 0  # not one body byte read
            self.connection_close = True
        elif cl:
            # One length, perhaps sent twice ("5, 5" to waitress, which refused it above).
            length = int(cl[0].strip())
            self.headers["CONTENT_LENGTH"] = str(length)
            self.content_length = length
            self.body_rcv = (
                FixedStreamReceiver(length, OverflowableBuffer(self.adj.inbuf_overflow)) if length else None
            )

    def _refusal(self, te: list[str], cl: list[str]) -> Refusal | None:
        if te:
            if cl:
                return Refusal(400, "Transfer-Encoding with Content-Length is refused\n", "refused smuggling")
            return Refusal(411, "length required: chunked bodies are not read\n", "refused chunked bodies")
        if not cl and self.command in ("GET", "HEAD"):
            return None
        max_body = self.limits.max_body
        if self.limits.body_limit is not None:
            headers = {k.lower().replace("_", "-"): v for k, v in self.headers.items()}
            max_body = self.limits.body_limit(self.path, headers) or max_body
        _, refused = body_length(cl, max_body)
        return None if refused is None else Refusal(*refused, "refused bad Content-Length")


class RefusalTask(ErrorTask):  # type: ignore[misc]
    """Every refusal (ours and waitress's): counted, logged once per window, answered short and closed."""

    def execute(self) -> None:
        error = self.request.error
        code = int(error.code)
        text = getattr(error, "text", None) or f"{str(error.reason).lower()}\n"
        server = self.channel.server  # bot/slack/httpserver.py's
        server.refusals.note(getattr(error, "kind", KINDS.get(code, "refused malformed requests")), f"{code}")
        server.tell_refusal(
            self.request.__dict__.get("path"), code
        )  # before the answer: who reads it sees the count
        self.status = status_line(code)
        self.response_headers.append(("Content-Type", "text/plain; charset=utf-8"))
        self.set_close_on_finish()
        body = text.encode()
        self.content_length = len(body)
        self.write(body)
