"""The gateway's queued clicks follow the owners' decision table (spec/findings.md, "One policy
decides every action"): a cordon or uncordon click the gateway queues is carried out by the
cluster's agent, which asks the policy at click time and refuses with its sentence, whatever button
the click claims to come from (REAL redis-server, the fake Slack, an in-process gateway and agent).

One row per phase and kind of tests/owner_policy_fleets.py (the whole table is
tests/test_owner_policy_table.py); the agent walks the row's fleet as its cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_harness import inprocess_agent, inprocess_gateway
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.owner_policy_fleets import NODE, POD, ROWS, Row, build
from tests.services import RedisServer
from tests.slack_harness import OPERATOR, action_body, dispatch, posts, slash_body, told, wait_for

CHOSEN = (
    "no-owner",
    "cordoned-by-person",
    "queued-upgrade",
    "nvsentinel-no-state-label",
    "upgrade-drain-required",
    "karpenter-pre-v1",
    "upgrade-failed",
    "eks-reported",
)
PICKED = [r for r in ROWS if r.id in CHOSEN]


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def _said(slack: FakeSlack, channel: str, start: str) -> list[str]:
    return [str(c.params["text"]) for c in posts(slack, channel) if str(c.params["text"]).startswith(start)]


@pytest.mark.parametrize("row", PICKED, ids=[r.id for r in PICKED])
def test_a_queued_click_is_decided_by_the_policy_at_click_time(
    row: Row, slack: FakeSlack, redis: RedisServer, tmp_path: Path
) -> None:
    cluster = f"c{CHOSEN.index(row.id)}"
    channel = f"C0POL{CHOSEN.index(row.id)}"
    gw = inprocess_gateway(slack.url, redis.url)
    try:
        with inprocess_agent(
            slack.url, redis.url, cluster, scenario=build(row, tmp_path), GPUBOT_OPERATORS=OPERATOR,
            GPUBOT_CORDON_MAX_FRACTION="1",
        ):  # fmt: skip
            wait_for("the agent", lambda: cluster in gw.streams.clusters())
            dispatch(gw, slash_body(f"why {cluster}/{POD}", channel=channel))
            layer = wait_for(
                "layer 1",
                lambda: [c for c in posts(slack, channel) if str(c.params["text"]).startswith("Layer 1 (")],
            )[0]
            actions = next(b for b in layer.params["blocks"] if b["type"] == "actions")
            ids = {e["action_id"]: e["value"] for e in actions["elements"]}
            assert ("cordon_node" in ids) == row.cordon, sorted(ids)
            walk_id = next(iter(ids.values()))
            kw = {
                "channel": channel,
                "message_ts": str(layer.params["thread_ts"]),
                "block_id": actions["block_id"],
            }
            # A crafted click, whether or not the message offered the button.
            dispatch(gw, action_body("cordon_node", walk_id, user=OPERATOR, **kw))
            mention = f"<@{OPERATOR}> "
            said = wait_for(
                "the cordon's answer",
                lambda: (
                    _said(slack, channel, mention + "cordoned")
                    + _said(slack, channel, mention + "asked to cordon")
                ),
            )
            if row.cordon:
                assert said[0].startswith(mention + "cordoned"), said
            else:
                assert said[0].startswith(mention + "asked to cordon"), said
                assert row.owner is None or row.owner in said[0], said
            dispatch(gw, action_body("uncordon_node", walk_id, user=OPERATOR, **kw))
            undone = wait_for(
                "the uncordon's answer",
                lambda: (
                    _said(slack, channel, mention + "uncordoned")
                    + _said(slack, channel, mention + "asked to uncordon")
                ),
            )
            if row.owner and not row.drain:  # a running holder: refused, naming it (or nothing to undo)
                assert undone[0].startswith(mention + "asked to uncordon"), undone
                assert row.owner in undone[0] or "is not cordoned" in undone[0], undone
            if row.id == "cordoned-by-person":  # a person's cordon: never by a button
                assert undone[0].startswith(mention + "asked to uncordon"), undone
        assert not [t for t in told(slack, OPERATOR) if "only operators" in t]
    finally:
        gw.shutdown(wait=False)
    assert NODE in said[0]
