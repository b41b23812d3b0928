"""The daily schedule across DST, and exactly one digest a day with TWO REAL PROCESSES on a REAL Redis."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from bot.scheduler import (
    DONE_KEY,
    JOB_ID,
    MISFIRE_GRACE_S,
    DigestJob,
    Outcome,
    digest_day,
    digest_trigger,
    run_digest_once,
    start_scheduler,
)
from bot.slackpost import Poster
from bot.state import MemoryState, RedisState
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
