"""`/gpu …` parsing, and bad commands answered with the ephemeral usage before any API call."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from handlers.commands import (
    USAGE,
    Clusters,
    CommandError,
    Digest,
    Help,
    Why,
    parse_command,
    usage_reply,
)
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import dispatch, inprocess_bot, slash_body, wait_for, write_scenario


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("why trainer-0", Why("default", "trainer-0")),
        ("why ml/trainer-0", Why("ml", "trainer-0")),
        ("why trainer-0 -n ml", Why("ml", "trainer-0")),
        ("why -n ml trainer-0", Why("ml", "trainer-0")),
        ("why trainer-0 --namespace ml", Why("ml", "trainer-0")),
        ("  WHY \u00a0 ml/trainer-0  ", Why("ml", "trainer-0")),  # pasted text: odd spaces, capital verb
        ("why vllm-0.vllm-headless -n inference", Why("inference", "vllm-0.vllm-headless")),
        ("why eu-1/ml/trainer-0", Why("ml", "trainer-0", "eu-1")),
        ("why trainer-0 -n ml --cluster eu-1", Why("ml", "trainer-0", "eu-1")),
        ("why --cluster=eu-1 ml/trainer-0", Why("ml", "trainer-0", "eu-1")),
        ("why eu-1/ml/trainer-0 --cluster eu-1", Why("ml", "trainer-0", "eu-1")),
        ("digest", Digest()),
        ("help", Help()),
        ("clusters", Clusters()),
    ],
)
def test_commands_parse(text: str, expected: object) -> None:
    assert parse_command(text) == expected


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no command given"),
        ("   ", "no command given"),
        ("cordon gpu-7", "unknown command 'cordon'"),
        ("why", "no pod named"),
        ("why -n ml", "no pod named"),
        ("why trainer-0 -n", "-n needs a namespace"),
        ("why Trainer_0", "invalid pod name 'Trainer_0'"),
        ("why eu-1/ml/trainer-0/x", "invalid pod reference"),
        ("why EU/ml/trainer-0", "invalid cluster name 'EU'"),
        ("why trainer-0 -n ml --cluster", "--cluster needs a cluster"),
        ("why eu-1/ml/trainer-0 --cluster us-1", "cluster given twice and different"),
        ("why trainer-0 --cluster a --cluster=b", "the cluster is given twice"),
        ("clusters all", "`clusters` takes no arguments"),
        ("why ML/trainer-0", "invalid namespace 'ML'"),
        ("why ml/trainer-0 -n other", "namespace given twice"),
        ("why a b", "one pod at a time"),
        ("why trainer-0 --all", "unknown option '--all'"),
        ("digest now", "`digest` takes no arguments"),
        ("why " + "a" * 254, "at most 253"),
    ],
)
def test_bad_commands_say_what_was_wrong(text: str, problem: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(text)
    assert problem in str(err.value)


def test_usage_reply_escapes_the_quoted_text() -> None:
    reply = usage_reply("unknown command '<!channel>'")
    assert "<!channel>" not in reply and "&lt;!channel&gt;" in reply
    assert reply.endswith(USAGE)


# --- through Bolt, with signatures: the ack is the ephemeral reply ----------------------------------


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture(scope="module")
def bot(slack: FakeSlack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    app = inprocess_bot(slack.url, write_scenario(tmp_path_factory.mktemp("cmd")))
    yield app
    app.shutdown()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "no command given"),
        ("reboot gpu-7", "unknown command"),
        ("why ../etc/passwd", "invalid"),
        ("why ml/Trainer", "invalid pod name"),
    ],
)
def test_bad_commands_get_the_usage_and_no_api_call(
    bot: Any, slack: FakeSlack, text: str, problem: str
) -> None:
    before = len(slack.calls)
    response = dispatch(bot, slash_body(text, channel="C0BAD"))
    assert response.status == 200
    body = json.loads(response.body)
    assert problem in body["text"] and "*Usage*" in body["text"]
    assert body.get("response_type", "ephemeral") == "ephemeral"
    time.sleep(0.2)
    assert [c.method for c in slack.calls[before:] if c.method != "auth.test"] == []


def test_help_is_the_usage(bot: Any) -> None:
    body = json.loads(dispatch(bot, slash_body("help")).body)
    assert body["text"] == USAGE


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("clusters", "This bot serves one cluster (GPUBOT_CLUSTER_NAME is not set)"),
        ("why eu-9/ml/trainer-0", "this bot serves one cluster (GPUBOT_CLUSTER_NAME is not set), not `eu-9`"),
    ],
)
def test_a_single_cluster_bot_answers_cluster_questions_in_the_ack(
    bot: Any, slack: FakeSlack, text: str, answer: str
) -> None:
    before = len(slack.calls)
    body = json.loads(dispatch(bot, slash_body(text, channel="C0ONECLUSTER")).body)
    assert answer in body["text"] and body["response_type"] == "ephemeral"
    assert [c for c in slack.calls[before:] if c.params.get("channel") == "C0ONECLUSTER"] == []


def test_missing_pod_is_answered_with_the_usage(bot: Any, slack: FakeSlack) -> None:
    response = dispatch(bot, slash_body("why -n ml ghost-0", user="U0GHOST", channel="C0GHOST"))
    assert json.loads(response.body)["text"] == "walking the layers for ml/ghost-0…"
    call = wait_for(
        "the ephemeral answer",
        lambda: [c for c in slack.calls_to("chat.postEphemeral") if c.params.get("user") == "U0GHOST"],
    )[0]
    assert call.params["channel"] == "C0GHOST"
    assert "ml/ghost-0 was not found" in call.params["text"] and "*Usage*" in call.params["text"]
    assert not [c for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == "C0GHOST"]


def test_digest_command_posts_the_digest_in_the_channel(bot: Any, slack: FakeSlack) -> None:
    body = json.loads(dispatch(bot, slash_body("digest", channel="C0DIGEST")).body)
    assert "digest" in body["text"]
    post = wait_for(
        "the digest",
        lambda: [c for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == "C0DIGEST"],
    )[0]
    blocks = json.dumps(post.params["blocks"])
    # gpu-7 has 7 of 8 GPUs allocatable: flagged, with the digest's per-node buttons.
    assert "gpu-7" in blocks and "ALLOCATABLE_BELOW_CAPACITY" in blocks
    assert "digest_diagnose" in blocks and "cordon_node" in blocks


def test_a_command_is_acked_fast_even_when_slack_is_slow(bot: Any, slack: FakeSlack, tmp_path: Path) -> None:
    # The walk posts through a slow Web API; the ack must not wait for it.
    slack.slow("chat.postMessage", 0.5)
    try:
        started = time.monotonic()
        response = dispatch(bot, slash_body("why ml/trainer-0", channel="C0SLOW"))
        assert response.status == 200
        assert time.monotonic() - started < 0.3
    finally:
        wait_for(
            "the slow walk",
            lambda: [c for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == "C0SLOW"],
        )
        slack.slow("chat.postMessage", 0.0)
