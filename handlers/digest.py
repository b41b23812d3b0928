"""The daily digest → Slack: one message, its chart and (when long) the full list as a file.

Each flagged node gets its reasons, numbers and three buttons: diagnose the
node (`digest_diagnose`), collect a must-gather and cordon it (the walk's
action ids). Their value is `<digest id>|<node>`; the digest itself is kept in
the state store under `digest:<id>`, so buttons work after a restart and on any
replica. A message never exceeds Slack's limits: nodes that do not fit are
counted in the message and listed in full in the attached text file.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec

from handlers.blocks import (
    CORDON,
    MAX_BLOCKS,
    MESSAGE_BUDGET,
    MUST_GATHER,
    UNCORDON,
    Message,
    _button,
    _context,
    _section,
    cordon_confirm,
    uncordon_confirm,
)
from handlers.digest_owners import needs_person_blocks, needs_person_text, owner_lines
from handlers.escape import escape
from handlers.ledger_blocks import offender_blocks
from handlers.node_buttons import offer
from handlers.ports import Attachment, PostFailed, PostRef, SlackPoster, StateStore
from layers.digest import (
    ALLOCATABLE_BELOW_CAPACITY,
    REMAPPED_ROWS_RISING,
    ROW_REMAP_FAILURE,
    Digest,
    FlaggedNode,
    ResourceCount,
)
from layers.owner_digest import HEALTH_AGENT_CONDITION, NODE_NOT_READY, OWNER_NEEDS_PERSON

DIAGNOSE = "digest_diagnose"  # public action id (spec/interfaces.md lists the fixed ones)
DIGEST_KEY = "digest:{}"
# Where a digest was posted (channel id) -> its message ts: its buttons act only there.
DIGEST_POSTED = "digest:{}:posted:{}"
BEING_POSTED = ""  # DIGEST_POSTED's value while the message is on its way (its ts not yet known)
log = logging.getLogger("gpubot.digest")

_EMOJI = {
    ROW_REMAP_FAILURE: ":red_circle:",
    ALLOCATABLE_BELOW_CAPACITY: ":red_circle:",
    REMAPPED_ROWS_RISING: ":warning:",
    OWNER_NEEDS_PERSON: ":sos:",
    HEALTH_AGENT_CONDITION: ":red_circle:",
    NODE_NOT_READY: ":red_circle:",
}


def digest_id(digest: Digest) -> str:
    """Stable id of one digest run, e.g. `digest-20261129T090000Z`."""
    return "digest-" + digest.generated_iso.replace("-", "").replace(":", "")


def part_id(digest: Digest, cluster: str | None) -> str:
    """A cluster's part of a many-cluster digest: `digest-20261129T090000Z-eu-1` (the stamp has no '-')."""
    return digest_id(digest) + (f"-{cluster}" if cluster else "")


def cluster_of(did: str) -> str | None:
    """The cluster whose part a digest id names (None for a single cluster's digest)."""
    parts = did.split("-", 2)
    return parts[2] if len(parts) == 3 and parts[0] == "digest" and parts[2] else None


def button_value(did: str, node: str) -> str:
    return f"{did}|{node}"


def parse_button_value(value: str) -> tuple[str, str]:
    """(digest id, node) from a digest button's value; ValueError when it is not one."""
    did, sep, node = value.partition("|")
    if not sep or not did.startswith("digest-") or not node:
        raise ValueError(f"not a digest button value: {value[:80]!r}")
    return did, node


# --- text (the CLI and the attached full list) --------------------------------------------


def _replicas(r: ResourceCount) -> str:
    """What time-sliced numbers mean: they count replicas, the person counts GPUs."""
    if r.replicas <= 1:
        return ""
    return f" replicas = {r.gpu_allocatable} of {r.gpu_capacity} GPUs"


def _numbers(f: FlaggedNode) -> str:
    gaps = ", ".join(f"{r.resource} {r.capacity}/{r.allocatable}{_replicas(r)}" for r in f.gaps)
    return gaps or "-"


