"""`gpubot serve --http` end to end: real HTTP, real Slack signatures, the fake Slack Web API.

The bot runs as a subprocess, as in production. One bot reads a scenario file;
another reads the fake Kubernetes API through a kubeconfig, so a cordon is a
real PATCH that the fake records (or, when refused, never sees).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from bot.sources.scenario import build_sources, load_scenario
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import Call, FakeSlack, serve_slack
from tests.slack_harness import OPERATOR, BotProcess, bot_env, running_bot, wait_for, write_scenario


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(scope="module")
def scenario_bot(slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BotProcess]:
    folder = tmp_path_factory.mktemp("scenario-bot")
    path = write_scenario(folder)
    with running_bot(["--scenario", str(path)], bot_env(slack.url), folder / "bot.log") as bot:
        yield bot


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeKubeAPI]:
    folder = tmp_path_factory.mktemp("kube")
    snapshot, _ = build_sources(load_scenario(write_scenario(folder)))
    with serve(snapshot) as api:
        yield api


@pytest.fixture(scope="module")
def kube_bot(
    slack: FakeSlack, kube: FakeKubeAPI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BotProcess]:
    folder = tmp_path_factory.mktemp("kube-bot")
    with running_bot(["--kubeconfig", kube.kubeconfig], bot_env(slack.url), folder / "bot.log") as bot:
        yield bot


# --- helpers ----------------------------------------------------------------------------------


def in_channel(slack: FakeSlack, method: str, channel: str) -> list[Call]:
    return [c for c in slack.calls_to(method) if c.params.get("channel") == channel]


def blocks_of(call: Call) -> list[dict[str, Any]]:
    raw = call.params.get("blocks") or "[]"
    return json.loads(raw) if isinstance(raw, str) else raw


def buttons_of(call: Call) -> list[dict[str, Any]]:
    return [e for b in blocks_of(call) if b.get("type") == "actions" for e in b["elements"]]


def thread(slack: FakeSlack, channel: str, root_ts: str) -> list[Call]:
    return [c for c in in_channel(slack, "chat.postMessage", channel) if c.params.get("thread_ts") == root_ts]


def layer_posts(slack: FakeSlack, channel: str, root_ts: str, layer: int) -> list[Call]:
    return [c for c in thread(slack, channel, root_ts) if c.params["text"].startswith(f"Layer {layer} (")]


def ephemerals(slack: FakeSlack, channel: str, user: str) -> list[str]:
    return [
        c.params["text"]
        for c in in_channel(slack, "chat.postEphemeral", channel)
        if c.params.get("user") == user
    ]


def start_walk(bot: BotProcess, slack: FakeSlack, channel: str) -> tuple[str, str]:
    """`/gpu why ml/trainer-0` in `channel` → (root ts, walk id), once layers 1 and 5 are posted."""
    status, body = bot.command("why ml/trainer-0", channel=channel)
    assert status == 200 and json.loads(body)["text"] == "walking the layers for ml/trainer-0…"
    root_ts = wait_for("layer 5 in the thread", lambda: _root_ts_with_layer(slack, channel, 5))
    walk_id = buttons_of(layer_posts(slack, channel, root_ts, 1)[0])[0]["value"]
    return root_ts, walk_id


def _root_ts_with_layer(slack: FakeSlack, channel: str, layer: int) -> str | None:
    for c in in_channel(slack, "chat.postMessage", channel):
        if c.params.get("thread_ts") and c.params["text"].startswith(f"Layer {layer} ("):
            return str(c.params["thread_ts"])
    return None


def audit_lines(slack: FakeSlack, channel: str, root_ts: str, who: str) -> list[str]:
    return [
        c.params["text"] for c in thread(slack, channel, root_ts) if c.params["text"].startswith(f"<@{who}>")
    ]


# --- the command and the thread ------------------------------------------------------------------


def test_why_acks_at_once_then_posts_root_and_one_message_per_layer(
    scenario_bot: BotProcess, slack: FakeSlack
) -> None:
    channel = "C0WHY"
    started = time.monotonic()
    status, body = scenario_bot.command("why ml/trainer-0", user="U0ASKER", channel=channel)
    assert status == 200
    assert time.monotonic() - started < 1.0
    # The ack itself is the ephemeral reply.
    assert json.loads(body) == {"text": "walking the layers for ml/trainer-0…", "response_type": "ephemeral"}
    root_ts = wait_for("layer 5 in the thread", lambda: _root_ts_with_layer(slack, channel, 5))

    roots = [c for c in in_channel(slack, "chat.postMessage", channel) if "thread_ts" not in c.params]
    assert len(roots) == 1
    head = json.dumps(blocks_of(roots[0]))
    assert "<@U0ASKER>" in head and "ml/trainer-0" in head and "gpu-7" in head

    # The walk follows `next` as the CLI does: 1 (capacity gap) → 5 (the card), one message each.
    texts = [c.params["text"] for c in thread(slack, channel, root_ts)]
    assert texts == ["Layer 1 (scheduling): fault", "Layer 5 (the card): fault"]
    layer1 = layer_posts(slack, channel, root_ts, 1)[0]
    ids = [b["action_id"] for b in buttons_of(layer1)]
    assert ids == ["layer_descend", "layer_jump", "walk_all", "must_gather", "cordon_node"]
    assert "confirm" in buttons_of(layer1)[-1]  # cordon asks first
    layer5 = layer_posts(slack, channel, root_ts, 5)[0]
    # Remediation first after a layer-5 fault; Must-gather once per node and walk (on layer 1, issue 27).
    assert [b["action_id"] for b in buttons_of(layer5)] == ["cordon_node", "walk_all"]
    assert "L5_XID" in json.dumps(blocks_of(layer5))

    # The root's layer track is updated in place, ending with the verdict.
    updates = wait_for(
        "the final root update",
        lambda: [
            c for c in in_channel(slack, "chat.update", channel) if "Verdict" in json.dumps(blocks_of(c))
        ],
    )
    assert updates[-1].params["ts"] == root_ts
    final = json.dumps(blocks_of(updates[-1]))
    assert "L1 scheduling" in final and "L5 the card" in final and "L5_XID" in final


def test_missing_pod_gets_the_usage_and_nothing_in_the_channel(
    scenario_bot: BotProcess, slack: FakeSlack
) -> None:
    channel = "C0MISSING"
    status, _ = scenario_bot.command("why ml/no-such-pod", user="U0TYPO", channel=channel)
    assert status == 200
    replies = wait_for("the ephemeral reply", lambda: ephemerals(slack, channel, "U0TYPO"))
    assert "ml/no-such-pod was not found" in replies[0] and "*Usage*" in replies[0]
    time.sleep(0.3)
    assert in_channel(slack, "chat.postMessage", channel) == []


def test_navigation_buttons_run_layers_once_and_audit(scenario_bot: BotProcess, slack: FakeSlack) -> None:
    channel = "C0NAV"
    root_ts, walk_id = start_walk(scenario_bot, slack, channel)
    kw = {"channel": channel, "message_ts": root_ts, "block_id": "layer1_actions"}

    assert scenario_bot.click("layer_descend", walk_id, user="U0DIVER", **kw)[0] == 200
    wait_for("layer 2", lambda: layer_posts(slack, channel, root_ts, 2))
    assert any("descended to layer 2" in t for t in audit_lines(slack, channel, root_ts, "U0DIVER"))

    # The same click again is answered, not repeated.
    scenario_bot.click("layer_descend", walk_id, user="U0DIVER", **kw)
    wait_for(
        "the replay answer", lambda: [t for t in ephemerals(slack, channel, "U0DIVER") if "already" in t]
    )
    assert len(layer_posts(slack, channel, root_ts, 2)) == 1

    # Jump from layer 1 points at layer 5, which the walk already posted.
    scenario_bot.click("layer_jump", walk_id, user="U0JUMPER", **kw)
    wait_for("the jump answer", lambda: [t for t in ephemerals(slack, channel, "U0JUMPER") if "layer 5" in t])
    assert len(layer_posts(slack, channel, root_ts, 5)) == 1

    scenario_bot.click("walk_all", walk_id, user="U0ALL", **kw)
    wait_for(
        "layers 3 and 4",
        lambda: layer_posts(slack, channel, root_ts, 3) and layer_posts(slack, channel, root_ts, 4),
    )
    assert any("remaining layers (3, 4)" in t for t in audit_lines(slack, channel, root_ts, "U0ALL"))
    scenario_bot.click("walk_all", walk_id, user="U0ALL", **kw)
    wait_for("walk_all replay", lambda: [t for t in ephemerals(slack, channel, "U0ALL") if "already" in t])
    for layer in range(1, 6):
        assert len(layer_posts(slack, channel, root_ts, layer)) == 1


def test_stale_or_forged_signatures_are_refused(scenario_bot: BotProcess, slack: FakeSlack) -> None:
    before = len(slack.calls)
    stale = int(time.time()) - 10 * 60  # Bolt allows five minutes
    assert scenario_bot.command("why ml/trainer-0", channel="C0STALE", ts=stale)[0] == 401
    body = "command=%2Fgpu&text=why+ml%2Ftrainer-0&channel_id=C0FORGED&user_id=U0X"
    headers = {
        "X-Slack-Signature": "v0=" + "0" * 64,
        "X-Slack-Request-Timestamp": str(int(time.time())),
        "Content-Type": "application/x-www-form-urlencoded",
    }
    from tests.slack_harness import post

    assert post(scenario_bot.url + "/slack/events", body, headers)[0] == 401
    time.sleep(0.3)
    assert not [c for c in slack.calls[before:] if c.params.get("channel") in ("C0STALE", "C0FORGED")]


def test_health_endpoints(scenario_bot: BotProcess) -> None:
    from tests.slack_harness import get

    assert get(scenario_bot.url + "/healthz") == (200, "ok\n")
    assert get(scenario_bot.url + "/readyz") == (200, "ready\n")
    # No REDIS_URL: the bot says at start-up that it runs as one replica.
    assert "single replica: state in process memory" in scenario_bot.log()


# --- node actions against the fake Kubernetes API --------------------------------------------------


def test_cordon_only_for_operators_then_once(
    kube_bot: BotProcess, slack: FakeSlack, kube: FakeKubeAPI
) -> None:
    channel = "C0CORDON"
    root_ts, walk_id = start_walk(kube_bot, slack, channel)
    kw = {"channel": channel, "message_ts": root_ts, "block_id": "layer5_actions"}
    patches = lambda: kube.count(r"^/api/v1/nodes/gpu-7$", method="PATCH")  # noqa: E731

    kube_bot.click("cordon_node", walk_id, user="U0INTRUDER", **kw)
    refusal = wait_for("the refusal", lambda: ephemerals(slack, channel, "U0INTRUDER"))
    assert "only operators" in refusal[0] and "Nothing was done" in refusal[0]
    time.sleep(0.3)
    assert patches() == 0
    assert audit_lines(slack, channel, root_ts, "U0INTRUDER") == []

    kube_bot.click("cordon_node", walk_id, user=OPERATOR, **kw)
    wait_for("the PATCH", lambda: patches() == 1)
    line = wait_for(
        "the audit line",
        lambda: [t for t in audit_lines(slack, channel, root_ts, OPERATOR) if "cordoned" in t],
    )
    assert "`gpu-7`" in line[0] and "<!date^" in line[0]
    node = json.loads(next(r.body for r in kube.requests if r.method == "PATCH"))
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["gpubot/cordoned-by"] == f"slack:{OPERATOR}"

    kube_bot.click("cordon_node", walk_id, user=OPERATOR, **kw)  # replay
    wait_for(
        "the replay answer",
        lambda: [t for t in ephemerals(slack, channel, OPERATOR) if "already cordoned" in t],
    )
    assert patches() == 1

    kube_bot.click("uncordon_node", walk_id, user=OPERATOR, **kw)
    wait_for("the uncordon PATCH", lambda: patches() == 2)
    wait_for(
        "its audit line",
        lambda: [t for t in audit_lines(slack, channel, root_ts, OPERATOR) if "uncordoned" in t],
    )


def test_must_gather_attaches_a_bundle_for_operators(kube_bot: BotProcess, slack: FakeSlack) -> None:
    channel = "C0GATHER"
    root_ts, walk_id = start_walk(kube_bot, slack, channel)
    kw = {"channel": channel, "message_ts": root_ts, "block_id": "layer5_actions"}

    kube_bot.click("must_gather", walk_id, user="U0NOBODY", **kw)
    wait_for("the refusal", lambda: ephemerals(slack, channel, "U0NOBODY"))

    kube_bot.click("must_gather", walk_id, user=OPERATOR, **kw)
    done = wait_for(
        "the upload",
        lambda: [
            c for c in slack.calls_to("files.completeUploadExternal") if c.params.get("channel_id") == channel
        ],
        timeout=30,
        explain=kube_bot.log,
    )
    assert done[0].params.get("thread_ts") == root_ts
    file_id = json.loads(done[0].params["files"])[0]["id"]
    with tarfile.open(fileobj=io.BytesIO(slack.uploads[file_id]), mode="r:gz") as tar:
        assert any(name.endswith("scenario.yaml") for name in tar.getnames())
    wait_for(
        "the note",
        lambda: [
            t
            for t in thread(slack, channel, root_ts)
            if "must-gather of `gpu-7` attached" in t.params["text"]
        ],
    )
    kube_bot.click("must_gather", walk_id, user=OPERATOR, **kw)  # replay: answered, no second bundle
    wait_for("the replay answer", lambda: [t for t in ephemerals(slack, channel, OPERATOR) if "already" in t])
    assert (
        len(
            [
                c
                for c in slack.calls_to("files.completeUploadExternal")
                if c.params.get("channel_id") == channel
            ]
        )
        == 1
    )
