"""The daily schedule across DST, and exactly one digest a day with TWO REAL PROCESSES on a REAL Redis."""

from __future__ import annotations

import functools
import multiprocessing as mp
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.slack.digest_post import worst_case_post_s
from bot.slack.post import Poster
from bot.slack.scheduler import (
    CATCH_UP_JOB_ID,
    DONE_KEY,
    JOB_ID,
    LOCK_TIMEOUT_S,
    MISFIRE_GRACE_S,
    DigestJob,
    Outcome,
    digest_day,
    digest_trigger,
    run_digest_once,
    start_scheduler,
)
from bot.slack.state import MemoryState, RedisState
from layers.digest import Digest, build_digest
from layers.sources import NoTelemetry, Telemetry
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.layers import builders as b
from tests.services import RedisServer

PARIS, NEW_YORK = ZoneInfo("Europe/Paris"), ZoneInfo("America/New_York")
NOW = 1_795_953_600.0  # 2026-11-29T12:00:00Z


def utc(year: int, month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def fires(trigger: Any, start: datetime, n: int) -> list[datetime]:
    out: list[datetime] = []
    prev = None
    now = start
    for _ in range(n):
        nxt = trigger.get_next_fire_time(prev, now)
        out.append(nxt.astimezone(UTC))
        prev = now = nxt
    return out


# --- when ---------------------------------------------------------------------------------


def test_spring_forward_keeps_nine_local_new_york() -> None:
    # 2026-03-08: clocks jump 02:00 → 03:00; 09:00 EST is 14:00 UTC, 09:00 EDT is 13:00 UTC.
    got = fires(digest_trigger(9, 0, NEW_YORK), datetime(2026, 3, 6, 10, 0, tzinfo=NEW_YORK), 3)
    assert got == [utc(2026, 3, 7, 14), utc(2026, 3, 8, 13), utc(2026, 3, 9, 13)]


def test_fall_back_keeps_nine_local_paris() -> None:
    # 2026-10-25: clocks go back 03:00 → 02:00; 09:00 CEST is 07:00 UTC, 09:00 CET is 08:00 UTC.
    got = fires(digest_trigger(9, 0, PARIS), datetime(2026, 10, 23, 10, 0, tzinfo=PARIS), 3)
    assert got == [utc(2026, 10, 24, 7), utc(2026, 10, 25, 8), utc(2026, 10, 26, 8)]
    assert [digest_day(t.timestamp(), PARIS) for t in got] == ["2026-10-24", "2026-10-25", "2026-10-26"]


def test_an_ambiguous_time_fires_twice_but_posts_once() -> None:
    # 02:30 happens twice in Paris on 2026-10-25: the trigger fires at both; the day's done key holds.
    got = fires(digest_trigger(2, 30, PARIS), datetime(2026, 10, 24, 3, 0, tzinfo=PARIS), 2)
    assert got == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30)]
    assert {digest_day(t.timestamp(), PARIS) for t in got} == {"2026-10-25"}
    store, posts = MemoryState(), []
    outcomes = [run_digest_once("2026-10-25", store, lambda: posts.append(1)) for _ in got]
    assert outcomes == [Outcome.POSTED, Outcome.ALREADY_DONE] and posts == [1]


def test_the_day_is_the_local_day() -> None:
    late_evening_new_york = utc(2026, 11, 30, 3, 0).timestamp()  # 22:00 on the 29th in New York
    assert digest_day(late_evening_new_york, NEW_YORK) == "2026-11-29"
    assert digest_day(late_evening_new_york, PARIS) == "2026-11-30"


def test_scheduler_job_settings_and_it_really_fires() -> None:
    ran = threading.Event()
    sched = start_scheduler(ran.set, 9, 0, PARIS)
    try:
        job = sched.get_job(JOB_ID)
        assert job.coalesce is True and job.max_instances == 1
        assert job.misfire_grace_time == MISFIRE_GRACE_S
        assert str(job.trigger.timezone) == "Europe/Paris"
        assert (job.next_run_time.hour, job.next_run_time.minute) == (9, 0)
        job.modify(next_run_time=datetime.now(PARIS) + timedelta(milliseconds=50))
        assert ran.wait(5)
    finally:
        sched.shutdown(wait=False)


# --- exactly once --------------------------------------------------------------------------


def sick_digest() -> Digest:
    nodes = [b.gpu_node("gpu-7", 8, allocatable=7), b.gpu_node("gpu-8")]
    return build_digest(nodes, None, NOW, metrics_error="no metrics source configured")


def collect() -> tuple[Digest, Telemetry]:
    return sick_digest(), NoTelemetry(NOW)


def job_for(store: Any, slack_url: str, day_ts: float) -> DigestJob:
    poster = Poster("xoxb-test-replica", slack_url, backoff_s=0.01)
    return DigestJob(collect, poster, "C0DIGEST", store, PARIS, clock=lambda: day_ts, wait_s=20)


