"""Findings → Slack Block Kit. Pure: no Slack client, no I/O.

Every message stays inside Slack's limits (50 blocks, 3,000 characters a
section, ~13k in all). Evidence that does not fit is never cut silently: the
message says so and the full text travels as an attachment the poster uploads.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec

from handlers.escape import escape, escape_code
from layers import threadfold
from layers.findings import LayerResult, Severity, Target, WalkResult

# Action ids are public (spec/interfaces.md): never rename.
DESCEND, JUMP, WALK_ALL = "layer_descend", "layer_jump", "walk_all"
MUST_GATHER, CORDON, UNCORDON = "must_gather", "cordon_node", "uncordon_node"

SECTION_MAX = 3000
MESSAGE_BUDGET = 11000  # below the undocumented ~13k total cap, with room for buttons
MAX_BLOCKS = 50

EMOJI = {
    Severity.OK: ":white_check_mark:",
    Severity.INFO: ":information_source:",
    Severity.UNKNOWN: ":grey_question:",
    Severity.WARN: ":warning:",
    Severity.FAULT: ":red_circle:",
}


class Message(msgspec.Struct):
    """One Slack message: fallback text, blocks, and files to attach in its thread."""

    text: str
    blocks: list[dict[str, Any]]
    attachments: list[tuple[str, str]] = msgspec.field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "blocks": self.blocks}
        if self.attachments:
            out["attachments_to_upload"] = [name for name, _ in self.attachments]
        return out


def node_in_question(target: Target, *results: LayerResult) -> str | None:
    """The node a message's must-gather and cordon buttons act on (layers/threadfold.py)."""
    return threadfold.node_in_question(target, *results)


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[:SECTION_MAX]}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:SECTION_MAX]}]}


def _button(text: str, action_id: str, value: str, style: str | None = None, **extra: Any) -> dict[str, Any]:
    b: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": text[:75]},
        "action_id": action_id,
        "value": value[:2000],
    }
    if style:
        b["style"] = style
    b.update(extra)
    return b


# Slack's confirm dialog: title 100, text 300, confirm/deny 30 characters, else the whole message is rejected.
CONFIRM_TEXT_MAX = 300
SHOWN_NODE_MAX = 200  # a node name may be 253 characters


def shown_node(node: str) -> str:
    """A node name short enough for a confirm dialog (the full name is in the message itself)."""
    return node if len(node) <= SHOWN_NODE_MAX else node[:SHOWN_NODE_MAX] + "…"


def _confirm(title: str, text: str, confirm: str, style: str) -> dict[str, Any]:
    return {
        "title": {"type": "plain_text", "text": title[:100]},
        "text": {"type": "mrkdwn", "text": text[:CONFIRM_TEXT_MAX]},
        "confirm": {"type": "plain_text", "text": confirm[:30]},
        "deny": {"type": "plain_text", "text": "Cancel"},
        "style": style,
    }


def cordon_confirm(node: str, after: Sequence[str] = ()) -> dict[str, Any]:
    """`after`: what the platform does next (layers/facts/cordons.py, cordon_notes), said first."""
    what = f"Cordon *{escape(shown_node(node))}*: no new pods will be scheduled there. Running pods stay."
    if after:
        what = " ".join(escape(a) for a in after) + " " + what
    return _confirm("Cordon this node?", what, "Cordon", "danger")


def uncordon_confirm(node: str) -> dict[str, Any]:
    return _confirm(
        "Uncordon this node?",
        f"Uncordon *{escape(shown_node(node))}*: new pods may be scheduled there again.",
        "Uncordon",
        "primary",
    )


def uncordon_actions(walk_id: str, node: str, layer: int | None) -> dict[str, Any]:
    """The `uncordon_node` button under the audit line of a cordon the bot made.

    Its block id names the layer the cordon was clicked from (`layer<N>_undo`), so the
    uncordon resolves the same node the cordon did.
    """
    button = _button(f"Uncordon {node}", UNCORDON, walk_id, confirm=uncordon_confirm(node))
    block_id = f"layer{layer}_undo" if layer is not None else "cordon_undo"
    return {"type": "actions", "block_id": block_id, "elements": [button]}


