"""The Slack thread of a pod that uses DRA GPUs, through Bolt and the real Poster.

`/gpu why` on the Xid 79 DRA scenario: the thread walks layer 1 (the DRA table, not "no GPU
advertised") then layer 5 (the Xid the taint carries), every message inside Slack's limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bot.sources.opener import bundled_scenarios
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import dispatch, inprocess_bot, slash_body, wait_for
from tests.test_slack_limits import limit_problems


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_dra_pod_thread(slack: FakeSlack) -> None:
    [scenario] = [p for p in bundled_scenarios() if p.stem == "dra-xid79-device-tainted"]
    bot = inprocess_bot(slack.url, scenario)
    try:
        dispatch(bot, slash_body("why ml/llama-sft-worker-0", channel="C0DRA"))

        def posted(prefix: str) -> list[dict[str, object]]:
            return [
                c.params
                for c in slack.calls_to("chat.postMessage")
                if str(c.params.get("text")).startswith(prefix) and c.params.get("channel") == "C0DRA"
            ]

        [layer5] = wait_for("layer 5", lambda: posted("Layer 5"), timeout=30)
        [layer1] = posted("Layer 1")
        assert not posted("Layer 2")  # layer 1's tainted GPU sends the walk straight to the card
        l1 = json.dumps(layer1["blocks"], ensure_ascii=False)
        assert "L1_DRA_DEVICE_TAINTED" in l1 and "gpu.nvidia.com/xid=79:NoSchedule" in l1
        assert "L1_DRA_CLAIM_PENDING" in l1 and "cannot allocate all claims" in l1
        assert "L1_NO_GPU_ADVERTISED" not in l1 and "L1_GPU_NODE_NOT_ADVERTISING" not in l1
        l5 = json.dumps(layer5["blocks"], ensure_ascii=False)
        assert "L5_XID" in l5 and "Xid 79" in l5 and "Received xid health event" in l5
        for message in (layer1, layer5):
            assert message["thread_ts"] == layer1["thread_ts"]
            assert limit_problems(str(message["text"]), message["blocks"]) == []  # type: ignore[arg-type]
    finally:
        bot.shutdown()
