"""The thread reads in ten seconds (issue 27; spec/interfaces.md, "The incident thread", item 4).

Over every bundled scenario and test incident (the metamorphic corpus), and over held-out variants
(the bundled scenarios in a production-shaped fleet with sick nodes elsewhere, and with an owner's
mark put on the target's node), each walk with `--all`:

- no evidence line appears twice in the walk's text, nor in its Slack thread's code blocks;
- a Cordon or Uncordon button only on a message whose findings fault or warn about that node, and
  never on a node an owner holds;
- at most one Must-gather per node and walk;
- a verdict on a held node names the holder, and never tells to drain or reboot what it repairs;
- nothing is lost: every evidence line is in the text, in the blocks, and the JSON carries every
  finding's full evidence (what the text and Slack fold).
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bot.render import walk_json, walk_text
from bot.sources.scenario import build_sources, parse_scenario
from handlers.blocks import layer_message, node_in_question, walk_messages
from layers import threadfold
from layers.findings import LayerResult, Severity, Target, WalkResult, finding
from layers.nodepolicy import decide
from layers.sources import Cluster
from layers.walk import open_node, open_pod, run
from tests.metamorphic.fleet import sick_nodes_elsewhere
from tests.metamorphic.harness import CORPUS, case_id, data

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = [p for p in CORPUS if p.is_relative_to(ROOT / "bot" / "scenarios")]
NODE_BUTTONS = ("cordon_node", "uncordon_node")


def _walk(scenario: dict[str, Any], source: str) -> tuple[WalkResult, Cluster]:
    cluster, telemetry = build_sources(parse_scenario(scenario, source))
    ns, _, pod = str(scenario["x-expect"]["target"]).partition("/")
    ctx = open_pod(cluster, telemetry, ns, pod) if pod else open_node(cluster, telemetry, ns)
    return run(ctx, all_layers=True), cluster


def _text_evidence(text: str) -> list[str]:
    return [ln.strip()[2:] for ln in text.splitlines() if ln.strip().startswith("│ ")]


def _block_evidence(messages: list[Any]) -> list[str]:
    out: list[str] = []
    for m in messages:
        for b in m.blocks:
            text = (b.get("text") or {}).get("text") or "" if b["type"] == "section" else ""
            if text.startswith("```"):
                out += text.split("```")[1].splitlines()
    return out


def _buttons(message: Any) -> list[str]:
    return [e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]


def _remedy(message: Any) -> list[str]:
    return [a for a in _buttons(message) if a in ("must_gather", *NODE_BUTTONS)]


def check_thread(walk: WalkResult, cluster: Cluster) -> None:
    text = walk_text(walk)
    messages = walk_messages(walk, "0123456789abcdef", "U0ASKER")
    every = [e for r in walk.layers for f in r.findings for e in f.evidence]

    # No evidence line twice, in the text or in the thread; none lost.
    shown = _text_evidence(text)
    twice = [line for line, n in Counter(shown).items() if n > 1]
    assert not twice, f"evidence repeated in the text: {twice[:3]}"
    clean = {re.sub(r"[\x00-\x1f]", "?", e) for e in every}
    assert set(shown) == {c for c in clean if c in set(shown)} and clean <= set(shown), (
        "a line of evidence is missing from the text"
    )
    in_blocks = _block_evidence(messages)
    twice = [line for line, n in Counter(in_blocks).items() if n > 1]
    assert not twice, f"evidence repeated in the thread: {twice[:3]}"

    # Buttons where they act: one message per layer, after the root.
    gathered: Counter[str] = Counter()
    for r, m in zip(walk.layers, messages[1:], strict=True):
        ids = _buttons(m)
        node = node_in_question(walk.target, r)
        if any(a in ids for a in NODE_BUTTONS):
            assert node and any(f.node == node and f.severity >= Severity.WARN for f in r.findings), (
                f"a node button on layer {r.layer}, whose findings neither fault nor warn about {node}"
            )
            if "cordon_node" in ids:
                assert decide(cluster.get_node(node)).cordon.offered, (
                    f"Cordon the owners' table refuses on {node}"
                )
        if "must_gather" in ids and node:
            gathered[node] += 1
    assert all(n == 1 for n in gathered.values()), f"more than one Must-gather: {gathered}"

    # The verdict names who holds its node and does not fight it.
    v = walk.verdict
    node = (v.node if v else None) or walk.target.node
    policy = decide(cluster.get_node(node)) if v and node else None
    held = policy.holder if policy is not None and (policy.holder or {}).get("role") == "holder" else None
    verdict_line = text.rstrip().splitlines()[-1]
    root = json.dumps(messages[0].blocks, ensure_ascii=False)
    if held is not None and policy is not None:
        assert f"held by {held['name']}" in verdict_line, verdict_line
        assert f"*Held by* {held['name']}" in root
        if policy.replaces_action:
            said = verdict_line.lower()
            assert "drain the node" not in said and "reboot the machine" not in said, verdict_line

    # JSON keeps every fact the text and the thread folded.
    data_json = json.loads(walk_json(walk))
    for r, layer in zip(threadfold.fold(walk.target, walk.layers).layers, data_json["layers"], strict=True):
        by_key = {(f["code"], f["summary"], f["node"]): f["evidence"] for f in layer["findings"]}
        for s in r.findings:
            full = by_key[(s.finding.code, s.finding.summary, s.finding.node)]
            assert list(s.finding.evidence) == full and set(s.folded) <= set(full)


@pytest.mark.parametrize("path", CORPUS, ids=[case_id(p) for p in CORPUS])
def test_every_incident_reads_once(path: Path) -> None:
    walk, cluster = _walk(data(path), str(path))
    check_thread(walk, cluster)


# --- held-out: production-shaped fleets with noise, and owners on the target's node ----------------


def _target_node(s: dict[str, Any]) -> dict[str, Any] | None:
    ns, _, name = str(s["x-expect"]["target"]).partition("/")
    pod = next(
        (
            o
            for o in s.get("objects") or []
            if o.get("kind") == "Pod"
            and o["metadata"].get("namespace") == ns
            and o["metadata"]["name"] == name
        ),
        None,
    )
    node = ((pod or {}).get("spec") or {}).get("nodeName")
    return next(
        (o for o in s.get("objects") or [] if o.get("kind") == "Node" and o["metadata"]["name"] == node), None
    )


def nvsentinel(node: dict[str, Any]) -> None:
    node["metadata"].setdefault("labels", {}).update(
        {"dgxc.nvidia.com/nvsentinel-state": "quarantined", "k8saas.nvidia.com/cordon-by": "NVSentinel"}
    )
    node.setdefault("spec", {})["unschedulable"] = True


def karpenter(node: dict[str, Any]) -> None:
    taints = node.setdefault("spec", {}).setdefault("taints", [])
    taints.append({"key": "karpenter.sh/disrupted", "effect": "NoSchedule"})


OWNER_MARKS = {"nvsentinel": nvsentinel, "karpenter": karpenter}


@pytest.mark.parametrize("path", BUNDLED, ids=[case_id(p) for p in BUNDLED])
def test_held_out_fleets_with_noise_and_owners(path: Path) -> None:
    noisy = sick_nodes_elsewhere(data(path))
    walk, cluster = _walk(noisy, f"{path}#noise")
    check_thread(walk, cluster)
    for name, mark in OWNER_MARKS.items():
        held = copy.deepcopy(noisy)
        node = _target_node(held)
        if node is None:
            continue
        mark(node)
        walk, cluster = _walk(held, f"{path}#{name}")
        check_thread(walk, cluster)


# --- the model, one renderer at a time ------------------------------------------------------------

OWNER = "owner: NVSentinel (quarantined) — label dgxc.nvidia.com/nvsentinel-state=quarantined"
AGENT = "NVSentinel: condition SysLogsXIDError=True, reason SysLogsXIDErrorIsNotHealthy"
AFTER = "after a cordon: The driver manager (ENABLE_GPU_POD_EVICTION=true) uncordons it when its driver pod restarts."


# The walked node's policy, as a walk keeps it on each layer that examined the node.
HELD = decide(
    {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-7", "labels": {"dgxc.nvidia.com/nvsentinel-state": "quarantined"}},
        "spec": {"unschedulable": True},
    }
)


def _held_walk() -> WalkResult:
    l1 = LayerResult.build(
        1,
        [
            finding("L1_NODE_OWNER", "gpu-7: NVSentinel holds it", evidence=[OWNER, AGENT], node="gpu-7"),
            finding(
                "L1_POD_SCHEDULED",
                "ml/p is scheduled on gpu-7",
                evidence=["spec.nodeName=gpu-7"],
                node="gpu-7",
            ),
        ],
        [HELD],
    )
    l2 = LayerResult.build(
        2, [finding("L2_OK", "ok on gpu-7", evidence=["spec.nodeName=gpu-7", OWNER], node="gpu-7")], [HELD]
    )
    l5 = LayerResult.build(
        5,
        [
            finding(
                "L5_XID",
                "Xid 79 on gpu-7, FALLEN_OFF_THE_BUS: gone — Drain the node and reboot the machine",
                evidence=["source: kernel log", AGENT, OWNER],
                node="gpu-7",
                severity=Severity.FAULT,
            ),
            finding("L5_HEALTH_AGENT_CONDITION", "NVSentinel reports", evidence=[AGENT, OWNER], node="gpu-7"),
        ],
        [HELD],
    )
    return WalkResult(Target("ml", "p", "gpu-7"), (l1, l2, l5))


def test_text_shows_each_fact_once_and_refers_to_it() -> None:
    text = walk_text(_held_walk())
    assert text.count(OWNER) == 1 and text.count(AGENT) == 1 and text.count("spec.nodeName=gpu-7") == 1
    assert "↳ held by NVSentinel (quarantined): see layer 1" in text
    assert "1 more line(s) as in layer 1" in text  # the L2_OK's copy of layer 1's line
    assert "gpubot cordon" not in text  # held: no cordon offered, in the CLI either
    assert text.count("gpubot must-gather --node gpu-7") == 1
    last = text.splitlines()[-1]
    assert last.startswith("Verdict: L5_XID (layer 5) on gpu-7 — Xid 79 on gpu-7, FALLEN_OFF_THE_BUS: gone")
    assert "held by NVSentinel (quarantined)" in last and "NVSentinel is repairing it (quarantined)" in last
    assert "Drain" not in last


def test_blocks_show_each_fact_once_and_buttons_where_they_act() -> None:
    walk = _held_walk()
    messages = walk_messages(walk, "w1")
    blocks = json.dumps([m.blocks for m in messages], ensure_ascii=False)
    assert blocks.count(OWNER) == 1 and blocks.count(AGENT) == 1
    assert "held by NVSentinel (quarantined): see layer 1" in blocks
    assert [_remedy(m) for m in messages[1:]] == [[], [], ["must_gather"]]
    root = json.dumps(messages[0].blocks, ensure_ascii=False)
    assert "*Held by* NVSentinel (quarantined)" in root and "Drain" not in root


def test_json_keeps_every_fact_the_text_folded() -> None:
    walk = _held_walk()
    thread = threadfold.fold(walk.target, walk.layers)
    folded = [(i, s) for i, r in enumerate(thread.layers) for s in r.findings if s.folded]
    assert folded  # the walk does fold
    data_json = json.loads(walk_json(walk))
    assert set(data_json["verdict"]) == {"layer", "code", "summary"}  # the spec's schema, key for key
    for i, s in folded:
        f = next(f for f in data_json["layers"][i]["findings"] if f["code"] == s.finding.code)
        assert set(s.folded) <= set(f["evidence"]) and f["evidence"] == list(s.finding.evidence)


def test_slack_posts_layer_by_layer_and_still_shows_each_fact_once() -> None:
    """The service posts each layer as it completes (handlers/walks.py): a layer's message folds
    against the layers already in the thread, and offers no second Must-gather."""
    walk = _held_walk()
    posted: list[LayerResult] = []
    seen: list[str] = []
    gathers = 0
    for r in walk.layers:
        node = node_in_question(walk.target, r)
        m = layer_message(r, "w1", node, {1, 2, 5}, target=walk.target, earlier=posted)
        seen += _block_evidence([m])
        gathers += _buttons(m).count("must_gather")
        posted.append(r)
    assert len(seen) == len(set(seen)) and gathers == 1


def test_a_cordon_confirmation_carries_the_next_step_said_in_another_layer() -> None:
    """Cordon on the fault's message only; its confirmation says what the platform does next even
    when that line is in layer 1's message, not its own."""
    l1 = LayerResult.build(1, [finding("L1_POD_SCHEDULED", "scheduled", evidence=[AFTER], node="gpu-7")])
    l2 = LayerResult.build(2, [finding("L2_OK", "ok", node="gpu-7")])
    l5 = LayerResult.build(5, [finding("L5_XID", "Xid 79 — reboot", node="gpu-7", severity=Severity.FAULT)])
    walk = WalkResult(Target("ml", "p", "gpu-7"), (l1, l2, l5))
    messages = walk_messages(walk, "w1")
    assert [_remedy(m) for m in messages[1:]] == [[], [], ["must_gather", "cordon_node"]]
    cordon = next(
        e
        for b in messages[3].blocks
        if b["type"] == "actions"
        for e in b["elements"]
        if e["action_id"] == "cordon_node"
    )
    assert "uncordons it when its driver pod restarts" in cordon["confirm"]["text"]["text"]
    text = walk_text(walk)
    assert text.count("gpubot cordon gpu-7") == 1 and text.count("gpubot must-gather --node gpu-7") == 1


