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

The day is the day of the run's scheduled fire time, not of the wall clock
when the job runs: a 23:30 digest that runs (late, or slowly) past midnight
still marks its own day done. A replica that starts within the misfire grace
after today's fire time, with the day not yet done, runs the job once at start
(APScheduler's in-memory store would otherwise schedule from "now", tomorrow).

The lock's timeout is above the worst case of one run: collecting, plus every
Slack call of the post with all its retries and waits (bot/slack/digest_post.py
counts them from the poster's settings), so it cannot expire under a slow
post and let another replica post the same day.

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
from datetime import datetime, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

from bot.ops import metrics
from bot.slack.digest_post import Collect, DigestFailed, Published, publish_digest, worst_case_post_s
from handlers.escape import escape
from handlers.ports import LockNotAcquired, SlackPoster, StateStore, StateUnavailable
from handlers.telling import unexpected
from layers.digest import Digest

log = logging.getLogger("gpubot.scheduler")

JOB_ID = "daily-digest"
CATCH_UP_JOB_ID = "daily-digest-catch-up"
DONE_KEY = "digest:done:{}"
DONE_TTL_S = 3 * 86400
MISFIRE_GRACE_S = 3600
# The lock's timeout when the poster cannot say how long it may take; a dead holder frees it after.
LOCK_TIMEOUT_S = 600.0
# Reading the nodes, the exporters and the chart's ranges, with the clients' own timeouts and retries.
COLLECT_BUDGET_S = 300.0
# A replica waiting on the lock outlasts the holder's timeout, so a dead holder's day is still posted.
LOCK_WAIT_MARGIN_S = 30.0
LOCK_WAIT_S = LOCK_TIMEOUT_S + LOCK_WAIT_MARGIN_S


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


def last_fire(trigger: CronTrigger, now: datetime) -> datetime | None:
    """The trigger's latest fire time at or before `now` (looking back two days: it fires daily)."""
    found: datetime | None = None
    nxt = trigger.get_next_fire_time(None, now - timedelta(days=2))
    while nxt is not None and nxt <= now:
        found = nxt
        nxt = trigger.get_next_fire_time(nxt, nxt + timedelta(seconds=1))
    return found


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
    """What the scheduler calls each day: collect the digest, post it with its chart, once.

    `at` (hour, minute) is the daily fire time: the run's day is that of its latest fire time,
    not of the clock (None: the clock's day). `lock_timeout_s` None: above the worst case of a
    run with this poster; `wait_s` None: that plus a margin."""

    collect: Collect
    poster: SlackPoster
    channel: str
    store: StateStore
    tz: ZoneInfo
    retention_s: float = 14 * 86400
    clock: Callable[[], float] = time.time
    lock_timeout_s: float | None = None
    wait_s: float | None = None
    at: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.lock_timeout_s is None:
            post_s = worst_case_post_s(self.poster)
            self.lock_timeout_s = LOCK_TIMEOUT_S if post_s is None else COLLECT_BUDGET_S + post_s
        if self.wait_s is None:
            self.wait_s = self.lock_timeout_s + LOCK_WAIT_MARGIN_S

    def scheduled_day(self) -> str:
        """The day of the fire this run belongs to (the clock's day when unscheduled)."""
        now = self.clock()
        if self.at is not None:
            fired = last_fire(digest_trigger(*self.at, self.tz), datetime.fromtimestamp(now, tz=self.tz))
            if fired is not None:
                return digest_day(fired.timestamp(), self.tz)
        return digest_day(now, self.tz)

    def due(self, fired: datetime) -> bool:
        """True unless the day of this fire time is already done (an unreadable store: let the run say)."""
        try:
            return self.store.get(DONE_KEY.format(digest_day(fired.timestamp(), self.tz))) is None
        except StateUnavailable:
            return True

    def _say_crash(self, day: str, err: Exception) -> None:
        """A digest that crashed (a bug, not a backend failure) is said in its channel: nobody asked
        for it, but its readers would otherwise wait for a message that never comes."""
        text = f":x: the GPU fleet digest for {day} was not posted: {escape(unexpected(err))}"
        try:
            self.poster.post(self.channel, text)
        except Exception as again:
            log.error("digest %s: could not say in %s that it failed: %s", day, self.channel, again)

    def post(self, day: str) -> Published:
        published = publish_digest(
            self.collect,
            self.poster,
            self.channel,
            day=day,
            store=self.store,
            retention_s=self.retention_s,
        )
        ref = published.posted.ref
        log.info(
            "digest %s posted to %s (ts %s), %d flagged",
            day,
            ref.channel,
            ref.ts,
            len(published.digest.flagged),
        )
        return published

    def __call__(self) -> Outcome:
        day = self.scheduled_day()
        posted: list[Published] = []
        assert self.lock_timeout_s is not None and self.wait_s is not None  # set in __post_init__
        try:
            outcome = run_digest_once(
                day,
                self.store,
                lambda: posted.append(self.post(day)),
                lock_timeout_s=self.lock_timeout_s,
                wait_s=self.wait_s,
            )
        except DigestFailed as err:  # publish_digest counted it
            log.error("digest %s was not posted: %s", day, err.reason)
            return Outcome.FAILED
        except StateUnavailable as err:
            if posted:  # posted and counted; only the done key is missing
                log.error("digest %s posted, but it could not be marked done: %s", day, err)
            else:
                log.error("digest %s was not posted: %s", day, err)
                metrics.record_digest_run("failed")
            return Outcome.FAILED
        except Exception as err:
            # Counted before APScheduler logs it: a digest that crashes must show on /metrics too.
            if not posted:
                metrics.record_digest_run("failed")
                self._say_crash(day, err)
            raise
        if outcome is not Outcome.POSTED:
            log.info("digest %s: %s (by another replica or an earlier run)", day, outcome.value)
            metrics.record_digest_run(run_label(outcome, None))
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
    still_due: Callable[[datetime], bool] | None = None,
    clock: Callable[[], float] = time.time,
) -> BackgroundScheduler:
    """A background scheduler running `job` daily at hour:minute local time in `tz`.

    If the latest fire time passed less than `misfire_grace_s` ago (this replica started just
    after it) and `still_due(that fire time)` agrees, the job also runs once now."""
    scheduler = BackgroundScheduler(timezone=tz)
    trigger = digest_trigger(hour, minute, tz)
    scheduler.add_job(
        job,
        trigger,
        id=JOB_ID,
        name="daily GPU digest",
        coalesce=True,
        max_instances=1,
        misfire_grace_time=misfire_grace_s,
        replace_existing=True,
    )
    now = datetime.fromtimestamp(clock(), tz=tz)
    fired = last_fire(trigger, now)
    just_missed = fired is not None and now - fired < timedelta(seconds=misfire_grace_s)
    if fired is not None and just_missed and (still_due is None or still_due(fired)):
        log.info("started %s after the digest's fire time %s: running it now", now - fired, fired)
        # No trigger: a one-off run as soon as the scheduler starts.
        scheduler.add_job(
            job, id=CATCH_UP_JOB_ID, name="missed daily GPU digest", misfire_grace_time=misfire_grace_s
        )
    if start:
        scheduler.start()
        metrics.record_digest_scheduled()
    return scheduler
