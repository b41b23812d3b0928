"""The walk service and the buttons when the state store fails part-way: what ran is said, never hidden.

The bot runs in-process over the harness scenario (gpu-7 lost a GPU to Xid 79,
sample 06's device-plugin lines) against the fake Slack; its state store is the
real MemoryState wrapped so chosen operations on chosen keys raise
StateUnavailable, as RedisState does when Redis drops.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from bot.slack.state import MemoryState
from handlers.ports import JSONValue, StateUnavailable
from handlers.walks import CLAIM_S
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.slack_harness import (
    OPERATOR,
    action_body,
    dispatch,
    posts,
    running_inprocess_bot,
    slash_body,
    told,
    wait_for,
    write_scenario,
)


class FlakyState:
    """MemoryState whose chosen operations fail on keys matching a pattern (`times` failures, -1 forever)."""

    def __init__(self) -> None:
        self.inner = MemoryState()
        self.rules: list[list[Any]] = []  # [op, compiled pattern, times left]
        self.ttls: dict[str, float] = {}  # key → ttl of its last successful set_if_absent
        self._lock = threading.Lock()

    def fail(self, op: str, pattern: str, times: int = -1) -> None:
        with self._lock:
            self.rules.append([op, re.compile(pattern), times])

    def heal(self) -> None:
        with self._lock:
            self.rules.clear()

    def _check(self, op: str, key: str) -> None:
        with self._lock:
            for rule in self.rules:
                if rule[0] == op and rule[2] != 0 and rule[1].search(key):
                    rule[2] -= 1
                    raise StateUnavailable(
                        f"Redis at redis://state:6379 failed to {op} {key}: Connection reset"
                    )

    def get(self, key: str) -> JSONValue | None:
        self._check("get", key)
        return self.inner.get(key)

    def set(self, key: str, value: JSONValue, ttl_s: float) -> None:
        self._check("set", key)
        self.inner.set(key, value, ttl_s)

    def set_if_absent(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        self._check("set_if_absent", key)
        stored = self.inner.set_if_absent(key, value, ttl_s)
        if stored:
            self.ttls[key] = ttl_s
        return stored

    def extend(self, key: str, value: JSONValue, ttl_s: float) -> bool:
        self._check("extend", key)
        return self.inner.extend(key, value, ttl_s)

    def delete(self, key: str) -> None:
        self._check("delete", key)
        self.inner.delete(key)

    def lock(self, name: str, timeout_s: float, wait_s: float = 10.0) -> AbstractContextManager[None]:
        return self.inner.lock(name, timeout_s, wait_s)

    def ping(self) -> bool:
        self._check("ping", "PING")
        return self.inner.ping()


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def scenario(tmp_path: Any) -> Any:
    return write_scenario(tmp_path)


def layer_posts(slack: FakeSlack, channel: str, layer: int) -> list[Call]:
    return [c for c in posts(slack, channel) if c.params["text"].startswith(f"Layer {layer} (")]


def walk_of(slack: FakeSlack, channel: str, layer: int = 5) -> tuple[str, str]:
    """(root ts, walk id) from a layer message of a walk in `channel`."""
    msg = wait_for(f"layer {layer}", lambda: layer_posts(slack, channel, layer))[0]
    walk_id = next(e["value"] for b in msg.params["blocks"] if b["type"] == "actions" for e in b["elements"])
    return str(msg.params["thread_ts"]), walk_id


def walk_in(bot: Any, slack: FakeSlack, channel: str) -> tuple[str, str]:
    """`/gpu why ml/trainer-0` in `channel`: (root ts, walk id) once its layer 5 is posted."""
    dispatch(bot, slash_body("why ml/trainer-0", channel=channel))
    return walk_of(slack, channel)


def settle(bot: Any) -> None:
    """Wait until every submitted listener has finished."""
    wait_for("the bot's work to finish", lambda: not bot.pending or None)


# --- P2, P6: a cordon that happened is always said, and can be undone from its audit line ----------------


def test_cordon_is_audited_with_an_uncordon_button_even_when_the_claim_cannot_be_freed(
    slack: FakeSlack, scenario: Any
) -> None:
    state = FlakyState()
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        root, walk_id = walk_in(bot, slack, "C0CORDON")
        state.fail("delete", r":claim:")  # the store drops right after the node was cordoned
        kw = {"channel": "C0CORDON", "message_ts": root, "block_id": "layer5_actions"}
        dispatch(bot, action_body("cordon_node", walk_id, user=OPERATOR, **kw))
        audit = wait_for(
            "the audit line",
            lambda: [
                c
                for c in posts(slack, "C0CORDON", root)
                if c.params["text"].startswith(f"<@{OPERATOR}> cordoned")
            ],
        )[0]
        settle(bot)
        assert bot.buttons.actions.sources.cluster.get_node("gpu-7")["spec"]["unschedulable"] is True
        assert not [t for t in told(slack, OPERATOR) if "nothing was done" in t]
        undo = next(b for b in audit.params["blocks"] if b["type"] == "actions")
        button = undo["elements"][0]
        assert (button["action_id"], button["value"]) == ("uncordon_node", walk_id)
        assert "gpu-7" in button["confirm"]["text"]["text"]

        state.heal()
        dispatch(
            bot,
            action_body(
                "uncordon_node", walk_id, user="U0NOTOPS", channel="C0CORDON", block_id=undo["block_id"]
            ),
        )
        wait_for("the refusal", lambda: [t for t in told(slack, "U0NOTOPS") if "only operators" in t])
        dispatch(
            bot,
            action_body(
                "uncordon_node", walk_id, user=OPERATOR, channel="C0CORDON", block_id=undo["block_id"]
            ),
        )
        wait_for(
            "the uncordon audit",
            lambda: [
                c
                for c in posts(slack, "C0CORDON", root)
                if c.params["text"].startswith(f"<@{OPERATOR}> uncordoned")
            ],
        )
        assert not bot.buttons.actions.sources.cluster.get_node("gpu-7")["spec"].get("unschedulable")


def test_a_failed_cordon_is_reported_even_when_its_claim_cannot_be_freed(
    slack: FakeSlack, scenario: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    state = FlakyState()
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        root, walk_id = walk_in(bot, slack, "C0CFAIL")

        def refused(node: str, actor: str, reason: str) -> Any:
            raise RuntimeError('nodes "gpu-7" is forbidden: cannot patch resource "nodes"')

        monkeypatch.setattr(bot.buttons.actions, "cordon", refused)
        state.fail("delete", r":claim:")
        kw = {"channel": "C0CFAIL", "message_ts": root, "block_id": "layer5_actions"}
        dispatch(bot, action_body("cordon_node", walk_id, user=OPERATOR, **kw))
        report = wait_for(
            "the failure in the thread",
            lambda: [
                c for c in posts(slack, "C0CFAIL", root) if c.params["text"].startswith(":x: cordon gpu-7")
            ],
        )[0]
        assert f"walk `{walk_id}`" in report.params["text"] and "forbidden" in report.params["text"]


# --- P3: a layer that ran is always posted ----------------------------------------------------------------


def test_layers_are_posted_when_their_bookkeeping_fails(slack: FakeSlack, scenario: Any) -> None:
    state = FlakyState()
    state.fail("set", r":posted:1$", times=1)  # marking layer 1 posted
    state.fail("set", r":layer:5$", times=1)  # storing layer 5's result (layer 1's fault jumps there)
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        root, walk_id = walk_in(bot, slack, "C0KEEP")
        settle(bot)
        assert len(layer_posts(slack, "C0KEEP", 1)) == 1 and len(layer_posts(slack, "C0KEEP", 5)) == 1
        lost = [
            c
            for c in posts(slack, "C0KEEP", root)
            if "layer 5 ran but could not be stored" in c.params["text"]
        ]
        assert len(lost) == 1 and f"walk `{walk_id}`" in lost[0].params["text"]
        # Its posted mark, once written (a takeover's resume writes it), answers a later click.
        state.inner.set(f"walk:{walk_id}:posted:1", {"at": 0}, 60)
        dispatch(
            bot,
            action_body("layer_descend", walk_id, user="U0LATE", channel="C0KEEP", block_id="layer0_actions"),
        )
        text = wait_for("the answer", lambda: told(slack, "U0LATE"))[0]
        assert "layer 1 has already been run" in text
        settle(bot)
        assert len(layer_posts(slack, "C0KEEP", 1)) == 1


# --- P4: a walk whose state cannot be kept is never left "walking…" -----------------------------------------


def test_store_down_before_a_walk_is_answered_and_nothing_is_posted(slack: FakeSlack, scenario: Any) -> None:
    state = FlakyState()
    state.fail("ping", "PING")
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        dispatch(bot, slash_body("why ml/trainer-0", user="U0ASK", channel="C0DOWN"))
        text = wait_for("the answer", lambda: [t for t in told(slack, "U0ASK") if ":x:" in t])[0]
        assert "state store (Redis) is unreachable" in text and "was not started" in text
        settle(bot)
        assert posts(slack, "C0DOWN") == []


def test_store_failing_after_the_root_is_posted_marks_the_root_stopped(
    slack: FakeSlack, scenario: Any
) -> None:
    state = FlakyState()
    state.fail("set", r"^walk:[0-9a-f]{16}$")  # storing the walk itself
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        dispatch(bot, slash_body("why ml/trainer-0", user="U0ASK", channel="C0STOP"))
        text = wait_for("the answer", lambda: [t for t in told(slack, "U0ASK") if "stopped" in t])[0]
        walk_id = re.search(r"walk `([0-9a-f]{16})` stopped", text)
        assert walk_id is not None and "state store (Redis) is unreachable" in text
        settle(bot)
        root = posts(slack, "C0STOP")
        assert len(root) == 1  # the root only: no layer ran
        update = slack.calls_to("chat.update")[-1]
        assert update.params["channel"] == "C0STOP"
        shown = json.dumps(update.params["blocks"])
        assert "Stopped" in shown and walk_id.group(1) in shown and "walking" not in shown


# --- P7: the walk-all and diagnose claims do not outlive the click -------------------------------------------


def test_walk_all_is_freed_when_done_and_claims_are_short(slack: FakeSlack, scenario: Any) -> None:
    state = FlakyState()
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        dispatch(bot, slash_body("digest", channel="C0DAY"))
        digest = wait_for("the digest", lambda: posts(slack, "C0DAY"))[0]
        row = next(b for b in digest.params["blocks"] if b["type"] == "actions")
        value = next(e["value"] for e in row["elements"] if e["action_id"] == "digest_diagnose")
        thread = next(m["ts"] for m in slack.messages["C0DAY"] if "thread_ts" not in m)  # the digest's own
        kw = {"channel": "C0DAY", "message_ts": thread, "block_id": row["block_id"]}
        dispatch(bot, action_body("digest_diagnose", value, user="U0ONCALL", **kw))
        wait_for(
            "the node walk",
            lambda: [c for c in posts(slack, "C0DAY", thread) if c.params["text"].startswith("Layer ")],
        )
        settle(bot)
        walk_id = next(k.split(":")[1] for k in state.ttls if k.endswith(":claim:diagnose"))
        assert state.ttls[f"walk:{walk_id}:claim:diagnose"] <= CLAIM_S

        before = len([c for c in posts(slack, "C0DAY", thread) if c.params["text"].startswith("Layer ")])
        dispatch(
            bot, action_body("walk_all", walk_id, user="U0ONCALL", channel="C0DAY", block_id="layer5_actions")
        )
        wait_for(
            "the remaining layers",
            lambda: (
                len([c for c in posts(slack, "C0DAY", thread) if c.params["text"].startswith("Layer ")]) == 5
                or None
            ),
        )
        settle(bot)
        assert before < 5
        assert state.ttls[f"walk:{walk_id}:claim:walk_all"] <= CLAIM_S
        assert state.inner.get(f"walk:{walk_id}:claim:walk_all") is None  # freed once the layers ran
        dispatch(bot, action_body("digest_diagnose", value, user="U0ONCALL", **kw))
        wait_for("the replay answer", lambda: [t for t in told(slack, "U0ONCALL") if "already" in t])
        time.sleep(0.1)
        assert len([c for c in posts(slack, "C0DAY", thread) if c.params["text"].startswith("Layer ")]) == 5


# --- resume: a walk taken over from an agent that died (bot/cluster/agent.py) ----------------------------


def test_resume_runs_what_is_left_and_posts_a_layer_stored_but_never_posted(
    slack: FakeSlack, scenario: Any
) -> None:
    state = MemoryState()
    with running_inprocess_bot(slack.url, scenario, state) as bot:
        _root, walk_id = walk_in(bot, slack, "C0RESUME")
        settle(bot)
        service = bot.service
        walk = service.load(walk_id)
        # As an agent killed mid-walk leaves it: layer 1 stored and marked posted; layer 5 never run.
        state.delete(f"walk:{walk_id}:layer:5")
        state.delete(f"walk:{walk_id}:posted:5")
        assert [r.layer for r in service.resume(walk)] == [5]
        assert len(layer_posts(slack, "C0RESUME", 5)) == 2 and len(layer_posts(slack, "C0RESUME", 1)) == 1
        # Stored but not marked posted (killed between the two): posted on resume, nothing re-run.
        state.delete(f"walk:{walk_id}:posted:1")
        assert service.resume(walk) == []
        assert len(layer_posts(slack, "C0RESUME", 1)) == 2
        assert state.get(f"walk:{walk_id}:posted:1") is not None
        assert service.resume(walk) == [] and len(layer_posts(slack, "C0RESUME", 1)) == 2  # once only
