"""Two `gpubot serve` processes sharing one real Redis: a walk continues on either, and survives a restart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import BotProcess, bot_env, wait_for, write_scenario


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def layer_posts(slack: FakeSlack, channel: str, layer: int) -> list[dict[str, Any]]:
    return [
        c.params
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == channel and str(c.params.get("text", "")).startswith(f"Layer {layer} (")
    ]


def test_a_walk_started_on_one_replica_continues_on_the_other_and_after_a_restart(
    slack: FakeSlack, redis_server: RedisServer, tmp_path: Path
) -> None:
    scenario = write_scenario(tmp_path)
    env = bot_env(slack.url, REDIS_URL=redis_server.url)
    args = ["--scenario", str(scenario)]
    a = BotProcess(args, env, tmp_path / "a.log")
    b = BotProcess(args, env, tmp_path / "b.log")
    try:
        assert "state in Redis" in a.log() and "single replica" not in a.log()
        channel = "C0REPLICA"
        a.command("why ml/trainer-0", channel=channel)
        layer5 = wait_for("layer 5 from replica A", lambda: layer_posts(slack, channel, 5))[0]
        root = str(layer5["thread_ts"])
        walk_id = next(
            e["value"] for blk in layer5["blocks"] if blk["type"] == "actions" for e in blk["elements"]
        )
        kw = {"channel": channel, "message_ts": root, "block_id": "layer1_actions"}

        # Replica B knows the walk: descend from layer 1 runs layer 2 in the same thread.
        assert b.click("layer_descend", walk_id, user="U0B", **kw)[0] == 200
        layer2 = wait_for("layer 2 from replica B", lambda: layer_posts(slack, channel, 2))
        assert layer2[0]["thread_ts"] == root
        # A replay on the other replica is answered, not repeated.
        a.click("layer_descend", walk_id, user="U0B", **kw)
        wait_for(
            "the replay answer",
            lambda: [c for c in slack.calls_to("chat.postEphemeral") if "already" in c.params["text"]],
        )
        assert len(layer_posts(slack, channel, 2)) == 1

        # Restart A: nothing is lost, the walk goes on from where it was.
        assert a.stop() == 0
        a = BotProcess(args, env, tmp_path / "a2.log")
        a.click("walk_all", walk_id, user="U0C", **kw)
        wait_for(
            "layers 3 and 4 after the restart",
            lambda: layer_posts(slack, channel, 3) and layer_posts(slack, channel, 4),
        )
        for layer in range(1, 6):
            assert len(layer_posts(slack, channel, layer)) == 1, layer
        # The root track (updated by whichever replica ran last) shows all five layers.
        final = wait_for(
            "the five-layer track",
            lambda: [
                c
                for c in slack.calls_to("chat.update")
                if c.params.get("ts") == root
                and all(f"L{n} " in json.dumps(c.params["blocks"]) for n in range(1, 6))
            ],
        )
        assert "L3 versions" in json.dumps(final[-1].params["blocks"])
    finally:
        assert a.stop() == 0
        assert b.stop() == 0
