"""The Slack buttons beside a node's other owners (spec/findings.md, "Who else acts on a node"):
an in-process bot over the owners' incidents, the fake Slack, clicks signed and routed by Bolt."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.incidents.test_owner_incidents import OWNERS
from tests.slack_harness import OPERATOR, action_body, dispatch, inprocess_bot, posts, slash_body, wait_for

NVSENTINEL = OWNERS.path("owners-nvsentinel-quarantined-syslog-xid79-h100-bound-22-nodes")
AUTOPILOT = OWNERS.path("owners-gke-autopilot-xidcriticalerror-xid48-h100-bound-22-nodes")


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def _layer(slack: FakeSlack, channel: str, n: int) -> Any:
    return wait_for(
        f"layer {n}",
        lambda: [c for c in posts(slack, channel) if c.params["text"].startswith(f"Layer {n} (")],
    )[0]


def _buttons(message: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    actions = next(b for b in message.params["blocks"] if b["type"] == "actions")
    return actions, {e["action_id"]: e for e in actions["elements"]}


def _audit(slack: FakeSlack, channel: str, start: str) -> str:
    said = wait_for(
        "the audit line",
        lambda: [c for c in posts(slack, channel) if c.params["text"].startswith(f"<@{OPERATOR}> {start}")],
    )
    return str(said[0].params["text"])


def test_uncordon_is_refused_and_cordon_already_held_on_an_nvsentinel_node(slack: FakeSlack) -> None:
    bot = inprocess_bot(slack.url, NVSENTINEL, GPUBOT_CORDON_MAX_FRACTION="1")
    try:
        dispatch(bot, slash_body("why research/llama-70b-sft-0", channel="C0OWN"))
        layer5 = _layer(slack, "C0OWN", 5)
        actions, by_id = _buttons(layer5)
        # The decision table: a node NVSentinel holds gets no Cordon and no Uncordon button …
        assert "cordon_node" not in by_id and "uncordon_node" not in by_id and "must_gather" in by_id
        kw = {"channel": "C0OWN", "message_ts": layer5.params.get("ts", "1795000000.000300"),
              "block_id": actions["block_id"]}  # fmt: skip
        walk_id = by_id["must_gather"]["value"]
        # … and a crafted click is answered by the policy asked again at click time.
        dispatch(bot, action_body("uncordon_node", walk_id, user=OPERATOR, **kw))
        refused = _audit(slack, "C0OWN", "asked to uncordon")
        assert "NVSentinel" in refused and "quarantined" in refused and "break-fix" in refused, refused
        dispatch(bot, action_body("cordon_node", walk_id, user=OPERATOR, **kw))
        held = _audit(slack, "C0OWN", "asked to cordon")
        assert "held by NVSentinel (quarantined)" in held, held
        node = bot.buttons.actions.sources.cluster.get_node("h100-infer-03")
        assert (
            node["spec"]["unschedulable"] is True
            and "gpubot/cordoned-by" not in node["metadata"]["annotations"]
        )
    finally:
        bot.shutdown()


def test_the_cordon_confirm_on_gke_autopilot_says_collect_the_must_gather_first(slack: FakeSlack) -> None:
    bot = inprocess_bot(slack.url, AUTOPILOT)
    try:
        dispatch(bot, slash_body("why research/llama-70b-sft-0", channel="C0GKE"))
        dispatch(bot, action_body("walk_all", _buttons(_layer(slack, "C0GKE", 1))[1]["walk_all"]["value"],
                                  channel="C0GKE", message_ts="1795000000.000100", block_id="layer1_actions"))  # fmt: skip
        # GKE's condition reports, the node is schedulable: Cordon is offered (the decision table),
        # only under messages that fault or warn about the node (issue 27), and every one of its
        # confirmations says what the platform does next, whichever layer it is on.
        cordons = 0
        for n in (1, 2, 3, 4, 5):
            _, by_id = _buttons(_layer(slack, "C0GKE", n))
            if "cordon_node" not in by_id:
                continue
            cordons += 1
            confirm = by_id["cordon_node"]["confirm"]["text"]["text"]
            assert (
                "GKE Autopilot re-creates a node cordoned ~10 min: collect the must-gather first." in confirm
            )
        assert cordons >= 1
        assert "cordon_node" not in _buttons(_layer(slack, "C0GKE", 2))[1]  # an OK layer offers none
        assert "cordon_node" in _buttons(_layer(slack, "C0GKE", 5))[1]
    finally:
        bot.shutdown()
