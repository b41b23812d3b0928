"""The replay record survives its own write being sent twice: Redis took the first SET NX but its
answer was lost, and the connection's retry (or the redo on a new master after a failover) found the
key set. That is this request's own mark, not a replay: refusing it left both copies of a
redelivered command acknowledged empty and never run (tests/test_socket_gate.py under load)."""

from __future__ import annotations

import threading
import time
from typing import Any

from bot.slack.gate import SlackGate
from bot.slack.state import MemoryState


class ResentWrites(MemoryState):
    """Every record is written, then answered as if the first answer was lost and the write resent."""

    def set_if_absent(self, key: str, value: Any, ttl_s: float) -> bool:
        super().set_if_absent(key, value, ttl_s)
        return super().set_if_absent(key, value, ttl_s)


def _command(envelope: str) -> dict[str, Any]:
    return {"command": "/gpu", "text": "why ml/p", "trigger_id": f"t-{envelope}", "user_id": "U1"}


def test_a_resent_record_of_this_request_is_not_a_replay() -> None:
    gate = SlackGate(app=None, state=ResentWrites())  # type: ignore[arg-type]
    assert gate.admit(_command("e1"), ["e1"]) is None  # runs
    refused = gate.admit(_command("e1"), ["e1"])  # the same envelope again: a real replay
    assert refused is not None and refused.status == 200


class FirstWaits(MemoryState):
    """Holds copy "a" after it records its first id until copy "b" has been judged."""

    def __init__(self) -> None:
        super().__init__()
        self.b_judged = threading.Event()

    def set_if_absent(self, key: str, value: Any, ttl_s: float) -> bool:
        fresh = super().set_if_absent(key, value, ttl_s)
        if threading.current_thread().name == "a" and key == "slack:seen:envelope:e2":
            assert self.b_judged.wait(5), "copy b was never judged"
        return fresh


def test_two_copies_of_one_envelope_at_once_run_once_not_zero_times() -> None:
    """Slack's redelivery of an envelope, worked concurrently: one copy runs. Both were refused when
    the loser went on to claim the trigger id the winner then found recorded (CI, under load)."""
    state = FirstWaits()
    gate = SlackGate(app=None, state=state)  # type: ignore[arg-type]
    answers: dict[str, Any] = {}

    def copy(name: str) -> None:
        answers[name] = gate.admit(_command("e2"), ["envelope:e2"])
        if name == "b":
            state.b_judged.set()

    a = threading.Thread(target=copy, args=("a",), name="a")
    a.start()
    while not state.get("slack:seen:envelope:e2") and a.is_alive():  # "a" holds the envelope id
        time.sleep(0.001)
    b = threading.Thread(target=copy, args=("b",), name="b")
    b.start()
    b.join(5)
    a.join(5)
    assert answers["b"] is not None and answers["b"].status == 200  # the copy: acknowledged, not run
    assert answers["a"] is None  # the first: runs
