"""Collect → chart → post → count: the one way a digest reaches Slack.

The daily schedule (bot/slack/scheduler.py), `/gpu digest` (bot/slack/app.py) and
`gpubot digest --post` (bot/cli/digest.py) all call `publish_digest`, so they
cannot drift apart. The chart is a bonus: if drawing it fails the digest posts
without it and its thread says why. A digest that could not be collected or
posted raises DigestFailed with a one-line reason, after counting the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from bot.ops import metrics
from bot.slack.chart import digest_chart
from handlers.digest import Posted, post_digest
from handlers.ports import PostFailed, SlackPoster, StateStore, StateUnavailable
from layers.digest import Digest
from layers.sources import SourceError, Telemetry

log = logging.getLogger("gpubot.digest")

# The Slack calls one digest makes at most: its message, the note on missing attachments and
# the note on a missing chart; and two uploads (the chart, the full list), three requests each.
MESSAGES_PER_DIGEST = 3
UPLOADS_PER_DIGEST = 2
REQUESTS_PER_UPLOAD = 3

Collect = Callable[[], tuple[Digest, Telemetry]]
Chart = Callable[[Telemetry, Digest, str | None], bytes | None]


class DigestFailed(Exception):
    """The digest was not posted; `reason` says why in one line. The run is already counted."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Published:
    digest: Digest
    posted: Posted  # where it landed; `problems` lists what could not be attached (the chart too)

    @property
    def outcome(self) -> str:
        """The gpubot_digest_runs_total label of this run."""
        return "posted" if self.digest.flagged else "all_clear"


def publish_digest(
    collect: Collect,
    poster: SlackPoster,
    channel: str,
    *,
    day: str,
    store: StateStore | None,
    retention_s: float,
    did: str | None = None,
    count_run: bool = True,
    chart: Chart = digest_chart,
    thread_ts: str | None = None,
    cluster: str | None = None,
    key: str | None = None,
) -> Published:
    """Collect the digest, draw its chart, post both; count the run unless `count_run` is False
    (an on-demand `/gpu digest` is not the daily run the staleness alert watches)."""

    def failed(reason: str) -> DigestFailed:
        if count_run:
            metrics.record_digest_run("failed")
        return DigestFailed(reason)

    try:
        digest, telemetry = collect()
    except SourceError as err:
        raise failed(f"the digest needs the node list: {err}") from None
    png, chart_problem = _draw(chart, telemetry, digest, day)
    try:
        posted = post_digest(
            poster,
            channel,
            digest,
            did=did,
            day=day,
            chart_png=png,
            store=store,
            retention_s=retention_s,
            thread_ts=thread_ts,
            cluster=cluster,
            key=key,
        )
    except PostFailed as err:
        raise failed(err.reason) from None
    except StateUnavailable as err:
        raise failed(f"state store: {err}") from None
    if chart_problem is not None:
        posted.problems.append(f"chart: {chart_problem}")
        try:
            poster.post(
                channel,
                f"The chart could not be drawn ({chart_problem}); the digest above is complete without it.",
                thread_ts=thread_ts or posted.ref.ts,
            )
        except PostFailed as err:
            log.error("digest %s: the note about the missing chart failed: %s", day, err.reason)
    published = Published(digest, posted)
    if count_run:
        metrics.record_digest_run(published.outcome)
    return published


def _draw(chart: Chart, telemetry: Telemetry, digest: Digest, day: str) -> tuple[bytes | None, str | None]:
    """(PNG, None), or (None, why): a plotting failure must never cost the day's digest."""
    try:
        return chart(telemetry, digest, day), None
    except Exception as err:
        log.warning("digest %s: the chart could not be drawn: %s", day, err, exc_info=True)
        text = " ".join(str(err).split())[:200]
        return None, f"{type(err).__name__}: {text}" if text else type(err).__name__


def worst_case_post_s(poster: SlackPoster) -> float | None:
    """The longest posting one digest can take with this poster's retries, when it says (bot/slack/post.py)."""
    bound = getattr(poster, "worst_case_s", None)
    if bound is None:
        return None
    return float(
        MESSAGES_PER_DIGEST * bound(1) + UPLOADS_PER_DIGEST * bound(REQUESTS_PER_UPLOAD),
    )