def digest_table(digest: Digest, sources: str | None = None) -> str:
    """A plain-text table of every flagged node, for terminals and the attached file. `sources`
    (the CLI's description of every source) stands in place of the metrics line: said once."""
    lines = [
        f"GPU digest {digest.generated_iso}: {len(digest.flagged)} of {digest.gpu_nodes} GPU node(s) flagged",
        f"sources: {sources}" if sources else f"metrics: {digest.metrics_source or 'none'}",
    ]
    if digest.metrics_error:
        lines.append(f"UNKNOWN: {digest.metrics_error}")
    lines += [f"note: {n}" for n in digest.notes]
    lines += needs_person_text(digest)
    if not digest.flagged:
        if digest.rows_read:
            lines.append(
                "All clear: no GPU node lost capacity, has rising remapped rows or a failed row remap."
            )
        else:
            lines.append("No GPU node lost capacity; remapped rows could not be read (see above).")
        return "\n".join(lines) + "\n"
    rows = [("NODE", "CAP", "ALLOC", "ROWS+24H C/U", "XIDS 24H", "CORDONED", "REASONS", "GAPS (cap/alloc)")]
    for f in digest.flagged:
        rows.append(
            (
                f.node,
                str(f.capacity),
                str(f.allocatable),
                f"{f.correctable_rows_24h}/{f.uncorrectable_rows_24h}" if digest.rows_read else "?",
                ",".join(map(str, f.xids_24h)) or "-",
                "yes" if f.cordoned else "no",
                ",".join(f.reasons),
                _numbers(f),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines.append("")
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1])
    return "\n".join(lines) + "\n"


# --- blocks ------------------------------------------------------------------------------------


def _node_text(f: FlaggedNode) -> str:
    emoji = _EMOJI.get(
        max(
            f.reasons,
            key=lambda r: (r == OWNER_NEEDS_PERSON, r == ROW_REMAP_FAILURE, r == ALLOCATABLE_BELOW_CAPACITY),
        ),
        ":warning:",
    )
    state = " · _cordoned_" if f.cordoned else ""
    parts = [f"{emoji} *{escape(f.node)}*{state} · " + " · ".join(f"`{r}`" for r in f.reasons)]
    parts += owner_lines(f)
    if f.gaps:
        gaps = ", ".join(
            f"{escape(r.resource)} {r.allocatable} of {r.capacity}{_replicas(r)}" for r in f.gaps
        )
        parts.append(f"allocatable {f.allocatable} of {f.capacity} ({gaps})")
    if f.correctable_rows_24h or f.uncorrectable_rows_24h:
        parts.append(
            f"remapped rows in 24 h: +{f.correctable_rows_24h} correctable, +{f.uncorrectable_rows_24h} uncorrectable"
        )
    if f.row_remap_failure:
        parts.append("a row remap *failed*: replace / RMA path")
    if f.xids_24h:
        parts.append("Xids: " + ", ".join(map(str, f.xids_24h)))
    if f.gpus:
        shown = ", ".join(escape(g) for g in f.gpus[:4])
        parts.append(f"GPUs: {shown}" + (f" +{len(f.gpus) - 4} more" if len(f.gpus) > 4 else ""))
    return "\n".join(parts)


def node_buttons(f: FlaggedNode, did: str, index: int) -> dict[str, Any]:
    value = button_value(did, f.node)
    elements = [
        _button("Diagnose", DIAGNOSE, value, style="primary"),
        _button("Collect must-gather", MUST_GATHER, value),
    ]
    # The decision table (layers/nodepolicy.py through handlers/node_buttons.py): Cordon where it is
    # offered, Uncordon only for gpubot's own cordon, never on a node an owner holds.
    can = offer(f.owners.policy, f.node) if f.owners.policy is not None else None
    if can is None:
        pass  # a node without its object: nothing known to offer beyond the diagnosis
    elif can.cordon:
        confirm = cordon_confirm(f.node, can.confirm)
        elements.append(_button("Cordon", CORDON, value, style="danger", confirm=confirm))
    elif can.uncordon:
        elements.append(_button("Uncordon", UNCORDON, value, confirm=uncordon_confirm(f.node)))
    return {"type": "actions", "block_id": f"digest_node_{index}", "elements": elements}


