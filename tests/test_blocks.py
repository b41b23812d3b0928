"""Block Kit rendering: limits, escaping, buttons. Every bundled scenario is checked in test_slack_limits."""

from slack_sdk.models.blocks import Block

from handlers.blocks import layer_message, root_message, walk_messages
from handlers.escape import escape
from layers.findings import LayerResult, Severity, Target, WalkResult, finding


def _walk(evidence: list[str], layer: int = 5) -> WalkResult:
    f = finding(
        "L5_XID",
        "Xid 79 on GPU-0f3c: <!channel> fell off the bus",
        evidence=evidence,
        commands=["kubectl logs -n gpu-operator nvidia-device-plugin-daemonset-x7k2p | grep -i unhealthy"],
        node="gpu-7",
        severity=Severity.FAULT,
    )
    return WalkResult(Target("ml", "trainer-0", "gpu-7"), (LayerResult.build(layer, [f]),))


def _all_text(blocks: list[dict]) -> str:
    import json

    return json.dumps(blocks)


def test_escape_neutralises_mentions_and_links() -> None:
    assert escape("<!channel> <@U123> <http://evil|click> a&b") == (
        "&lt;!channel&gt; &lt;@U123&gt; &lt;http://evil|click&gt; a&amp;b"
    )


def test_hostile_text_is_never_live() -> None:
    w = _walk(["I1129 XidCriticalError <!here> <@U999> <https://x.example|login>", "```break out```"])
    for msg in walk_messages(w, "w1"):
        text = _all_text(msg.blocks)
        assert "<!channel>" not in text and "<!here>" not in text
        assert "<@U999>" not in text and "<https://x.example" not in text


def test_blocks_validate_against_slack_models() -> None:
    w = _walk(["line"] * 5)
    for msg in walk_messages(w, "w1"):
        for b in msg.blocks:
            parsed = Block.parse(b)
            assert parsed is not None
            parsed.validate_json()
            assert parsed.to_dict() == b  # no key silently dropped (a typo would be)


def test_long_evidence_goes_to_an_attachment_never_cut_silently() -> None:
    lines = [
        f"I1129 11:58:{i % 60:02d}.486697 1 health.go:185] XidCriticalError: Xid=79 line {i}"
        for i in range(2000)
    ]
    msg = layer_message(_walk(lines).layers[0], "w1", "gpu-7")
    text = _all_text(msg.blocks)
    assert len(text) < 13000
    assert "attached file" in text
    assert msg.attachments
    name, content = msg.attachments[0]
    assert name.endswith(".txt")
    assert "line 1999" in content and "line 0" in content


def test_layer5_fault_offers_remediation_first() -> None:
    msg = layer_message(_walk(["x"]).layers[0], "walk-42", "gpu-7")
    actions = next(b for b in msg.blocks if b["type"] == "actions")
    ids = [e["action_id"] for e in actions["elements"]]
    assert ids[:2] == ["must_gather", "cordon_node"]
    assert all(e["value"] == "walk-42" for e in actions["elements"])
    cordon = actions["elements"][1]
    assert "confirm" in cordon


def test_jump_button_when_next_skips_layers() -> None:
    f = finding("L1_ALLOCATABLE_BELOW_CAPACITY", "gpu-7 advertises 8 but 7 allocatable", node="gpu-7")
    r = LayerResult.build(1, [f])
    assert r.next_layer == 5
    msg = layer_message(r, "w", "gpu-7", {1})
    ids = [e["action_id"] for b in msg.blocks if b["type"] == "actions" for e in b["elements"]]
    assert "layer_jump" in ids and "layer_descend" in ids and "walk_all" in ids


def test_root_message_has_track_and_verdict() -> None:
    w = _walk(["x"])
    msg = root_message(w, "U123")
    text = _all_text(msg.blocks)
    assert "<@U123>" in text  # the requester is a real mention
    assert "L5_XID" in text


def test_node_in_question_for_bound_and_pending_pods() -> None:
    from handlers.blocks import node_in_question

    sick = LayerResult.build(
        1,
        [
            finding("L1_POD_PENDING", "pending"),
            finding("L1_ALLOCATABLE_BELOW_CAPACITY", "8 vs 7", node="gpu-7"),
        ],
    )
    healthy = LayerResult.build(2, [finding("L2_OK", "fine", node="gpu-3")])
    assert node_in_question(Target("ml", "p", "gpu-1"), sick) == "gpu-1"  # bound: always its node
    assert node_in_question(Target("ml", "p", None), sick) == "gpu-7"  # pending: the sick node
    assert node_in_question(Target("ml", "p", None), healthy) is None  # never offer to cordon a healthy node


def test_a_253_character_node_keeps_the_cordon_confirm_inside_slacks_limits() -> None:
    from handlers.blocks import cordon_confirm, uncordon_actions

    # The longest name Kubernetes allows (DNS subdomain), as some cloud providers' node names run.
    node = ".".join(["gpu-node-" + "a" * 54] * 4)[:253]
    assert len(node) == 253
    for confirm in (cordon_confirm(node), uncordon_actions("walk-42", node, 5)["elements"][0]["confirm"]):
        assert len(confirm["text"]["text"]) <= 300 and len(confirm["title"]["text"]) <= 100
        assert node[:200] + "…" in confirm["text"]["text"] and node not in confirm["text"]["text"]
    assert cordon_confirm("gpu-7")["text"]["text"].startswith("Cordon *gpu-7*:")  # short names in full


def test_the_uncordon_button_is_valid_block_kit_and_names_the_layer() -> None:
    from handlers.blocks import uncordon_actions

    block = uncordon_actions("walk-42", "gpu-7", 5)
    parsed = Block.parse(block)
    assert parsed is not None
    parsed.validate_json()
    assert parsed.to_dict() == block
    button = block["elements"][0]
    assert (button["action_id"], button["value"], block["block_id"]) == (
        "uncordon_node",
        "walk-42",
        "layer5_undo",
    )
    assert uncordon_actions("walk-42", "gpu-7", None)["block_id"] == "cordon_undo"
