"""The replay record survives its own write being sent twice: Redis took the first SET NX but its
answer was lost, and the connection's retry (or the redo on a new master after a failover) found the
key set. That is this request's own mark, not a replay: refusing it left both copies of a
redelivered command acknowledged empty and never run (tests/test_socket_gate.py under load)."""

from __future__ import annotations

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
