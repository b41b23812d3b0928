"""The digest's owner lines, in text and Block Kit (spec/findings.md, "Who else acts on a node",
the digest): each flagged node's owner and state, its health agents' conditions, and the nodes
an owner gave up on, listed apart because a person must take them.
"""

from __future__ import annotations

from typing import Any

from handlers.escape import escape
from layers.digest import Digest, FlaggedNode
from layers.owner_digest import OWNER_NEEDS_PERSON

NEEDS_PERSON_SHOWN = 10  # the rest are in the attached table


def owner_lines(f: FlaggedNode) -> list[str]:
    """Lines under a flagged node's head in the digest message."""
    out: list[str] = []
    held = f.owners.owner
    if held is not None:
        # The deciding owner (layers/nodepolicy.py): a holder with its phase, or an agent that reports.
        who = "reported by" if held.role == "reporter" else "owner:"
        phase = f" · {held.phase.replace('-', ' ')}" if held.phase != "running" else ""
        out.append(f"{who} *{escape(held.owner)}* ({escape(held.state)}){phase}")
    if f.owners.needs_person:
        out.append(f"a person must act: {escape(f.owners.needs_person)}")
    out += [f"health agent: {escape(c)}" for c in f.owners.conditions[:2]]
    return out


def _needs_person(digest: Digest) -> list[FlaggedNode]:
    return [f for f in digest.flagged if OWNER_NEEDS_PERSON in f.reasons]


def needs_person_text(digest: Digest) -> list[str]:
    """The text digest's owner section: who gave up on which node, and every flagged node's owner."""
    lines: list[str] = []
    gave_up = _needs_person(digest)
    if gave_up:
        lines.append(
            f"{OWNER_NEEDS_PERSON}: {len(gave_up)} node(s) an owner gave up on, a person must take them:"
        )
        lines += [f"  {f.node}: {f.owners.needs_person}" for f in gave_up]
    owned = [f for f in digest.flagged if f.owners.owner is not None]
    lines += [
        f"owner: {f.node}: {f.owners.owner.text} ({f.owners.owner.role}, {f.owners.owner.phase})"
        for f in owned
        if f.owners.owner is not None
    ]
    return lines


def needs_person_blocks(digest: Digest) -> list[dict[str, Any]]:
    gave_up = _needs_person(digest)
    if not gave_up:
        return []
    rows = [
        f"• *{escape(f.node)}*: {escape(f.owners.needs_person or '')}" for f in gave_up[:NEEDS_PERSON_SHOWN]
    ]
    more = len(gave_up) - NEEDS_PERSON_SHOWN
    if more > 0:
        rows.append(f"… {more} more in the attached table")
    text = f":sos: *An owner gave up on {len(gave_up)} node(s): a person must take them*\n" + "\n".join(rows)
    return [{"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}]
