"""Posting to Slack through slack_sdk's WebClient, with bounded retries.

429 answers are retried after their `Retry-After`, however long, as long as
the wait ends within the call's total deadline (else PostFailed says when to
retry); 5xx answers and connection errors are retried with exponential
backoff; anything else (a bad channel, a missing scope) fails at once. The
same holds for the byte upload of files upload v2, which answers through
urllib (an HTTPError with its own status and headers), not through the Web
API. What still fails becomes PostFailed
with a one-line reason, which callers log with the walk or digest id, and is
counted in gpubot_slack_api_errors_total by Web API method. Every text, block
and file name sent, and every reason, passes bot/ops/secrets.py's masking (the
log's): the token never appears in a message, a reason or a repr.
"""

from __future__ import annotations

import logging
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError, SlackRequestError
from slack_sdk.web import SlackResponse

from bot.ops import metrics
from bot.ops.secrets import mask_text
from handlers.ports import PostFailed, PostRef, SlackPoster

__all__ = ["PostFailed", "Poster"]

T = TypeVar("T")
METADATA_EVENT = "gpubot_post"  # the metadata event type of posts made at most once
log = logging.getLogger("gpubot.slack")


@dataclass(frozen=True)
class _Retry:
    reason: str
    wait_s: float


class Poster:
    """SlackPoster over WebClient(token, base_url=SLACK_API_URL)."""

    def __init__(
        self,
        token: str,
        base_url: str = "https://slack.com/api/",
        *,
        attempts: int = 4,
        backoff_s: float = 0.5,
        max_wait_s: float = 60.0,
        timeout_s: int = 30,
        deadline_s: float = 120.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if deadline_s < 0:
            raise ValueError("deadline_s must not be negative")
        # No built-in retry handlers: this class owns the policy, so it is the same for the
        # three upload steps (the byte upload bypasses WebClient's handlers anyway).
        self._client = WebClient(token=token, base_url=base_url, timeout=timeout_s, retry_handlers=[])
        self.base_url = base_url
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s  # the cap of the exponential backoff, not of a Retry-After
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s  # the total time one call may spend waiting between attempts
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"Poster(base_url={self.base_url!r})"

    @property
    def client(self) -> WebClient:
        return self._client

    def worst_case_s(self, requests: int = 1) -> float:
        """The longest one call can take: every attempt timing out (each of its `requests` HTTP
        requests, 3 for a file upload) plus the waits, which stop at the deadline."""
        return self.attempts * requests * self.timeout_s + self.deadline_s

    # --- SlackPoster -----------------------------------------------------------------

    def post(
        self,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]] | None = None,
        thread_ts: str | None = None,
        *,
        key: str | None = None,
    ) -> PostRef:
        """With `key`, posted at most once: the key rides in the message's metadata, and before a
        retry the channel (or thread) is searched for it, since Slack may have taken a post whose
        answer was lost (a timeout, a 5xx from a proxy after Slack answered)."""
        metadata = {"event_type": METADATA_EVENT, "event_payload": {"key": key}} if key else None
        since = time.time() - 60  # Slack's and our clocks may differ a little
        resp = self._call(
            "chat.postMessage",
            lambda: self._client.chat_postMessage(
                channel=channel,
                text=mask_text(text),
                blocks=_masked(blocks),
                thread_ts=thread_ts,
                unfurl_links=False,
                metadata=metadata,
            ),
            before_retry=(lambda: self._find(channel, thread_ts, key, since)) if key else None,
        )
        return PostRef(channel=str(resp.get("channel") or channel), ts=str(resp.get("ts") or ""))

    def find_posted(self, channel: str, thread_ts: str | None, key: str, since: float) -> PostRef | None:
        """Where the message posted with `key` since `since` landed (None: Slack has none, or cannot
        tell). An agent taking over a dead agent's walk asks before posting (bot/cluster/once.py)."""
        found = self._find(channel, thread_ts, key, since)
        return None if found is None else PostRef(channel, str(found.get("ts") or ""))

    def _find(self, channel: str, thread_ts: str | None, key: str, since: float) -> SlackResponse | None:
        """The message carrying `key` posted since `since`, if Slack has it (None when it cannot tell)."""
        try:
            if thread_ts:
                found = self._client.conversations_replies(
                    channel=channel, ts=thread_ts, oldest=f"{since:.6f}", include_all_metadata=True, limit=200
                )
            else:
                found = self._client.conversations_history(
                    channel=channel, oldest=f"{since:.6f}", include_all_metadata=True, limit=200
                )
        except Exception as err:  # a missing history scope, Slack down: retry the post as before
            log.warning("could not look for an earlier post before retrying: %s", _short(err))
            return None
        for message in found.get("messages") or []:
            payload = (message.get("metadata") or {}).get("event_payload") or {}
            if payload.get("key") == key:
                log.info(
                    "the post was already taken by Slack (ts %s): not posting it again", message.get("ts")
                )
                data = {"ok": True, "channel": channel, "ts": message.get("ts")}
                return SlackResponse(
                    client=self._client,
                    http_verb="POST",
                    api_url="chat.postMessage",
                    req_args={},
                    data=data,
                    headers={},
                    status_code=200,
                )
        return None

    def update(self, ref: PostRef, text: str, blocks: list[dict[str, Any]] | None = None) -> None:
        self._call(
            "chat.update",
            lambda: self._client.chat_update(
                channel=ref.channel, ts=ref.ts, text=mask_text(text), blocks=_masked(blocks)
            ),
        )

    def ephemeral(
        self, channel: str, user: str, text: str, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        self._call(
            "chat.postEphemeral",
            lambda: self._client.chat_postEphemeral(
                channel=channel, user=user, text=mask_text(text), blocks=_masked(blocks)
            ),
        )

    def upload(
        self,
        channel: str,
        filename: str,
        content: bytes | str,
        *,
        thread_ts: str | None = None,
        title: str | None = None,
        comment: str | None = None,
    ) -> None:
        self._call(
            "files.upload_v2",
            lambda: self._client.files_upload_v2(
                channel=channel,
                filename=filename,
                content=mask_text(content) if isinstance(content, str) else content,
                title=mask_text(title or filename),
                thread_ts=thread_ts,
                initial_comment=mask_text(comment) if comment else comment,
            ),
            what=f"file upload of {filename}",
        )

    # --- retries -----------------------------------------------------------------------

    def _call(
        self,
        method: str,
        do: Callable[[], SlackResponse],
        what: str | None = None,
        before_retry: Callable[[], SlackResponse | None] | None = None,
    ) -> SlackResponse:
        """`do` with the retry policy; `method` names the Web API call in the error counter.
        `before_retry` may find that the failed attempt took effect after all: its answer is returned."""
        what = what or method
        last = ""
        waited = 0.0
        for attempt in range(1, self.attempts + 1):
            try:
                return do()
            except Exception as err:  # classified below: retry, or fail now
                retry = self._classify(what, err, attempt)
                if retry is None:
                    metrics.record_slack_api_error(method)
                    raise PostFailed(self._reason(what, err)) from None
                last, wait = retry.reason, retry.wait_s
            if attempt == self.attempts:
                break
            if waited + wait > self.deadline_s:
                # Waiting less than Slack asked would only be refused again: give up and say when.
                metrics.record_slack_api_error(method)
                at = datetime.fromtimestamp(time.time() + wait, tz=UTC).strftime("%H:%M:%S UTC")
                raise PostFailed(
                    f"{what}: {last}; retry after {wait:g}s (at {at}), "
                    f"beyond this call's {self.deadline_s:g}s deadline"
                )
            log.warning("%s: %s; retrying in %.1fs (attempt %d/%d)", what, last, wait, attempt, self.attempts)
            self._sleep(wait)
            waited += wait
            if before_retry is not None and (done := before_retry()) is not None:
                return done
        metrics.record_slack_api_error(method)
        raise PostFailed(f"{what} failed after {self.attempts} attempts: {last}")

    def _backoff(self, attempt: int) -> float:
        return min(self.max_wait_s, self.backoff_s * 2 ** (attempt - 1))

    def _classify(self, what: str, err: Exception, attempt: int) -> _Retry | None:
        if isinstance(err, SlackApiError):
            status = err.response.status_code
            error = err.response.get("error") if isinstance(err.response.data, dict) else None
            return self._by_status(status, err.response.headers, attempt, f"Slack answered {status}", error)
        if isinstance(err, urllib.error.HTTPError):
            # The byte upload of files upload v2 goes through urllib: the URL answered, with a status.
            return self._by_status(err.code, err.headers, attempt, f"the file upload URL answered {err.code}")
        if isinstance(err, SlackRequestError) and "status: 5" in str(err):
            return _Retry("the file upload URL answered a server error", self._backoff(attempt))
        if isinstance(err, (urllib.error.URLError, OSError, TimeoutError)):
            return _Retry(f"cannot reach Slack at {self.base_url}: {_short(err)}", self._backoff(attempt))
        if isinstance(err, ValueError):  # a non-JSON answer from a proxy in front of Slack
            return _Retry(f"unreadable answer from Slack: {_short(err)}", self._backoff(attempt))
        return None

    def _by_status(
        self, status: int, headers: Any, attempt: int, answered: str, error: str | None = None
    ) -> _Retry | None:
        """429 waits its Retry-After, 5xx backs off, any other status (a client error) fails now."""
        if status == 429:
            wait = _retry_after(headers, self._backoff(attempt))
            return _Retry(f"rate limited (429, Retry-After {wait:g}s)", wait)
        if status >= 500:
            return _Retry(f"{answered} ({_short_text(error or 'server error')})", self._backoff(attempt))
        return None

    @staticmethod
    def _reason(what: str, err: Exception) -> str:
        if isinstance(err, SlackApiError):
            error = err.response.get("error") if isinstance(err.response.data, dict) else None
            return f"{what} refused by Slack ({err.response.status_code}): {_short_text(error or 'no error code')}"
        if isinstance(err, urllib.error.HTTPError):
            return f"{what} refused by the file upload URL ({err.code} {_short_text(err.reason)})"
        if isinstance(err, SlackClientError):
            return f"{what} failed: {_short(err)}"
        return f"{what} failed ({type(err).__name__}): {_short(err)}"


def _masked(node: Any) -> Any:
    """Block Kit with every string masked: findings quote cluster text, failures quote Slack's."""
    if isinstance(node, str):
        return mask_text(node)
    if isinstance(node, list):
        return [_masked(v) for v in node]
    if isinstance(node, dict):
        return {k: _masked(v) for k, v in node.items()}
    return node


def _retry_after(headers: Any, default: float) -> float:
    for key in ("Retry-After", "retry-after"):
        raw = headers.get(key) if headers else None
        if isinstance(raw, list):
            raw = raw[0] if raw else None
        if raw is not None:
            try:
                return max(0.0, float(raw))
            except ValueError:
                break
    return default


def _short(err: BaseException) -> str:
    return _short_text(str(err)) if str(err).strip() else type(err).__name__


def _short_text(raw: object) -> str:
    # An error text can echo the request (a proxy's HTML 500 quoting `Authorization: Bearer xoxb-…`).
    return mask_text(" ".join(str(raw).split()))[:300]


if TYPE_CHECKING:  # the Poster satisfies the port
    _p: SlackPoster = Poster("xoxb-0")
