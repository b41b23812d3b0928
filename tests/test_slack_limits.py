"""Every message the bot can post stays inside Slack's limits, and cluster text is never live markup.

Each bundled scenario is walked with all five layers and rendered as the bot
posts it (root, one message per layer, the digest); every block is parsed and
validated by slack_sdk and compared with its own `to_dict()` (which drops
unknown keys silently), then checked against the documented limits.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import build_sources, load_scenario
from handlers.blocks import root_message, walk_messages
from handlers.digest import digest_id, digest_message
from layers.digest import collect_digest
from layers.walk import open_node, open_pod, run
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.slack_harness import HOSTILE, OPERATOR, action_body, dispatch, inprocess_bot, slash_body, wait_for
from tests.slack_harness import write_scenario as write_harness_scenario

TOTAL_MAX = 12_000  # the undocumented cap rejects blocks at about 13k characters
LIMITS = {"header": 150, "section": 3000, "button": 75, "action_id": 255, "value": 2000, "block_id": 255}
# A button's confirm dialog: Slack rejects the whole message past these.
CONFIRM_LIMITS = {"title": 100, "text": 300, "confirm": 30, "deny": 30}


def scenarios(tmp: Path) -> list[Path]:
    return [
        *bundled_scenarios(),
        write_harness_scenario(tmp),
        write_harness_scenario(tmp, hostile=True),
        write_harness_scenario(tmp, many_xids=120),
    ]


def limit_problems(text: str, blocks: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    if len(blocks) > 50:
        problems.append(f"{len(blocks)} blocks")
    if len(json.dumps(blocks)) > TOTAL_MAX:
        problems.append(f"{len(json.dumps(blocks))} characters of blocks")
    if not text or len(text) > 4000:
        problems.append(f"top-level text of {len(text)} characters")
    for b in blocks:
        try:
            parsed = Block.parse(b)
            assert parsed is not None
            parsed.validate_json()
            again = parsed.to_dict()  # validates nested elements too
        except Exception as err:
            problems.append(f"{b.get('type')} block invalid: {err}")
            continue
        if again != b:
            problems.append(f"{b.get('type')} block has keys slack_sdk does not know: {b}")
        if len(b.get("block_id", "")) > LIMITS["block_id"]:
            problems.append("block_id too long")
        if b["type"] == "header" and len(b["text"]["text"]) > LIMITS["header"]:
            problems.append("header too long")
        if b["type"] == "section" and len(b["text"]["text"]) > LIMITS["section"]:
            problems.append(f"section of {len(b['text']['text'])} characters")
        if b["type"] == "context" and (
            len(b["elements"]) > 10 or any(len(e.get("text", "")) > LIMITS["section"] for e in b["elements"])
        ):
            problems.append("context too big")
        if b["type"] == "actions":
            if len(b["elements"]) > 25:
                problems.append("more than 25 buttons")
            for e in b["elements"]:
                if len(e["text"]["text"]) > LIMITS["button"]:
                    problems.append(f"button text {e['text']['text']!r}")
                if len(e["action_id"]) > LIMITS["action_id"] or len(e.get("value", "")) > LIMITS["value"]:
                    problems.append(f"button {e['action_id']} id or value too long")
                for part, most in CONFIRM_LIMITS.items():
                    if len(e.get("confirm", {}).get(part, {}).get("text", "")) > most:
                        problems.append(f"button {e['action_id']} confirm {part} over {most} characters")
    return problems


def test_the_checker_catches_what_slack_rejects() -> None:
    ok = [{"type": "section", "text": {"type": "mrkdwn", "text": "fine"}}]
    assert limit_problems("t", ok) == []
    assert limit_problems("t", [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}])
    assert limit_problems("t", ok * 51)
    assert limit_problems("t", [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}, "txt": 1}])
    button = {
        "type": "button",
        "text": {"type": "plain_text", "text": "b" * 76},
        "action_id": "a",
        "value": "v",
    }
    assert limit_problems("t", [{"type": "actions", "elements": [button]}])
    confirm = {
        "title": {"type": "plain_text", "text": "Cordon this node?"},
        "text": {"type": "mrkdwn", "text": "x" * 301},
        "confirm": {"type": "plain_text", "text": "Cordon"},
        "deny": {"type": "plain_text", "text": "Cancel"},
    }
    button = {**button, "text": {"type": "plain_text", "text": "Cordon"}, "confirm": confirm}
    assert limit_problems("t", [{"type": "actions", "elements": [button]}])
    confirm["text"]["text"] = "x" * 300
    assert limit_problems("t", [{"type": "actions", "elements": [button]}]) == []


def test_buttons_for_the_longest_node_name_stay_within_the_limits() -> None:
    from handlers.blocks import layer_message, uncordon_actions
    from handlers.digest import node_buttons
    from layers.digest import FlaggedNode
    from layers.findings import LayerResult, Severity, finding

    node = ("gpu-" + "a" * 59 + ".") * 3 + "b" * 61  # 253 characters, a valid DNS subdomain
    assert len(node) == 253
    fault = finding("L5_XID", "Xid 79: the GPU fell off the bus", node=node, severity=Severity.FAULT)
    msg = layer_message(LayerResult.build(5, [fault]), "0123456789abcdef", node)
    assert limit_problems(msg.text, msg.blocks) == []
    flagged = FlaggedNode(node=node, reasons=("ALLOCATABLE_BELOW_CAPACITY",), capacity=8, allocatable=7)
    assert limit_problems("digest", [node_buttons(flagged, "digest-20261129T120000Z", 0)]) == []
    assert limit_problems("audit", [uncordon_actions("0123456789abcdef", node, 5)]) == []


def test_every_bundled_scenario_renders_within_slacks_limits(tmp_path: Path) -> None:
    checked = 0
    for path in scenarios(tmp_path):
        sc = load_scenario(path)
        cluster, telemetry = build_sources(sc)
        target = str((sc.extra.get("x-expect") or {}).get("target") or "ml/trainer-0")
        ns, _, pod = target.partition("/")
        ctx = open_pod(cluster, telemetry, ns, pod) if pod else open_node(cluster, telemetry, ns)
        result = run(ctx, all_layers=True)
        messages = walk_messages(result, walk_id="0123456789abcdef", requester="U0ASKER")
        messages.append(root_message(result, "U0ASKER", running=True))
        digest = collect_digest(cluster, telemetry)
        messages.append(digest_message(digest, digest_id(digest)))
        for msg in messages:
            assert limit_problems(msg.text, msg.blocks) == [], f"{path.name}: {msg.text}"
            checked += 1
    assert checked >= 8 * len(bundled_scenarios()) > 0


# --- hostile text through the running bot ----------------------------------------------------------


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_hostile_log_text_reaches_slack_inert(slack: FakeSlack, tmp_path: Path) -> None:
    bot = inprocess_bot(slack.url, write_harness_scenario(tmp_path, hostile=True))
    try:
        dispatch(bot, slash_body("why ml/trainer-0", channel="C0HOSTILE"))
        layer5 = wait_for(
            "layer 5",
            lambda: [
                c
                for c in slack.calls_to("chat.postMessage")
                if str(c.params.get("text")).startswith("Layer 5")
            ],
        )[0]
        walk_id = next(
            e["value"] for b in layer5.params["blocks"] if b["type"] == "actions" for e in b["elements"]
        )
        kw = {
            "channel": "C0HOSTILE",
            "message_ts": str(layer5.params["thread_ts"]),
            "block_id": "layer1_actions",
        }
        dispatch(bot, action_body("walk_all", walk_id, **kw))
        dispatch(bot, action_body("cordon_node", walk_id, user=OPERATOR, **kw))
        wait_for(
            "the cordon audit",
            lambda: [
                c for c in slack.calls_to("chat.postMessage") if "cordoned" in str(c.params.get("text"))
            ],
        )
        wait_for(
            "layer 4",
            lambda: [
                c
                for c in slack.calls_to("chat.postMessage")
                if str(c.params.get("text")).startswith("Layer 4")
            ],
        )
        bot.shutdown()
        sent = [
            c for c in slack.calls if c.method in ("chat.postMessage", "chat.update", "chat.postEphemeral")
        ]
        everything = json.dumps([c.params for c in sent], ensure_ascii=False)
        # The hostile line did reach Slack (escaped), and none of it is live.
        assert "&lt;!channel&gt;" in everything and "&lt;@U0EVIL1&gt;" in everything
        assert "&lt;http://evil.example/login|click to fix the GPU&gt;" in everything
        for raw in HOSTILE:
            assert raw not in everything, raw
        assert " & more" not in everything and "&amp; more" in everything
        for c in sent:
            if isinstance(c.params.get("blocks"), list):
                assert limit_problems(str(c.params.get("text")), c.params["blocks"]) == []
    finally:
        bot.shutdown()


def test_long_evidence_goes_to_a_file_in_the_thread_never_cut(slack: FakeSlack, tmp_path: Path) -> None:
    bot = inprocess_bot(slack.url, write_harness_scenario(tmp_path, many_xids=120))
    try:
        dispatch(bot, slash_body("why ml/trainer-0", channel="C0LONG"))
        done = wait_for(
            "the evidence file", lambda: slack.calls_to("files.completeUploadExternal"), timeout=30
        )
        layer5 = next(
            c for c in slack.calls_to("chat.postMessage") if str(c.params.get("text")).startswith("Layer 5")
        )
        assert done[0].params["channel_id"] == "C0LONG"
        assert done[0].params["thread_ts"] == layer5.params["thread_ts"]
        assert "full evidence in the attached file" in json.dumps(layer5.params["blocks"])
        uploaded = slack.uploads[json.loads(done[0].params["files"])[0]["id"]].decode()
        for i in range(120):
            assert f"GPU-adb24b25-1db1-436e-d958-{i:012d}" in uploaded
        assert limit_problems(layer5.params["text"], layer5.params["blocks"]) == []
    finally:
        bot.shutdown()