def replica(
    redis_url: str, prefix: str, slack_url: str, day_ts: float, go: Any, delay_s: float, out: Any
) -> None:
    """One bot replica: it fires when `go` is set, `delay_s` late, and reports what it did."""
    job = job_for(RedisState(redis_url, prefix=prefix), slack_url, day_ts)
    go.wait(60)
    time.sleep(delay_s)
    started = time.time()
    outcome = job()
    out.put((delay_s, outcome.value, started, time.time()))


def run_replicas(redis: RedisServer, slack: FakeSlack, prefix: str, day_ts: float,
                 delays: list[float], *, one_after_another: bool = False) -> list[tuple[float, str, float, float]]:  # fmt: skip
    """Start one process per delay; all fire together, or each only after the previous finished."""
    ctx = mp.get_context("spawn")  # fresh interpreters, as separate pods are
    out = ctx.Queue()
    gos = [ctx.Event() for _ in delays]
    procs = [
        ctx.Process(target=replica, args=(redis.url, prefix, slack.url, day_ts, go, d, out))
        for go, d in zip(gos, delays, strict=True)
    ]
    for p in procs:
        p.start()
    results = []
    if one_after_another:
        for go in gos:
            go.set()
            results.append(out.get(timeout=60))
    else:
        for go in gos:
            go.set()
        results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    return sorted(results)


def test_two_processes_one_half_a_second_late_post_once(redis_server: RedisServer) -> None:
    prefix = f"sched-{uuid.uuid4().hex[:8]}:"
    day_ts = utc(2026, 11, 29, 8, 0).timestamp()
    with serve_slack() as slack:
        slack.slow("chat.postMessage", 0.3)  # the first replica is still posting when the late one fires
        results = run_replicas(redis_server, slack, prefix, day_ts, [0.0, 0.5])
        assert [r[1] for r in results] == ["posted", "already done"]
        assert len(slack.calls_to("chat.postMessage")) == 1
        assert len(slack.calls_to("files.completeUploadExternal")) == 1  # the chart, once
    store = RedisState(redis_server.url, prefix=prefix)
    done = store.get(DONE_KEY.format("2026-11-29"))
    assert done is not None and done["by"]


def test_late_replica_after_the_lock_was_released_still_does_not_post(redis_server: RedisServer) -> None:
    """The case a lock alone gets wrong: the second replica finds the lock free."""
    prefix = f"sched-{uuid.uuid4().hex[:8]}:"
    day_ts = utc(2026, 11, 28, 8, 0).timestamp()
    with serve_slack() as slack:
        first, late = run_replicas(redis_server, slack, prefix, day_ts, [0.0, 0.5], one_after_another=True)
        assert late[2] > first[3]  # the late one fired after the first had released the lock
        assert (first[1], late[1]) == ("posted", "already done")
        assert len(slack.calls_to("chat.postMessage")) == 1

        # A restart (a fresh process, same day) does not post again; the next day does.
        again = run_replicas(redis_server, slack, prefix, day_ts, [0.0])
        assert [r[1] for r in again] == ["already done"]
        assert len(slack.calls_to("chat.postMessage")) == 1
        next_day = run_replicas(redis_server, slack, prefix, day_ts + 86400, [0.0])
        assert [r[1] for r in next_day] == ["posted"]
        assert len(slack.calls_to("chat.postMessage")) == 2


def test_a_failed_post_leaves_the_day_open_for_the_next_try() -> None:
    store = MemoryState()
    with serve_slack() as slack:
        slack.fail("chat.postMessage", 500, times=4)
        job = job_for(store, slack.url, NOW)
        assert job() is Outcome.FAILED
        assert store.get(DONE_KEY.format(digest_day(NOW, PARIS))) is None
        assert job() is Outcome.POSTED
        assert job() is Outcome.ALREADY_DONE
        assert len([c for c in slack.calls_to("chat.postMessage") if "thread_ts" not in c.params]) == 5


# --- a replica that starts just after the fire time --------------------------------------------


def test_a_replica_started_just_after_the_fire_time_runs_the_job_once_now() -> None:
    fired = datetime.now(UTC) - timedelta(minutes=5)
    ran = threading.Event()
    sched = start_scheduler(ran.set, fired.hour, fired.minute, ZoneInfo("UTC"))
    try:
        assert ran.wait(5)  # not tomorrow: the in-memory job store alone would schedule from now
        assert sched.get_job(JOB_ID).next_run_time > datetime.now(UTC) + timedelta(hours=23)
    finally:
        sched.shutdown(wait=False)


def test_no_catch_up_past_the_grace_or_when_the_day_is_done() -> None:
    long_ago = datetime.now(UTC) - timedelta(seconds=MISFIRE_GRACE_S + 600)
    late = start_scheduler(lambda: None, long_ago.hour, long_ago.minute, ZoneInfo("UTC"), start=False)
    assert late.get_job(CATCH_UP_JOB_ID) is None
    recent = datetime.now(UTC) - timedelta(minutes=5)
    asked: list[datetime] = []

    def already_done(fire: datetime) -> bool:
        asked.append(fire)
        return False

    done = start_scheduler(
        lambda: None, recent.hour, recent.minute, ZoneInfo("UTC"), start=False, still_due=already_done
    )
    assert done.get_job(CATCH_UP_JOB_ID) is None
    assert [(t.hour, t.minute) for t in asked] == [(recent.hour, recent.minute)]


