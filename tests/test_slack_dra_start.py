"""The Slack thread of a DRA pod whose allocated claim never reaches its container, through Bolt and
the real Poster: `/gpu why` on the lost-CDI-spec incident of a 13-node DRA fleet
(tests/incidents/dra_fleets/). Layer 2's message names the claim, its devices and the node's kubelet
plugin, with the command that greps the plugin's log for the claim; nothing about the sick nodes
elsewhere; every message inside Slack's limits."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import dispatch, inprocess_bot, slash_body, wait_for
from tests.test_slack_limits import limit_problems

SCENARIO = (
    Path(__file__).resolve().parent
    / "incidents"
    / "dra_fleets"
    / "dra-start-cdi-claim-spec-lost-after-reboot-13-nodes.yaml"
)


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_thread_names_the_claim_and_the_kubelet_plugin(slack: FakeSlack) -> None:
    bot = inprocess_bot(slack.url, SCENARIO)
    try:
        dispatch(bot, slash_body("why llm/qwen3-sft-0", channel="C0DRA2"))

        def posted(prefix: str) -> list[dict[str, object]]:
            return [
                c.params
                for c in slack.calls_to("chat.postMessage")
                if str(c.params.get("text")).startswith(prefix) and c.params.get("channel") == "C0DRA2"
            ]

        wait_for("layer 5", lambda: posted("Layer 5"), timeout=30)
        [layer2] = posted("Layer 2")
        l2 = json.dumps(layer2["blocks"], ensure_ascii=False)
        assert "L2_CONTAINER_START_FAILED" in l2 and "no CDI spec for claim llm/qwen3-sft-0-gpus-" in l2
        assert "dra-driver-nvidia-gpu-kubelet-plugin-" in l2 and "-c gpus | grep " in l2
        everything = json.dumps([c.params for c in slack.calls_to("chat.postMessage")], ensure_ascii=False)
        for noise in ("h100-02", "h100-04", "h100-06", "a100-04"):
            assert noise not in everything  # sick nodes elsewhere are not this pod's thread
        for message in posted("Layer"):
            assert limit_problems(str(message["text"]), message["blocks"]) == []  # type: ignore[arg-type]
    finally:
        bot.shutdown()