def nav_buttons(result: LayerResult, walk_id: str, done: set[int]) -> list[dict[str, Any]]:
    """Descend / jump / walk-all, for anyone, to the layers not done yet."""
    nav: list[dict[str, Any]] = []
    following = result.layer + 1
    nxt = result.next_layer
    if following <= 5 and following not in done:
        nav.append(_button(f"Descend to layer {following}", DESCEND, walk_id))
    if nxt is not None and nxt != following and nxt not in done:
        nav.append(_button(f"Jump to layer {nxt}", JUMP, walk_id, style="primary"))
    if any(n not in done for n in range(1, 6)):
        nav.append(_button("Walk all layers", WALK_ALL, walk_id))
    return nav


def remedy_buttons(shown: threadfold.ShownLayer, walk_id: str) -> list[dict[str, Any]]:
    """Must-gather and Cordon as the thread decided them for this message (layers/threadfold.py):
    Cordon where the message's findings fault or warn about the node and the owners' policy offers
    it, its confirmation repeating the owner line and the platform's next step; Must-gather once per
    node and walk."""
    node = shown.node
    remedy: list[dict[str, Any]] = []
    if node and shown.must_gather:
        remedy.append(_button("Collect must-gather", MUST_GATHER, walk_id))
    if node and shown.cordon:
        confirm = cordon_confirm(node, shown.cordon_notes)
        remedy.append(_button(f"Cordon {node}", CORDON, walk_id, style="danger", confirm=confirm))
    return remedy


def layer_buttons(shown: threadfold.ShownLayer, walk_id: str, done: set[int]) -> dict[str, Any] | None:
    """The message's actions block. After a fault in layer 5 the remediation buttons come first (spec)."""
    result = shown.result
    nav, remedy = nav_buttons(result, walk_id, done), remedy_buttons(shown, walk_id)
    first = (result.layer == 5 and result.status == Severity.FAULT) or shown.gather_first
    elements = remedy + nav if first else nav + remedy
    if not elements:
        return None
    return {"type": "actions", "block_id": f"layer{result.layer}_actions", "elements": elements[:25]}


def _finding_blocks(s: threadfold.ShownFinding, budget: int) -> tuple[list[dict[str, Any]], str | None]:
    """Blocks for one finding as the thread shows it (each evidence line once in the walk, refs to
    where the rest is); returns the evidence text when it did not fit (for the attachment)."""
    f, evidence = s.finding, s.evidence
    where = f" · `{escape(f.node)}`" if f.node else ""
    head = f"{EMOJI[f.severity]} *{f.severity.label.upper()}* `{f.code}`{where}\n{escape(f.summary)}"
    if s.refs:
        head += "\n" + "\n".join(f"_↳ {escape(ref)}_" for ref in s.refs)
    blocks = [_section(head)]
    overflow: str | None = None
    if evidence:
        full = "\n".join(evidence)
        body = escape_code(full)
        room = min(SECTION_MAX - 40, max(200, budget))
        if len(body) + 8 > room:
            overflow = full
            kept: list[str] = []
            size = 0
            for line in evidence:
                piece = escape_code(line)
                if size + len(piece) + 1 > room - 120:
                    break
                kept.append(piece)
                size += len(piece) + 1
            more = len(evidence) - len(kept)
            note = f"\n… {more} more line(s): full evidence in the attached file"
            blocks.append(_section("```" + "\n".join(kept) + "```" + note))
        else:
            blocks.append(_section("```" + body + "```"))
    if f.commands:
        cmds = "\n".join(escape_code(c) for c in f.commands)
        blocks.append(_context("Re-run: ```" + cmds[: SECTION_MAX - 20] + "```"))
    return blocks, overflow


def layer_message(
    result: LayerResult,
    walk_id: str,
    node: str | None,
    done: set[int] | None = None,
    cluster_name: str | None = None,
    *,
    target: Target | None = None,
    earlier: Sequence[LayerResult] = (),
) -> Message:
    """The thread message for one layer: findings by severity, evidence, commands, buttons.

    `earlier`: the layers already in the thread (what they showed is not shown again, a node's
    must-gather they offered is not offered again); `target`: the walk's, else a walk of `node`."""
    target = target or Target(namespace=None, pod=None, node=node)
    shown = threadfold.fold(target, [result], [r for r in earlier if r.layer != result.layer]).layers[0]
    if node != shown.node:  # the caller's node is the one a click acts on: no button for another
        shown = msgspec.structs.replace(shown, node=node, cordon=False, must_gather=False)
    return _message(shown, walk_id, done, cluster_name)


