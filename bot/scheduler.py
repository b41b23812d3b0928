"""The daily digest on a schedule, exactly once per day however many replicas run.

APScheduler 3.x fires a CronTrigger at GPUBOT_DIGEST_TIME in GPUBOT_TIMEZONE
(zoneinfo, so daylight-saving changes move the UTC instant, not the local
time). A replica that was down at that time still runs within the misfire
grace; missed runs coalesce into one.

Why a lock alone is not enough: a replica that fires half a second late finds
the lock already released and posts again. So each run takes the lock, checks
the per-day done key `digest:done:{YYYY-MM-DD}` (the day in GPUBOT_TIMEZONE),
posts, sets the done key (NX, 3 days), and releases. The done key is also what
keeps a restarted replica from posting a second time.

Each run is counted in gpubot_digest_runs_total: posted (or all_clear when no
node was flagged), skipped (another replica or an earlier run did it), failed.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from zoneinfo import ZoneInfo

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from bot import metrics
from bot.chart import digest_chart
from handlers.digest import post_digest
from handlers.ports import LockNotAcquired, PostFailed, SlackPoster, StateStore, StateUnavailable
from layers.digest import Digest
from layers.sources import SourceError, Telemetry

log = logging.getLogger("gpubot.scheduler")

JOB_ID = "daily-digest"
DONE_KEY = "digest:done:{}"
DONE_TTL_S = 3 * 86400
MISFIRE_GRACE_S = 3600
# Longer than a digest takes even with Slack retries; a holder that died frees the lock after it.
LOCK_TIMEOUT_S = 600.0
# A replica waiting on the lock outlasts the holder's timeout, so a dead holder's day is still posted.
LOCK_WAIT_S = LOCK_TIMEOUT_S + 30


class Outcome(StrEnum):
    POSTED = "posted"
    ALREADY_DONE = "already done"
    BUSY = "busy"  # another replica held the lock past the wait
    FAILED = "failed"


def digest_day(at: float, tz: ZoneInfo) -> str:
    """The calendar day (YYYY-MM-DD) of a unix time in the digest's time zone."""
    return datetime.fromtimestamp(at, tz=tz).strftime("%Y-%m-%d")


def digest_trigger(hour: int, minute: int, tz: ZoneInfo) -> CronTrigger:
    return CronTrigger(hour=hour, minute=minute, timezone=tz)


def replica_name() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


def run_digest_once(
    day: str,
    store: StateStore,
    post: Callable[[], object],
    *,
    lock_timeout_s: float = LOCK_TIMEOUT_S,
    wait_s: float = LOCK_WAIT_S,
) -> Outcome:
    """Post the day's digest unless some replica already did. `post` raising leaves the day open."""
    done_key = DONE_KEY.format(day)
    try:
        with store.lock(f"digest:{day}", timeout_s=lock_timeout_s, wait_s=wait_s):
            if store.get(done_key) is not None:
                return Outcome.ALREADY_DONE
            post()
            store.set_if_absent(done_key, {"at": time.time(), "by": replica_name()}, DONE_TTL_S)
            return Outcome.POSTED
    except LockNotAcquired:
        return Outcome.BUSY


@dataclass
class DigestJob:
    """What the scheduler calls each day: collect the digest, post it with its chart, once."""

    collect: Callable[[], tuple[Digest, Telemetry]]
    poster: SlackPoster
    channel: str
    store: StateStore
    tz: ZoneInfo
    retention_s: float = 14 * 86400
    clock: Callable[[], float] = time.time
    lock_timeout_s: float = LOCK_TIMEOUT_S
    wait_s: float = LOCK_WAIT_S

    def post(self, day: str) -> Digest:
        digest, telemetry = self.collect()
        chart = digest_chart(telemetry, digest, day)
        posted = post_digest(
            self.poster,
            self.channel,
            digest,
            day=day,
            chart_png=chart,
            store=self.store,
            retention_s=self.retention_s,
        )
        log.info(
            "digest %s posted to %s (ts %s), %d flagged",
            day,
            posted.ref.channel,
            posted.ref.ts,
            len(digest.flagged),
        )
        return digest

    def __call__(self) -> Outcome:
        day = digest_day(self.clock(), self.tz)
        posted: list[Digest] = []
        try:
            outcome = run_digest_once(
                day,
                self.store,
                lambda: posted.append(self.post(day)),
                lock_timeout_s=self.lock_timeout_s,
                wait_s=self.wait_s,
            )
        except PostFailed as err:
            log.error("digest %s was not posted: %s", day, err.reason)
            outcome = Outcome.FAILED
        except (SourceError, StateUnavailable) as err:
            log.error("digest %s was not posted: %s", day, err)
            outcome = Outcome.FAILED
        except Exception:
            # Counted before APScheduler logs it: a digest that crashes must show on /metrics too.
            metrics.record_digest_run("failed")
            raise
        if outcome not in (Outcome.POSTED, Outcome.FAILED):
            log.info("digest %s: %s (by another replica or an earlier run)", day, outcome.value)
        metrics.record_digest_run(run_label(outcome, posted[0] if posted else None))
        return outcome


def run_label(outcome: Outcome, digest: Digest | None) -> str:
    """The outcome label of gpubot_digest_runs_total for one run."""
    if outcome is Outcome.POSTED:
        return "all_clear" if digest is not None and not digest.flagged else "posted"
    return "failed" if outcome is Outcome.FAILED else "skipped"


def start_scheduler(
    job: Callable[[], object],
    hour: int,
    minute: int,
    tz: ZoneInfo,
    *,
    misfire_grace_s: int = MISFIRE_GRACE_S,
    start: bool = True,
) -> BackgroundScheduler:
    """A background scheduler running `job` daily at hour:minute local time in `tz`."""
    scheduler = BackgroundScheduler(timezone=tz)
    scheduler.add_job(
        job,
        digest_trigger(hour, minute, tz),
        id=JOB_ID,
        name="daily GPU digest",
        coalesce=True,
        max_instances=1,
        misfire_grace_time=misfire_grace_s,
        replace_existing=True,
    )
    if start:
        scheduler.start()
        metrics.record_digest_scheduled()
    return scheduler
