"""Posting to Slack through slack_sdk's WebClient, with bounded retries and Slack's pace.

Retries are slack_sdk's retry handlers (bot/slack/retries.py): 429 answers
wait their `Retry-After`, however long, as long as the wait ends within the
call's total deadline (else PostFailed says when to retry); 5xx answers and
connection errors back off exponentially; anything else (a bad channel, a
missing scope) fails at once. Two cases the handlers cannot see are kept here:

- a post made at most once (`post(..., key=K)`) whose attempt failed in a way
  that Slack may have taken it (a timeout, a reset, a 5xx) is not re-sent
  blindly: with GPUBOT_SLACK_HISTORY the channel or thread is searched for its
  key first (`conversations.history` / `.replies`, the history scopes); without
  it, the post is sent again saying so, since it may repeat the one above;
- the byte upload of files upload v2 answers through urllib (an HTTPError
  with its own status and headers), not through the Web API and its handlers:
  a failed upload is tried again whole.

Posts to one channel go out about one a second, in order (bot/slack/pace.py).
What still fails becomes PostFailed with a one-line reason, which callers log
with the walk or digest id, and is counted in gpubot_slack_api_errors_total by
Web API method. Every text, block and file name sent, and every reason, passes
bot/ops/secrets.py's masking (the log's): the token never appears in a
message, a reason or a repr.
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
from bot.slack.pace import ChannelPacer
from bot.slack.retries import handlers, retry_after
from handlers.ports import Attachment, PostFailed, PostRef, SlackPoster

__all__ = ["PostFailed", "Poster"]

T = TypeVar("T")
METADATA_EVENT = "gpubot_post"  # the metadata event type of posts made at most once
log = logging.getLogger("gpubot.slack")
# Said on a post made at most once, sent again without the history scopes to look for the first.
POSTED_AGAIN = (
    "posted again: Slack's answer to the first attempt was lost, so this may repeat the message above"
)


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
        history: bool = False,
        pace_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`history`: look for a lost post's key before sending it again (GPUBOT_SLACK_HISTORY, the
        history scopes); `pace_s`: the least time between two posts to one channel (the bot runs
        with GPUBOT_SLACK_CHANNEL_PACE_SECONDS, 1 s; 0 posts as fast as callers ask)."""
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        if deadline_s < 0:
            raise ValueError("deadline_s must not be negative")
        policy = (attempts, backoff_s, max_wait_s, deadline_s)
        self._client = WebClient(
            token=token,
            base_url=base_url,
            timeout=timeout_s,
            retry_handlers=handlers(*policy, repeatable=True),
        )
        # Posts made at most once: only a 429 is retried by the SDK (Slack took nothing); the rest
        # is `_call`'s, which looks for the key (or says it posts again) before a retry.
        self._once_client = WebClient(
            token=token,
            base_url=base_url,
            timeout=timeout_s,
            retry_handlers=handlers(*policy, repeatable=False),
        )
        self.base_url = base_url
        self.attempts = attempts
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s  # the cap of the exponential backoff, not of a Retry-After
        self.timeout_s = timeout_s
        self.deadline_s = deadline_s  # the total time one call may spend waiting between attempts
        self.history = history
        self.pace = ChannelPacer(pace_s)
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
        answer was lost (a timeout, a 5xx from a proxy after Slack answered). Without the history
        scopes (GPUBOT_SLACK_HISTORY off) it cannot be searched: the retry says it posts again."""
        metadata = {"event_type": METADATA_EVENT, "event_payload": {"key": key}} if key else None
        since = time.time() - 60  # Slack's and our clocks may differ a little
        again = False  # set once an attempt failed in a way Slack may have taken it

        def send() -> SlackResponse:
            note = again and not self.history
            client = self._once_client if key else self._client
            return client.chat_postMessage(
                channel=channel,
                text=mask_text(f"{text}\n_({POSTED_AGAIN})_" if note else text),
                blocks=_masked(_noted(blocks) if note else blocks),
                thread_ts=thread_ts,
                unfurl_links=False,
                metadata=metadata,
            )

        def before_retry() -> SlackResponse | None:
            nonlocal again
            again = True
            return self._find(channel, thread_ts, key, since) if key and self.history else None

        with self.pace.turn(channel):
            resp = self._call(
                "chat.postMessage",
                send,
                retry=(lambda err, n: _maybe_taken(self, err, n)) if key else None,
                before_retry=before_retry,
            )
        if dropped := self.pace.take_dropped(channel):  # said once, by the next post that went out
            self.post(
                channel,
                f":warning: {dropped} message(s) to this channel were dropped: more than "
                f"{self.pace.max_queued} were waiting for Slack's pace. Ask again for what you miss.",
            )
        return PostRef(channel=str(resp.get("channel") or channel), ts=str(resp.get("ts") or ""))

    def find_posted(self, channel: str, thread_ts: str | None, key: str, since: float) -> PostRef | None:
        """Where the message posted with `key` since `since` landed (None: Slack has none, or cannot
        tell; always None without GPUBOT_SLACK_HISTORY). An agent taking over a dead agent's walk
        asks before posting (bot/cluster/once.py)."""
        if not self.history:
            return None
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

    def upload(self, channel: str, file: Attachment, *, thread_ts: str | None = None) -> None:
        content = file.content
        self._call(
            "files.upload_v2",
            lambda: self._client.files_upload_v2(
                channel=channel,
                filename=file.filename,
                content=mask_text(content) if isinstance(content, str) else content,
                title=mask_text(file.title or file.filename),
                thread_ts=thread_ts,
            ),
            what=f"file upload of {file.filename}",
            retry=self._upload_retry,
        )

    # --- what the SDK's handlers cannot retry ------------------------------------------------

    def _call(
        self,
        method: str,
        do: Callable[[], SlackResponse],
        what: str | None = None,
        retry: Callable[[Exception, int], _Retry | None] | None = None,
        before_retry: Callable[[], SlackResponse | None] | None = None,
    ) -> SlackResponse:
        """`do`, whose client has retried what its handlers retry; `retry` says which of the
        remaining failures are tried again here and after how long (None: none). `before_retry` may
        find that the failed attempt took effect after all: its answer is returned."""
        what = what or method
        last = ""
        waited = 0.0
        for attempt in range(1, self.attempts + 1):
            try:
                return do()
            except Exception as err:  # classified below: retry, or fail now
                again = retry(err, attempt) if retry is not None else None
                if again is None:
                    metrics.record_slack_api_error(method)
                    raise PostFailed(self._failure(what, err)) from None
                last, wait = again.reason, again.wait_s
            if attempt == self.attempts:
                break
            if waited + wait > self.deadline_s:
                metrics.record_slack_api_error(method)
                raise PostFailed(_beyond(what, last, wait, self.deadline_s))
            log.warning("%s: %s; retrying in %.1fs (attempt %d/%d)", what, last, wait, attempt, self.attempts)
            self._sleep(wait)
            waited += wait
            if before_retry is not None and (done := before_retry()) is not None:
                return done
        metrics.record_slack_api_error(method)
        raise PostFailed(f"{what} failed after {self.attempts} attempts: {last}")

    def _backoff(self, attempt: int) -> float:
        return min(self.max_wait_s, self.backoff_s * 2 ** (attempt - 1))

    def _upload_retry(self, err: Exception, attempt: int) -> _Retry | None:
        """The byte upload's failures (urllib, past the SDK's handlers): the upload again, whole."""
        if isinstance(err, urllib.error.HTTPError):
            if err.code == 429:
                wait = retry_after(dict(err.headers.items())) if err.headers else None
                wait = self._backoff(attempt) if wait is None else wait
                return _Retry(f"the file upload URL rate limited it (429, Retry-After {wait:g}s)", wait)
            if err.code >= 500:
                return _Retry(f"the file upload URL answered {err.code}", self._backoff(attempt))
            return None
        if isinstance(err, SlackRequestError) and "status: 5" in str(err):
            return _Retry("the file upload URL answered a server error", self._backoff(attempt))
        if isinstance(err, (urllib.error.URLError, OSError)):
            return _Retry(f"cannot reach the file upload URL: {_short(err)}", self._backoff(attempt))
        return None

    def _failure(self, what: str, err: Exception) -> str:
        """The one-line reason of a call that failed for good (its client's retries spent)."""
        if isinstance(err, SlackApiError):
            status = err.response.status_code
            error = err.response.get("error") if isinstance(err.response.data, dict) else None
            if status == 429:
                wait = retry_after(err.response.headers)
                if wait is not None and wait + 1 > self.deadline_s:
                    # Waiting less than Slack asked would only be refused again: say when.
                    return _beyond(what, f"rate limited (429, Retry-After {wait:g}s)", wait, self.deadline_s)
                return f"{what} failed after {self.attempts} attempts: rate limited (429)"
            if status >= 500:
                answered = _short_text(error or "server error")
                return f"{what} failed after {self.attempts} attempts: Slack answered {status} ({answered})"
        if isinstance(err, (urllib.error.URLError, OSError)) and not isinstance(err, urllib.error.HTTPError):
            # The kinds the connection handler retries (bot/slack/retries.py) were tried `attempts` times.
            retried = isinstance(err, (urllib.error.URLError, ConnectionResetError, TimeoutError))
            tries = f" after {self.attempts} attempts" if retried else ""
            return f"{what} failed{tries}: cannot reach Slack at {self.base_url}: {_short(err)}"
        if isinstance(err, ValueError):  # a non-JSON answer from a proxy in front of Slack
            return f"{what} failed: unreadable answer from Slack: {_short(err)}"
        return self._reason(what, err)

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


def _maybe_taken(poster: Poster, err: Exception, attempt: int) -> _Retry | None:
    """A post made at most once: which failures may be tried again (after the key is looked for).
    A 429 never gets here (the SDK waited it out, or it is past the deadline)."""
    if isinstance(err, SlackApiError) and err.response.status_code >= 500:
        error = err.response.get("error") if isinstance(err.response.data, dict) else None
        answered = f"Slack answered {err.response.status_code} ({_short_text(error or 'server error')})"
        return _Retry(answered, poster._backoff(attempt))
    if isinstance(err, (urllib.error.URLError, OSError, TimeoutError)) and not isinstance(
        err, urllib.error.HTTPError
    ):
        return _Retry(f"cannot reach Slack at {poster.base_url}: {_short(err)}", poster._backoff(attempt))
    if isinstance(err, ValueError):  # a non-JSON answer from a proxy in front of Slack
        return _Retry(f"unreadable answer from Slack: {_short(err)}", poster._backoff(attempt))
    return None


def _beyond(what: str, last: str, wait: float, deadline_s: float) -> str:
    at = datetime.fromtimestamp(time.time() + wait, tz=UTC).strftime("%H:%M:%S UTC")
    return f"{what}: {last}; retry after {wait:g}s (at {at}), beyond this call's {deadline_s:g}s deadline"


def _noted(blocks: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The blocks with a context line saying the post may repeat an earlier one."""
    if blocks is None:
        return None
    note = {"type": "context", "elements": [{"type": "mrkdwn", "text": f"_{POSTED_AGAIN}_"}]}
    return [*blocks, note]


def _masked(node: Any) -> Any:
    """Block Kit with every string masked: findings quote cluster text, failures quote Slack's."""
    if isinstance(node, str):
        return mask_text(node)
    if isinstance(node, list):
        return [_masked(v) for v in node]
    if isinstance(node, dict):
        return {k: _masked(v) for k, v in node.items()}
    return node


def _short(err: BaseException) -> str:
    return _short_text(str(err)) if str(err).strip() else type(err).__name__


def _short_text(raw: object) -> str:
    # An error text can echo the request (a proxy's HTML 500 quoting `Authorization: Bearer xoxb-…`).
    return mask_text(" ".join(str(raw).split()))[:300]


if TYPE_CHECKING:  # the Poster satisfies the port
    _p: SlackPoster = Poster("xoxb-0")