def _message(
    shown: threadfold.ShownLayer, walk_id: str, done: set[int] | None, cluster_name: str | None
) -> Message:
    result = shown.result
    done = set(done or ()) | {result.layer}
    title = f"Layer {result.layer} · {result.name}: {result.status.label.upper()}"
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]
    nxt = result.next_layer
    track = "the walk ends here" if nxt is None else f"next: layer {nxt}"
    ctx = f"{EMOJI[result.status]} {len(result.findings)} finding(s) · {track}"
    if cluster_name:
        ctx += f" · cluster `{escape(cluster_name)}`"
    blocks.append(_context(ctx))
    overflow_parts: list[str] = []
    findings = list(shown.findings)
    per_finding = max(400, (MESSAGE_BUDGET - 1500) // max(1, len(findings)))
    size = 0
    for i, f in enumerate(findings):
        fb, overflow = _finding_blocks(f, per_finding)
        fsize = len(json.dumps(fb))
        if len(blocks) + len(fb) > MAX_BLOCKS - 3 or size + fsize > MESSAGE_BUDGET:
            rest = findings[i:]
            blocks.append(_context(f"… {len(rest)} more finding(s) in the attached file"))
            for r in rest:
                overflow_parts.append(_finding_text(r))
            break
        blocks.extend(fb)
        size += fsize
        if overflow is not None:
            overflow_parts.append(_finding_text(f))
    buttons = layer_buttons(shown, walk_id, done)
    if buttons:
        blocks.append(buttons)
    attachments = []
    if overflow_parts:
        attachments.append((f"layer{result.layer}-evidence.txt", "\n\n".join(overflow_parts)))
    text = f"Layer {result.layer} ({result.name}): {result.status.label}"
    return Message(text=text, blocks=blocks, attachments=attachments)


def _finding_text(s: threadfold.ShownFinding) -> str:
    f = s.finding
    lines = [f"[{f.severity.label}] {f.code}" + (f" ({f.node})" if f.node else ""), f.summary]
    lines += ["evidence:"] + [f"  {e}" for e in s.evidence] + [f"  ↳ {ref}" for ref in s.refs]
    lines += ["re-run:"] + [f"  {c}" for c in f.commands]
    return "\n".join(lines)


def track_line(walk: WalkResult) -> str:
    """The one-line layer track: which layers ran and their status."""
    parts = [f"{EMOJI[r.status]} L{r.layer} {r.name}" for r in walk.layers]
    return "  →  ".join(parts) if parts else "walking…"


def root_message(
    walk: WalkResult,
    requester: str | None,
    cluster_name: str | None = None,
    running: bool = False,
    stopped: str | None = None,
) -> Message:
    """The walk's root: who asked, the layer track, then the verdict (or why the walk `stopped`)."""
    t = walk.target
    who = f"<@{requester}> asked: " if requester else ""
    node = f" on node `{escape(t.node)}`" if t.node else " (not scheduled)" if t.pod else ""
    subject = f"`{escape(t.label)}`"
    head = f"{who}why is {subject} failing?{node}"
    if cluster_name:
        head += f" · cluster `{escape(cluster_name)}`"
    track = track_line(walk) if walk.layers or not stopped else "no layer ran"
    blocks: list[dict[str, Any]] = [_section(head), _context(track + (" …" if running else ""))]
    v = walk.verdict
    if stopped:
        blocks.append(_section(f":x: *Stopped*: {escape(stopped)}"))
    elif v is not None and not running:
        blocks.append(_section(verdict_text(walk)))
    elif not running:
        blocks.append(_section(":white_check_mark: Every layer that ran is OK."))
    text = f"gpubot: {t.label}"
    return Message(text=text, blocks=blocks)


def verdict_text(walk: WalkResult) -> str:
    """The root's verdict: what is wrong, on which node, who holds it, the one next step."""
    line = threadfold.verdict(walk)
    if line is None:
        return ":white_check_mark: Every layer that ran is OK."
    f = line.finding
    on = f" on `{escape(line.node)}`" if line.node else ""
    text = f"*Verdict* (layer {f.layer}): {EMOJI[f.severity]} `{f.code}`{on} {escape(line.what)}"
    if line.holder:
        text += f"\n*Held by* {escape(line.holder)}"
    if line.next_step:
        text += f"\n*Next:* {escape(line.next_step)}"
    return text


def walk_messages(walk: WalkResult, walk_id: str = "cli", requester: str | None = None) -> list[Message]:
    """The root message and one thread message per layer, as the bot would post them."""
    done = {r.layer for r in walk.layers}
    msgs = [root_message(walk, requester)]
    for shown in threadfold.fold(walk.target, walk.layers).layers:
        msgs.append(_message(shown, walk_id, done, None))
    return msgs
