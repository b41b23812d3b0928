"""Buttons in-process through Bolt (signed payloads): operators, the digest's buttons, Redis down, failures."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from handlers.operators import Operators
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer, ServiceUnavailable
from tests.slack_harness import (
    OPERATOR,
    action_body,
    dispatch,
    inprocess_bot,
    posts,
    slash_body,
    told,
    wait_for,
    write_scenario,
)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def scenario(tmp_path: Any) -> Any:
    return write_scenario(tmp_path)


def start(bot: Any, slack: FakeSlack, channel: str) -> tuple[str, str]:
    dispatch(bot, slash_body("why ml/trainer-0", channel=channel))
    layer5 = wait_for(
        "layer 5", lambda: [c for c in posts(slack, channel) if c.params["text"].startswith("Layer 5 (")]
    )[0]
    walk_id = next(
        e["value"] for b in layer5.params["blocks"] if b["type"] == "actions" for e in b["elements"]
    )
    return str(layer5.params["thread_ts"]), walk_id


def test_group_members_are_operators_and_the_lookup_is_cached(slack: FakeSlack, scenario: Any) -> None:
    slack.usergroups["S0GPUOPS"] = ["U0GROUPIE"]
    bot = inprocess_bot(slack.url, scenario, GPUBOT_OPERATOR_GROUPS="S0GPUOPS")
    try:
        root, walk_id = start(bot, slack, "C0GROUP")
        kw = {"channel": "C0GROUP", "message_ts": root, "block_id": "layer5_actions"}
        dispatch(bot, action_body("cordon_node", walk_id, user="U0GROUPIE", **kw))
        wait_for(
            "the cordon audit",
            lambda: [c for c in posts(slack, "C0GROUP", root) if "cordoned" in c.params["text"]],
        )
        node = bot.buttons.actions.sources.cluster.get_node("gpu-7")
        assert node["spec"]["unschedulable"] is True
        assert node["metadata"]["annotations"]["gpubot/cordoned-by"] == "slack:U0GROUPIE"
        # Someone outside the group is refused, and the group is not listed again within the cache time.
        dispatch(bot, action_body("uncordon_node", walk_id, user="U0OUTSIDER", **kw))
        wait_for("the refusal", lambda: told(slack, "U0OUTSIDER"))
        assert len(slack.calls_to("usergroups.users.list")) == 1
        assert bot.buttons.actions.sources.cluster.get_node("gpu-7")["spec"]["unschedulable"] is True
    finally:
        bot.shutdown()


def test_operator_groups_fail_closed_and_expire() -> None:
    calls: list[str] = []
    members = {"S0OPS": ["U0A"]}

    def lookup(group: str) -> list[str]:
        calls.append(group)
        if group == "S0BROKEN":
            raise RuntimeError("missing_scope usergroups:read")
        return members[group]

    ops = Operators({"U0LISTED"}, ["S0BROKEN", "S0OPS"], lookup, ttl_s=0.05)
    assert ops.allows("U0LISTED") and ops.allows("U0A") and not ops.allows("U0B")
    assert calls.count("S0OPS") == 1  # cached across the three checks
    members["S0OPS"] = ["U0B"]
    time.sleep(0.06)
    assert ops.allows("U0B") and not ops.allows("U0A")


def test_digest_buttons_diagnose_and_cordon_in_the_digest_thread(slack: FakeSlack, scenario: Any) -> None:
    bot = inprocess_bot(slack.url, scenario)
    try:
        dispatch(bot, slash_body("digest", channel="C0DAILY"))
        digest = wait_for("the digest", lambda: posts(slack, "C0DAILY"))[0]
        row = next(
            b
            for b in digest.params["blocks"]
            if b["type"] == "actions" and b["block_id"].startswith("digest_node")
        )
        by_id = {e["action_id"]: e["value"] for e in row["elements"]}
        # The digest message's own ts: its buttons act only on the digest the bot posted there.
        digest_ts = next(m["ts"] for m in slack.messages["C0DAILY"] if "thread_ts" not in m)
        kw = {"channel": "C0DAILY", "message_ts": digest_ts, "block_id": row["block_id"]}

        dispatch(bot, action_body("digest_diagnose", by_id["digest_diagnose"], user="U0ONCALL", **kw))
        layers = wait_for(
            "the node walk in the digest thread",
            lambda: [
                c for c in posts(slack, "C0DAILY", digest_ts) if c.params["text"].startswith("Layer 5 (")
            ],
        )
        assert "gpu-7" in json.dumps(layers[0].params["blocks"])
        dispatch(bot, action_body("digest_diagnose", by_id["digest_diagnose"], user="U0ONCALL", **kw))
        wait_for("the replay answer", lambda: [t for t in told(slack, "U0ONCALL") if "already" in t])
        assert (
            len([c for c in posts(slack, "C0DAILY", digest_ts) if c.params["text"].startswith("Layer 5 (")])
            == 1
        )

        dispatch(bot, action_body("cordon_node", by_id["cordon_node"], user="U0ONCALL", **kw))
        wait_for("the refusal", lambda: [t for t in told(slack, "U0ONCALL") if "only operators" in t])
        dispatch(bot, action_body("cordon_node", by_id["cordon_node"], user=OPERATOR, **kw))
        audit = wait_for(
            "the audit line",
            lambda: [
                c
                for c in posts(slack, "C0DAILY", digest_ts)
                if c.params["text"].startswith(f"<@{OPERATOR}> cordoned")
            ],
        )
        assert "`gpu-7`" in audit[0].params["text"]
        assert bot.buttons.actions.sources.cluster.get_node("gpu-7")["spec"]["unschedulable"] is True
    finally:
        bot.shutdown()


def test_redis_down_at_a_click_is_said_and_nothing_is_done(slack: FakeSlack, scenario: Any) -> None:
    from bot.slack.state import RedisState

    server = RedisServer()
    try:
        server.start()
    except ServiceUnavailable as err:
        pytest.skip(str(err))
    bot = inprocess_bot(slack.url, scenario, state=RedisState(server.url, timeout_s=0.5))
    try:
        root, walk_id = start(bot, slack, "C0REDIS")
        server.stop()
        before = len(posts(slack, "C0REDIS"))
        kw = {"channel": "C0REDIS", "message_ts": root, "block_id": "layer1_actions"}
        dispatch(bot, action_body("layer_descend", walk_id, user="U0CLICK", **kw))
        dispatch(bot, action_body("cordon_node", walk_id, user=OPERATOR, **kw))
        wait_for("both answers", lambda: told(slack, "U0CLICK") and told(slack, OPERATOR))
        for text in told(slack, "U0CLICK") + told(slack, OPERATOR):
            assert "state store (Redis) is unreachable" in text and "nothing was done" in text
        time.sleep(0.2)
        assert len(posts(slack, "C0REDIS")) == before
        assert not bot.buttons.actions.sources.cluster.get_node("gpu-7")["spec"].get("unschedulable")
    finally:
        bot.shutdown()
        server.stop()


def test_a_failed_upload_is_reported_with_the_walk_id_and_can_be_retried(
    slack: FakeSlack, scenario: Any
) -> None:
    bot = inprocess_bot(slack.url, scenario)
    try:
        root, walk_id = start(bot, slack, "C0FAIL")
        kw = {"channel": "C0FAIL", "message_ts": root, "block_id": "layer5_actions"}
        slack.fail("files.getUploadURLExternal", 500, times=10)
        dispatch(bot, action_body("must_gather", walk_id, user=OPERATOR, **kw))
        report = wait_for(
            "the failure in the thread",
            lambda: [
                c for c in posts(slack, "C0FAIL", root) if c.params["text"].startswith(":x: must-gather")
            ],
            timeout=30,
        )
        assert f"walk `{walk_id}`" in report[0].params["text"]
        assert len(slack.calls_to("files.getUploadURLExternal")) > 1  # retried before giving up
        slack.reset()
        dispatch(bot, action_body("must_gather", walk_id, user=OPERATOR, **kw))
        wait_for("the retried upload", lambda: slack.calls_to("files.completeUploadExternal"), timeout=30)
    finally:
        bot.shutdown()


def test_an_expired_walk_is_answered(slack: FakeSlack, scenario: Any) -> None:
    bot = inprocess_bot(slack.url, scenario)
    try:
        dispatch(bot, action_body("walk_all", "0123456789abcdef", user="U0LATE", channel="C0OLD"))
        text = wait_for("the answer", lambda: told(slack, "U0LATE"))[0]
        assert "no longer known" in text and "14 days" in text
        assert posts(slack, "C0OLD") == []
    finally:
        bot.shutdown()


def test_a_pending_pods_fault_offers_and_acts_on_the_sick_node(slack: FakeSlack) -> None:
    from bot.sources.opener import resolve_scenario

    # ml/trainer-0 is Pending: layer 1 jumps to layer 5, which finds Xid 79 on gpu-node-1.
    # Two GPU nodes: the breaker must allow one of two to be cordoned.
    bot = inprocess_bot(slack.url, resolve_scenario("xid79-fell-off-bus"), GPUBOT_CORDON_MAX_FRACTION="0.5")
    try:
        dispatch(bot, slash_body("why ml/trainer-0", channel="C0PENDING"))
        layer5 = wait_for(
            "layer 5",
            lambda: [c for c in posts(slack, "C0PENDING") if c.params["text"].startswith("Layer 5 (")],
        )[0]
        actions = next(b for b in layer5.params["blocks"] if b["type"] == "actions")
        by_id = {e["action_id"]: e["value"] for e in actions["elements"]}
        assert next(iter(by_id)) == "cordon_node"  # remediation first after a layer-5 fault
        # Must-gather once per node and walk: on layer 1, the first message that faults about gpu-node-1.
        layer1 = next(c for c in posts(slack, "C0PENDING") if c.params["text"].startswith("Layer 1 ("))
        ids1 = [
            e["action_id"] for b in layer1.params["blocks"] if b["type"] == "actions" for e in b["elements"]
        ]
        assert "must_gather" in ids1 and "must_gather" not in by_id
        kw = {
            "channel": "C0PENDING",
            "message_ts": layer5.params.get("ts", "1795000000.000200"),
            "block_id": actions["block_id"],
        }
        dispatch(bot, action_body("cordon_node", by_id["cordon_node"], user=OPERATOR, **kw))
        wait_for(
            "the audit line",
            lambda: [
                c for c in posts(slack, "C0PENDING") if c.params["text"].startswith(f"<@{OPERATOR}> cordoned")
            ],
        )
        node = bot.buttons.actions.sources.cluster.get_node("gpu-node-1")
        assert node["spec"]["unschedulable"] is True
        assert node["metadata"]["annotations"]["gpubot/cordoned-by"] == f"slack:{OPERATOR}"
    finally:
        bot.shutdown()