def digest_message(digest: Digest, did: str, day: str | None = None, cluster: str | None = None) -> Message:
    """The digest as one message; nodes that do not fit are counted and attached as a file.

    With `cluster` it is that cluster's part of a many-cluster digest (bot/cluster/), titled so."""
    day = day or digest.generated_iso[:10]
    title = f"GPU digest · {day}" + (f" · cluster {cluster}" if cluster else "")
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]
    head = f"{len(digest.flagged)} of {digest.gpu_nodes} GPU node(s) flagged"
    blocks.append(_context(f"{head} · metrics: {escape(digest.metrics_source or 'none')}"))
    if digest.metrics_error:
        blocks.append(
            _section(f":grey_question: *Metrics could not be read*: {escape(digest.metrics_error)}")
        )
    for note in digest.notes[:3]:
        blocks.append(_context(f":information_source: {escape(note)}"))
    attachments: list[tuple[str, str]] = []
    if not digest.flagged and not digest.rows_read:
        blocks.append(
            _section(
                ":grey_question: No GPU node lost capacity; remapped rows could not be read (see above)."
            )
        )
        return Message(text=f"GPU digest {day}: nothing flagged, metrics unread", blocks=blocks)
    if not digest.flagged:
        blocks.append(
            _section(
                ":white_check_mark: *All clear*: no GPU node lost capacity, has rising remapped rows "
                "or a failed row remap in the last 24 h."
            )
        )
        return Message(text=f"GPU digest {day}: all clear ({digest.gpu_nodes} GPU nodes)", blocks=blocks)
    blocks += needs_person_blocks(digest)
    size = len(json.dumps(blocks))
    shown = 0
    for i, f in enumerate(digest.flagged):
        pair = [_section(_node_text(f)), node_buttons(f, did, i)]
        cost = len(json.dumps(pair))
        # Keep two blocks spare for the "more in the file" line and the notes that did not fit.
        if len(blocks) + len(pair) > MAX_BLOCKS - 2 or size + cost > MESSAGE_BUDGET:
            break
        blocks.extend(pair)
        size += cost
        shown += 1
    hidden = len(digest.flagged) - shown
    # The ledger's section (handlers/ledger_blocks.py), in the blocks and bytes left.
    blocks += offender_blocks(
        digest.offenders, did, MAX_BLOCKS - 2 - len(blocks), MESSAGE_BUDGET + 1500 - size
    )
    if hidden or len(digest.notes) > 3:
        name = f"gpu-digest-{day}.txt"
        attachments.append((name, digest_table(digest)))
        if hidden:
            more = ", ".join(escape(f.node) for f in digest.flagged[shown : shown + 30])
            extra = " …" if hidden > 30 else ""
            blocks.append(
                _context(
                    f"… {hidden} more flagged node(s) ({more}{extra}): every node in the attached `{name}`"
                )
            )
    text = f"GPU digest {day}: {head}"
    return Message(text=text, blocks=blocks, attachments=attachments)


# --- posting ------------------------------------------------------------------------------------


class Posted(msgspec.Struct):
    ref: PostRef
    problems: list[str] = msgspec.field(default_factory=list)  # attachments that could not be added


def post_digest(
    poster: SlackPoster,
    channel: str,
    digest: Digest,
    *,
    did: str | None = None,
    day: str | None = None,
    chart_png: bytes | None = None,
    store: StateStore | None = None,
    retention_s: float = 14 * 86400,
    thread_ts: str | None = None,
    cluster: str | None = None,
    key: str | None = None,
) -> Posted:
    """Post the digest, then its chart and full list in the thread.

    With `thread_ts` (one cluster's part under a many-cluster root) the digest and its files go
    into that thread. With `key` the message is posted at most once (SlackPoster.post).

    The message itself failing raises PostFailed; a failed attachment is logged,
    reported in the thread when possible, and returned, since the digest did post.
    """
    did = did or part_id(digest, cluster)
    if store is not None:
        store.set(DIGEST_KEY.format(did), digest.to_dict(), retention_s)
    msg = digest_message(digest, did, day, cluster)
    if store is not None:
        # People see the message before Slack's answer (its ts) reaches us: a click in between must
        # not be refused as "not a digest this bot posted here". The channel is known already.
        store.set(DIGEST_POSTED.format(did, channel), BEING_POSTED, retention_s)
    try:
        ref = poster.post(channel, msg.text, msg.blocks, thread_ts=thread_ts, key=key)
    except PostFailed:
        if store is not None:
            store.delete(DIGEST_POSTED.format(did, channel))
        raise
    files_ts = thread_ts or ref.ts
    if store is not None:
        store.set(DIGEST_POSTED.format(did, ref.channel), ref.ts, retention_s)
    posted = Posted(ref)
    files: list[Attachment] = []
    if chart_png:
        name = f"gpu-digest-{day or digest.generated_iso[:10]}.png"
        files.append(Attachment(name, chart_png, "Remapped rows, 7 days"))
    files += [Attachment(name, content, "Every flagged node") for name, content in msg.attachments]
    for file in files:
        try:
            poster.upload(channel, file, thread_ts=files_ts)
        except PostFailed as err:
            log.error("digest %s: %s could not be attached: %s", did, file.filename, err.reason)
            posted.problems.append(f"{file.filename}: {err.reason}")
    if posted.problems:
        try:
            poster.post(channel, "Could not attach: " + "; ".join(posted.problems), thread_ts=files_ts)
        except PostFailed as err:
            log.error("digest %s: the note about missing attachments failed too: %s", did, err.reason)
    return posted