def test_an_ok_layer_offers_no_cordon() -> None:
    r = LayerResult.build(2, [finding("L2_OK", "ok", node="gpu-7")])
    m = layer_message(r, "w1", "gpu-7", {2})
    assert not {"cordon_node", "must_gather"} & set(_buttons(m))


# --- the bot, end to end: the service posts layer by layer -----------------------------------------


def test_the_posted_thread_shows_each_fact_once_and_the_root_names_the_holder() -> None:
    """`/gpu why` through Bolt and the walk service (handlers/walks.py) against the fake Slack, on
    the bundled EKS Xid 79 incident: every layer posted as it completes, none repeating a line of an
    earlier one, one Must-gather, one Cordon (EKS's agent only reports on a schedulable node: the table
    offers it) whose confirmation says what EKS auto repair does next, the root's verdict naming the
    agent's condition."""
    from bot.sources.opener import resolve_scenario
    from tests.fakes.slack_api import serve_slack
    from tests.slack_harness import dispatch, inprocess_bot, posts, slash_body, wait_for

    with serve_slack() as slack:
        bot = inprocess_bot(slack.url, resolve_scenario("eks-accelerated-hardware-not-ready-xid79"))
        try:
            dispatch(bot, slash_body("why research/llama-70b-sft-0", channel="C0THREAD"))
            layers = wait_for(
                "five layers",
                lambda: (
                    (ps := [c for c in posts(slack, "C0THREAD") if c.params["text"].startswith("Layer ")])
                    and len(ps) == 5
                    and ps
                ),
            )
            root = wait_for(
                "the verdict",
                lambda: [
                    c
                    for c in slack.calls_to("chat.update")
                    if c.params.get("channel") == "C0THREAD" and "Verdict" in json.dumps(c.params["blocks"])
                ],
            )[-1]
        finally:
            bot.shutdown()

    class _M:
        def __init__(self, blocks: list[dict[str, Any]]) -> None:
            self.blocks = blocks

    messages = [_M(c.params["blocks"]) for c in layers]
    evidence = _block_evidence(messages)
    assert evidence and len(evidence) == len(set(evidence)), Counter(evidence).most_common(2)
    ids = [a for m in messages for a in _buttons(m)]
    assert ids.count("must_gather") == 1 and ids.count("cordon_node") == 1
    [cordon] = [
        e for m in messages for b in m.blocks if b["type"] == "actions" for e in b["elements"]
        if e["action_id"] == "cordon_node"
    ]  # fmt: skip
    assert "EKS auto repair, if on, replaces or reboots the node after 10 minutes" in json.dumps(
        cordon["confirm"]
    )
    said = json.dumps(root.params["blocks"], ensure_ascii=False)
    assert (
        "*Held by*" not in said and "EKS node monitoring agent reports AcceleratedHardwareReady=False" in said
    )
