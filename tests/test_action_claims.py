"""A node action's claim (handlers/walkclaims.py `take_action`): a click that finds the action
running waits for a dead holder's lease to lapse and takes it, instead of answering "already in
this thread" for a bundle nobody will attach (seen with an agent SIGKILLed mid must-gather whose
request another agent took over before the lease ran out)."""

from __future__ import annotations

import threading
import time

from bot.slack.state import MemoryState
from handlers.walkclaims import LayerClaims

DONE, RUNNING = "must_gather:gpu-7", "must_gather:gpu-7:running"


def claims(claim_s: float) -> LayerClaims:
    return LayerClaims(MemoryState(), retention_s=3600, claim_s=claim_s)


def test_a_dead_holders_lease_lapses_and_the_click_takes_the_action() -> None:
    c = claims(1.0)
    assert c.claim("w1", RUNNING, "U0DEAD", 1.0)  # its holder is gone: nobody renews it
    started = time.monotonic()
    assert c.take_action("w1", DONE, RUNNING, "U0NEXT")
    assert 0.5 < time.monotonic() - started < 2.5


def test_a_done_action_is_not_taken_again() -> None:
    c = claims(1.0)
    assert c.claim("w1", DONE, "U0FIRST")
    started = time.monotonic()
    assert not c.take_action("w1", DONE, RUNNING, "U0NEXT")
    assert time.monotonic() - started < 0.1


def test_a_holder_that_finishes_while_the_click_waits_leaves_it_nothing_to_do() -> None:
    c = claims(2.0)
    assert c.claim("w1", RUNNING, "U0FIRST", 2.0)
    threading.Timer(0.5, lambda: c.claim("w1", DONE, "U0FIRST")).start()
    assert not c.take_action("w1", DONE, RUNNING, "U0NEXT")


def test_a_live_holder_renewing_its_lease_keeps_the_action_for_a_lease_at_most() -> None:
    c = claims(1.0)
    stop = threading.Event()

    def renew() -> None:
        while not stop.is_set():
            c.state.set("walk:w1:claim:" + RUNNING, {"by": "U0LIVE"}, 1.0)
            stop.wait(0.2)

    holder = threading.Thread(target=renew)
    holder.start()
    try:
        started = time.monotonic()
        assert not c.take_action("w1", DONE, RUNNING, "U0NEXT")
        assert 1.5 < time.monotonic() - started < 3.5  # a lease and its slack, then left to the holder
    finally:
        stop.set()
        holder.join()
