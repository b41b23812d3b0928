"""The Poster against the fake Slack Web API: real slack_sdk code paths over HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from bot.slack.post import Poster, PostFailed
from handlers.ports import Attachment, PostRef
from tests.fakes.slack_api import FakeSlack, serve_slack

TOKEN = "xoxb-0000-test-token"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def poster(fake: FakeSlack, **kw: float) -> Poster:
    return Poster(TOKEN, fake.url, backoff_s=kw.pop("backoff_s", 0.01), **kw)  # type: ignore[arg-type]


def test_post_returns_where_the_message_landed_and_blocks_arrive(slack: FakeSlack) -> None:
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "hello"}}]
    ref = poster(slack).post("C0DIGEST", "fallback", blocks)
    [call] = slack.calls_to("chat.postMessage")
    assert ref.channel == "C0DIGEST" and ref.ts
    assert call.params["channel"] == "C0DIGEST" and call.params["text"] == "fallback"
    sent = call.params["blocks"]
    assert (json.loads(sent) if isinstance(sent, str) else sent) == blocks
    # The token travels only in the Authorization header, which the fake never records.
    assert TOKEN not in json.dumps([c.headers for c in slack.calls]) + repr(poster(slack))


def test_429_retry_after_is_honoured_then_succeeds(slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 429, times=1, retry_after=1)
    started = time.monotonic()
    ref = poster(slack).post("C0DIGEST", "hi")
    calls = slack.calls_to("chat.postMessage")
    assert len(calls) == 2 and ref.ts
    assert calls[1].at - calls[0].at >= 0.95  # waited the Retry-After, not the 10 ms backoff
    assert time.monotonic() - started < 5


def test_500s_are_retried_then_raise_post_failed_with_the_reason(slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 500, times=10)
    with pytest.raises(PostFailed) as err:
        poster(slack, attempts=3).post("C0DIGEST", "hi")
    assert len(slack.calls_to("chat.postMessage")) == 3
    assert "after 3 attempts" in err.value.reason and "500" in err.value.reason
    assert TOKEN not in err.value.reason


def test_transient_500_then_success(slack: FakeSlack) -> None:
    slack.fail("chat.update", 500, times=2)
    poster(slack, attempts=3).update(PostRef("C0DIGEST", "1.2"), "edited")
    assert len(slack.calls_to("chat.update")) == 3


def test_a_refusal_is_not_retried(slack: FakeSlack) -> None:
    # An unknown method answers ok=false with 200, as Slack does for channel_not_found.
    with pytest.raises(PostFailed, match="unknown_method"):
        poster(slack)._call("bogus.method", lambda: poster(slack).client.api_call("bogus.method"))
    assert len(slack.calls_to("bogus.method")) == 1


def test_slack_unreachable_is_post_failed_naming_the_url() -> None:
    with serve_slack() as fake:
        url = fake.url
    with pytest.raises(PostFailed, match="cannot reach Slack"):
        Poster(TOKEN, url, attempts=2, backoff_s=0.01).post("C0DIGEST", "hi")


def test_upload_v2_flow_hits_the_three_steps_with_the_local_url(slack: FakeSlack) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10
    poster(slack).upload("C0DIGEST", Attachment("digest.png", png, "chart"), thread_ts="1795000001.000100")
    methods = [c.method for c in slack.calls]
    assert methods == ["files.getUploadURLExternal", "upload", "files.completeUploadExternal"]
    get_url, upload, complete = slack.calls
    assert get_url.params["filename"] == "digest.png" and int(get_url.params["length"]) == len(png)
    assert upload.body == png  # the bytes went to the fake's own absolute upload URL
    assert complete.params["channel_id"] == "C0DIGEST"
    assert complete.params["thread_ts"] == "1795000001.000100"
    [f] = json.loads(complete.params["files"])
    assert f["id"] == upload.params["file_id"] and f["title"] == "chart"


def test_upload_step_failure_is_retried(slack: FakeSlack) -> None:
    slack.fail("upload", 500, times=1)
    poster(slack).upload("C0DIGEST", Attachment("full.txt", "every flagged node\n"))
    assert [c.method for c in slack.calls].count("files.completeUploadExternal") == 1
    assert len(slack.calls_to("upload")) == 2


def test_a_retry_after_above_the_backoff_cap_is_waited_in_full(slack: FakeSlack) -> None:
    # The backoff cap (0.2 s here) must not shorten what Slack asked for: a shorter wait is refused again.
    slack.fail("chat.postMessage", 429, times=1, retry_after=1)
    poster(slack, max_wait_s=0.2).post("C0DIGEST", "hi")
    first, second = slack.calls_to("chat.postMessage")
    assert second.at - first.at >= 0.95


def test_a_retry_after_beyond_the_deadline_fails_at_once_saying_when(slack: FakeSlack) -> None:
    slack.fail("chat.postMessage", 429, times=1, retry_after=90)
    started = time.monotonic()
    with pytest.raises(PostFailed) as err:
        poster(slack, deadline_s=5).post("C0DIGEST", "hi")
    assert time.monotonic() - started < 3
    assert len(slack.calls_to("chat.postMessage")) == 1
    assert "retry after 90s" in err.value.reason and "UTC" in err.value.reason
    assert "5s deadline" in err.value.reason


def test_upload_url_429_honours_its_retry_after(slack: FakeSlack) -> None:
    slack.fail("upload", 429, times=1, retry_after=1)
    poster(slack).upload("C0DIGEST", Attachment("chart.png", b"\x89PNG\r\n\x1a\n"))
    first, second = slack.calls_to("upload")
    assert second.at - first.at >= 0.95  # not the 10 ms backoff of "cannot reach Slack"
    assert len(slack.calls_to("files.completeUploadExternal")) == 1


def test_upload_url_client_error_fails_at_once(slack: FakeSlack) -> None:
    slack.fail("upload", 403, times=10)
    with pytest.raises(PostFailed) as err:
        poster(slack).upload("C0DIGEST", Attachment("chart.png", b"png"))
    assert len(slack.calls_to("upload")) == 1
    assert "403" in err.value.reason and "cannot reach" not in err.value.reason
    assert slack.calls_to("files.completeUploadExternal") == []


def test_worst_case_counts_every_attempt_of_every_request_and_the_waits() -> None:
    p = Poster(TOKEN, attempts=3, timeout_s=10, deadline_s=40)
    assert p.worst_case_s() == 3 * 10 + 40
    assert p.worst_case_s(3) == 3 * 3 * 10 + 40


# --- slack_sdk's retry handlers (bot/slack/retries.py), and the cases they miss ------------------


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_server_error_of_slack_or_its_proxy_is_retried(slack: FakeSlack, status: int) -> None:
    """The SDK's ServerErrorRetryHandler retries 500 and 503 only; a load balancer's 502 or 504 too."""
    slack.fail("chat.update", status, times=2)
    poster(slack, attempts=3).update(PostRef("C0DIGEST", "1.2"), "edited")
    assert len(slack.calls_to("chat.update")) == 3


def test_a_reset_connection_is_retried(slack: FakeSlack) -> None:
    slack.reset_connections("chat.postEphemeral", times=2)
    poster(slack, attempts=3).ephemeral("C0DIGEST", "U0ASKER", "only you")
    assert len(slack.calls_to("chat.postEphemeral")) == 3


def test_an_update_whose_answer_times_out_is_retried(slack: FakeSlack) -> None:
    """A read timeout (the SDK's ConnectionErrorRetryHandler alone gives up on it): an update is
    safe to send twice."""
    slack.lose_answers("chat.update", seconds=2.0, times=1)
    poster(slack, timeout_s=1).update(PostRef("C0DIGEST", "1.2"), "edited")
    assert len(slack.calls_to("chat.update")) == 2


def test_a_429_on_a_post_made_once_is_waited_out_without_a_lookup(slack: FakeSlack) -> None:
    """A 429 means Slack took nothing: the SDK's handler waits and sends again, no history read."""
    slack.fail("chat.postMessage", 429, times=1, retry_after=1)
    ref = Poster(TOKEN, slack.url, backoff_s=0.01, history=True).post("C0DIGEST", "root", key="w-429:root")
    first, second = slack.calls_to("chat.postMessage")
    assert second.at - first.at >= 0.95 and ref.ts
    assert slack.calls_to("conversations.history") == []
    assert len(slack.messages["C0DIGEST"]) == 1


def test_a_post_made_once_is_not_resent_by_the_sdk_behind_the_lookup(slack: FakeSlack) -> None:
    """A 500 on a keyed post: each retry is preceded by the lookup (the SDK's server-error handler
    would send it again blindly, and a proxy's 500 may follow Slack's taking it)."""
    slack.fail("chat.postMessage", 500, times=2)
    Poster(TOKEN, slack.url, backoff_s=0.01, attempts=3, history=True).post(
        "C0DIGEST", "root", key="w-500:root"
    )
    assert len(slack.calls_to("chat.postMessage")) == 3
    assert len(slack.calls_to("conversations.history")) == 2


def test_the_web_client_runs_the_sdks_own_handlers() -> None:
    from slack_sdk.http_retry.builtin_handlers import (
        ConnectionErrorRetryHandler,
        RateLimitErrorRetryHandler,
        ServerErrorRetryHandler,
    )

    kinds = (RateLimitErrorRetryHandler, ConnectionErrorRetryHandler, ServerErrorRetryHandler)
    handlers = Poster(TOKEN, attempts=4).client.retry_handlers
    assert [next(k for k in kinds if isinstance(h, k)) for h in handlers] == list(kinds)
    assert all(h.max_retry_count == 3 for h in handlers)