def test_two_replicas_started_after_the_fire_time_post_once(redis_server: RedisServer) -> None:
    prefix = f"sched-{uuid.uuid4().hex[:8]}:"
    fired = datetime.now(UTC) - timedelta(minutes=5)
    with serve_slack() as slack:
        outcomes: list[Outcome] = []
        finished = threading.Semaphore(0)

        def replica_job() -> DigestJob:
            store = RedisState(redis_server.url, prefix=prefix)  # its own connection, as a pod has
            poster = Poster("xoxb-test-replica", slack.url, backoff_s=0.01)
            job = DigestJob(
                collect, poster, "C0DIGEST", store, ZoneInfo("UTC"), at=(fired.hour, fired.minute)
            )
            return job

        def run(job: DigestJob) -> None:
            outcomes.append(job())
            finished.release()

        jobs = [replica_job() for _ in range(2)]
        scheds = [
            start_scheduler(
                functools.partial(run, j), fired.hour, fired.minute, ZoneInfo("UTC"), still_due=j.due
            )
            for j in jobs
        ]
        try:
            for _ in scheds:
                assert finished.acquire(timeout=20)
        finally:
            for s in scheds:
                s.shutdown(wait=False)
        assert sorted(o.value for o in outcomes) == ["already done", "posted"]
        assert len(slack.calls_to("chat.postMessage")) == 1
        # A third replica starting now finds the day done: it does not even schedule the catch-up.
        third = replica_job()
        late = start_scheduler(
            third, fired.hour, fired.minute, ZoneInfo("UTC"), still_due=third.due, start=False
        )
        assert late.get_job(CATCH_UP_JOB_ID) is None


# --- the lock outlasts a slow post -----------------------------------------------------------------


def test_the_lock_outlasts_the_slowest_post_so_no_other_replica_posts_meanwhile() -> None:
    clock = [1000.0]
    store = MemoryState(clock=lambda: clock[0])
    with serve_slack() as slack:
        poster = Poster("xoxb-test-replica", slack.url)  # the bot's retry settings
        slowest = worst_case_post_s(poster)
        assert slowest is not None and slowest > LOCK_TIMEOUT_S  # what the fixed 600 s lock missed
        collected = threading.Event()

        def slow_collect() -> tuple[Digest, Telemetry]:
            clock[0] += slowest  # this holder is as slow as its retries allow
            collected.set()
            return collect()

        slack.slow("chat.postMessage", 0.5)
        holder = DigestJob(slow_collect, poster, "C0DIGEST", store, PARIS, clock=lambda: NOW)
        other = DigestJob(collect, poster, "C0DIGEST", store, PARIS, clock=lambda: NOW, wait_s=0.2)
        assert holder.lock_timeout_s is not None and holder.lock_timeout_s > slowest
        assert holder.wait_s is not None and holder.wait_s > holder.lock_timeout_s
        got: list[Outcome] = []
        t = threading.Thread(target=lambda: got.append(holder()))
        t.start()
        assert collected.wait(10)
        assert other() is Outcome.BUSY  # the lock has not expired under the slow holder
        t.join(20)
        assert got == [Outcome.POSTED]
        assert len(slack.calls_to("chat.postMessage")) == 1


# --- the day is the scheduled fire's -------------------------------------------------------------


def test_a_2330_digest_that_runs_past_midnight_marks_its_own_day() -> None:
    # 23:30 in Paris on Saturday 2026-10-24 (CEST); the run starts at 00:20 (the grace allows an hour),
    # the night the clocks go back.
    store = MemoryState()
    run_at = datetime(2026, 10, 25, 0, 20, tzinfo=PARIS).timestamp()
    with serve_slack() as slack:
        poster = Poster("xoxb-test-replica", slack.url, backoff_s=0.01)
        job = DigestJob(collect, poster, "C0DIGEST", store, PARIS, clock=lambda: run_at, at=(23, 30))
        assert job.scheduled_day() == "2026-10-24"
        assert job() is Outcome.POSTED
        assert store.get(DONE_KEY.format("2026-10-24")) is not None
        assert store.get(DONE_KEY.format("2026-10-25")) is None  # the 25th's own digest still posts
        [chart] = [
            c for c in slack.calls_to("files.getUploadURLExternal") if c.params["filename"].endswith(".png")
        ]
        assert chart.params["filename"] == "gpu-digest-2026-10-24.png"
        # The same evening, before midnight, is the same day; the next evening's run is the next day.
        evening = datetime(2026, 10, 24, 23, 40, tzinfo=PARIS).timestamp()
        assert (
            DigestJob(collect, poster, "C", store, PARIS, clock=lambda: evening, at=(23, 30)).scheduled_day()
            == "2026-10-24"
        )
        next_evening = datetime(2026, 10, 25, 23, 31, tzinfo=PARIS).timestamp()
        assert (
            DigestJob(
                collect, poster, "C", store, PARIS, clock=lambda: next_evening, at=(23, 30)
            ).scheduled_day()
            == "2026-10-25"
        )
