"""Which failed Web API calls are tried again, and after how long: slack_sdk's own retry handlers.

`handlers(...)` is the list a WebClient runs after each failed attempt
(slack_sdk.http_retry): 429 waits its Retry-After (`RateLimitErrorRetryHandler`),
connection errors and server errors back off exponentially
(`ConnectionErrorRetryHandler`, `ServerErrorRetryHandler`). Each is the SDK's
class; where one misses a case the bot meets, a subclass adds only that case,
and a test in tests/test_slackpost.py shows it:

- a Retry-After that would end past the call's deadline is not waited for (the
  SDK sleeps whatever Slack asks, an hour included, holding a worker): the call
  fails at once and bot/slack/post.py says when to try again;
- 502 and 504 (a proxy or load balancer in front of Slack) are server errors
  too (the SDK retries only 500 and 503);
- a read timeout is a connection error for calls that are safe to repeat (the
  SDK retries only refused and reset connections); a post made at most once is
  never retried blindly (bot/slack/post.py looks first, or says it posted again).

Backoff is the SDK's `BackoffRetryIntervalCalculator` with a jitter in
proportion (the SDK's adds up to a whole second to each wait) and a cap.
"""

from __future__ import annotations

import random
from http.client import RemoteDisconnected
from typing import Any
from urllib.error import URLError

from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.jitter import Jitter

_WAITED = "gpubot_waited_s"  # the Retry-After waits of this call so far (RetryState.custom_values)


def retry_after(headers: Any) -> float | None:
    """The Retry-After header's seconds (a list of values, as slack_sdk keeps them), or None."""
    for key, raw in (headers or {}).items():
        if str(key).lower() != "retry-after":
            continue
        if isinstance(raw, list):
            raw = raw[0] if raw else None
        try:
            return max(0.0, float(raw))
        except (TypeError, ValueError):
            return None
    return None


class _CappedJitter(Jitter):  # type: ignore[misc]
    """Up to half the wait again, never past `cap_s`."""

    def __init__(self, cap_s: float) -> None:
        self.cap_s = cap_s

    def recalculate(self, duration: float) -> float:
        return min(self.cap_s, duration * (1 + random.random() / 2))


class DeadlineRateLimitHandler(RateLimitErrorRetryHandler):  # type: ignore[misc]
    """The SDK's 429 handler, declining a Retry-After the call's deadline cannot wait out."""

    def __init__(self, max_retry_count: int, deadline_s: float) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self.deadline_s = deadline_s

    def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
        if not super()._can_retry(state=state, request=request, response=response, error=error):
            return False
        wait = retry_after(response.headers)
        if wait is None or wait != int(wait):
            return False  # the SDK's handler reads whole seconds only (it would raise on "1.5")
        waited = float((state.custom_values or {}).get(_WAITED, 0.0))
        if waited + wait + 1 > self.deadline_s:  # the SDK adds up to a second of jitter
            return False
        state.custom_values = {**(state.custom_values or {}), _WAITED: waited + wait + 1}
        return True


class AnyServerErrorRetryHandler(ServerErrorRetryHandler):  # type: ignore[misc]
    """The SDK's server-error handler, for every 5xx: a proxy's 502 or 504 is as passing as a 503."""

    def _can_retry(self, *, state: Any, request: Any, response: Any = None, error: Any = None) -> bool:
        return response is not None and response.status_code >= 500


def handlers(
    attempts: int, backoff_s: float, max_wait_s: float, deadline_s: float, *, repeatable: bool
) -> list[RetryHandler]:
    """The retry handlers of a WebClient; `repeatable`: its calls may be sent twice (everything but
    posts made at most once, whose only safe retry is a 429's: Slack took nothing)."""
    retries = attempts - 1
    rate_limit = DeadlineRateLimitHandler(retries, deadline_s)
    if not repeatable:
        return [rate_limit]
    interval = BackoffRetryIntervalCalculator(backoff_factor=backoff_s, jitter=_CappedJitter(max_wait_s))
    connection = ConnectionErrorRetryHandler(
        max_retry_count=retries,
        interval_calculator=interval,
        error_types=[URLError, ConnectionResetError, RemoteDisconnected, TimeoutError],
    )
    return [rate_limit, connection, AnyServerErrorRetryHandler(retries, interval)]
