"""Slack messages of the ledger and the diagnostics: the digest's "Repeat offenders and RMA
candidates" section, `/gpu node`'s reply, the Run diagnostics confirmation and the result.

Every value from the cluster (node names, GPU UUIDs, DCGM's warning texts) is escaped: shown
as text, never as markup (spec/interfaces.md, "Slack").
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from handlers.blocks import MUST_GATHER, Message, _button, _confirm, _context, _section, shown_node
from handlers.escape import escape
from layers.diaggpus import coverage
from layers.facts.dcgmdiag import DiagReport, result_lines

RUN_DIAGNOSTICS = "run_diagnostics"  # action id of the Run diagnostics button
DIAGNOSE = "digest_diagnose"  # the digest's Diagnose (handlers/digest.py)
OFFENDERS_TITLE = "Repeat offenders and RMA candidates"
MAX_OFFENDERS = 10  # rows in the message; the rest are counted (the export has them all)
_BUTTON_LEVEL = 2  # the button runs level 2; level 3 is offered after it, behind a second confirmation


_TOKEN = re.compile(r"t\.[0-9a-f]{16,64}")


class DiagValue(msgspec.Struct, frozen=True):
    """A Run diagnostics button's value: `diag|<node>|<level>|<confirmations given>`, or, on the
    button of level 3's second confirmation, `diag|<node>|3|t.<token>`: the confirmation itself is
    held by gpubot in the state store under the token (bot/slack/ledger_slack.py), never carried
    in the value, so a value that claims two confirmations (`…|3|2`) is refused."""

    node: str
    level: int
    confirmed: int
    token: str = ""

    def encode(self) -> str:
        return f"diag|{self.node}|{self.level}|{'t.' + self.token if self.token else self.confirmed}"

    @classmethod
    def decode(cls, value: str) -> DiagValue:
        parts = value.split("|")
        if (
            len(parts) != 4
            or parts[0] != "diag"
            or not parts[1]
            or not parts[2].isascii()
            or not parts[2].isdigit()
            or not ((parts[3].isascii() and parts[3].isdigit()) or _TOKEN.fullmatch(parts[3]))
        ):
            raise ValueError(f"not a Run diagnostics value: {value[:80]!r}")
        if parts[3].startswith("t."):
            return cls(parts[1], int(parts[2]), 1, parts[3][2:])
        return cls(parts[1], int(parts[2]), int(parts[3]))


def diag_button(
    node: str, level: int = _BUTTON_LEVEL, confirmed: int = 1, *, text: str = "Run diagnostics"
) -> dict[str, Any]:
    """Slack's confirm dialog is the first confirmation: the click arrives with `confirmed` given."""
    takes = {1: "seconds", 2: "about two minutes", 3: "about fifteen minutes"}.get(level, "")
    body = (
        f"DCGM diagnostics level {level} on *{escape(shown_node(node))}*: a Job takes every allocatable GPU "
        f"for {takes}; GPUs the plugin withdrew are not tested (named before it starts). Operators only."
    )
    return _button(
        text,
        RUN_DIAGNOSTICS,
        DiagValue(node, level, confirmed).encode(),
        confirm=_confirm("Run DCGM diagnostics?", body, f"Run level {level}", "danger"),
    )


def offender_blocks(
    offenders: Sequence[Any], button_value: str | None, room: int, budget: int = 6000
) -> list[dict[str, Any]]:
    """The section: a title, then per rule met its row and buttons (Diagnose, Run diagnostics,
    Must-gather), within `room` blocks and `budget` bytes of JSON; rows that do not fit are counted."""
    if not offenders or room < 3:
        return []
    blocks: list[dict[str, Any]] = [_section(f"*{OFFENDERS_TITLE}*")]
    shown = 0
    used = 200
    for i, off in enumerate(offenders[:MAX_OFFENDERS]):
        if len(blocks) + 2 > room - 1 or used > budget - 900:  # a row and its buttons are < 900 bytes
            break
        gpu = escape(off.gpu) if off.gpu else "the node"
        serial = f" (serial {escape(off.serial)})" if off.serial else ""
        since = off.to_dict()["since"]
        blocks.append(
            _section(
                f":rotating_light: `{off.reason}` · {gpu}{serial} on *{escape(off.node)}* since {since}\n"
                f"{escape(off.detail)} → {escape(off.action)}"
            )
        )
        value = f"{button_value}|{off.node}" if button_value else off.node
        blocks.append(
            {
                "type": "actions",
                "block_id": f"digest_offender_{i}",
                "elements": [
                    _button("Diagnose", DIAGNOSE, value, style="primary"),
                    diag_button(off.node),
                    _button("Must-gather", MUST_GATHER, value),
                ],
            }
        )
        used += len(json.dumps(blocks[-2:]))
        shown += 1
    if len(offenders) > shown:
        blocks.append(
            _context(f"… {len(offenders) - shown} more: `gpubot ledger export --format csv` lists them all")
        )
    return blocks


def node_ledger_message(ledger: Mapping[str, Any], chart: str | None) -> Message:
    """`/gpu node NODE`: the rules met first, then each GPU with events, the node's own events."""
    node = escape(ledger["node"])
    owner = ledger.get("owner")
    owned = f" · owner *{escape(owner['name'])}* ({escape(owner['state'])})" if owner else ""
    events = ledger["events"] + [e for g in ledger["gpus"] for e in g["events"]]
    blocks: list[dict[str, Any]] = [
        _section(f":card_index: *Ledger of {node}*{owned} · {len(events)} event(s) in {ledger['days']} days")
    ]
    rules = list(ledger["rules"]) + [dict(r, gpu=g["uuid"]) for g in ledger["gpus"] for r in g["rules"]]
    if rules:
        lines = [
            f"• `{r['reason']}` on {escape(r.get('gpu') or 'the node')} since {r['since']}: {escape(r['detail'])} → {escape(r['action'])}"
            for r in rules
        ]
        blocks.append(_section("*Rules met*\n" + "\n".join(lines)))
    else:
        blocks.append(_section(":white_check_mark: no repeat-offender or RMA rule met"))
    for g in ledger["gpus"]:
        if not g["events"]:
            continue
        index = f"GPU {g['index']} " if g["index"] is not None else ""
        serial = f" · serial {escape(g['serial'])}" if g["serial"] else ""
        lines = [_event_line(e) for e in g["events"][-8:]]
        more = len(g["events"]) - len(lines)
        lines += [f"… {more} earlier"] if more > 0 else []
        blocks.append(_section(f"*{index}{escape(g['uuid'])}*{serial}\n" + "\n".join(lines)))
        if len(blocks) > 40:
            break
    if ledger["events"]:
        blocks.append(_section("*Node*\n" + "\n".join(_event_line(e) for e in ledger["events"][-8:])))
    quiet = sum(1 for g in ledger["gpus"] if not g["events"])
    notes = [f"{quiet} GPU(s) without events"] if quiet else []
    notes += [escape(p) for p in ledger.get("problems", [])[:2]]
    if chart:
        notes.append(f"timeline in `{chart}`")
    if notes:
        blocks.append(_context(" · ".join(notes)))
    refused = (owner or {}).get("diagnostics")  # the owners' table (layers/nodepolicy.py) refuses them
    if refused:
        blocks.append(_context(f"Run diagnostics is not offered: {escape(refused)}"))
    else:
        blocks.append(
            {"type": "actions", "block_id": "node_ledger", "elements": [diag_button(ledger["node"])]}
        )
    text = f"Ledger of {ledger['node']}: {len(rules)} rule(s) met, {len(events)} event(s)"
    return Message(text=text, blocks=blocks[:50])


def _event_line(e: Mapping[str, Any]) -> str:
    xid = f" {e['xid']}" if e.get("xid") is not None else ""
    who = escape(e.get("actor") or ", ".join(e.get("seen_by") or [e.get("source") or ""]))
    detail = escape(str(e.get("detail") or ""))[:160]
    return f"`{e['at']}` {e['kind']}{xid} ({who}) {detail}"


def diag_started(node: str, level: int, job: str, user: str, confirmation: str) -> str:
    return (
        f":stethoscope: <@{user}> started DCGM diagnostics level {level} on *{escape(node)}* (Job `{escape(job)}`). "
        + escape(confirmation)
    )


def diag_result_message(
    node: str,
    level: int,
    job: str,
    report: DiagReport | None,
    failure: str | None,
    tested: Mapping[int, str],
    notes: Sequence[str] = (),
    untested: Sequence[str] = (),
) -> Message:
    """One message: a line per failed or warned test and GPU with DCGM's text, the rest counted
    (the raw JSON is attached beside it), the GPUs tested by UUID and those not tested; or why the
    Job gave no result. A pass with GPUs untested is no pass for the node."""
    if report is None:
        text = f":x: DCGM diagnostics level {level} on *{escape(node)}* gave no result: {escape(failure or 'unknown')}"
        blocks = [_section(text), _context(f"Job `{escape(job)}` deleted")]
        return Message(text=f"DCGM diagnostics on {node}: no result", blocks=blocks)
    names = {i: f"GPU {i} ({u})" for i, u in tested.items() if u}
    head, lines, rest = result_lines(report, names)
    verdict = "Incomplete" if report.verdict == "Pass" and untested else report.verdict
    if verdict == "Incomplete":
        head += f" on the GPUs tested, {len(untested)} not tested: not a pass for the node"
    emoji = {"Pass": ":white_check_mark:", "Warn": ":warning:", "Incomplete": ":warning:"}.get(verdict, ":x:")
    blocks = [_section(f"{emoji} *{escape(head)}* · level {level} on *{escape(node)}*")]
    for start in range(0, min(len(lines), 40), 10):
        blocks.append(_section("\n".join(f"• {escape(line)}" for line in lines[start : start + 10])))
    if len(lines) > 40:
        blocks.append(_context(f"… {len(lines) - 40} more failed results in the attached JSON"))
    blocks.append(_section(escape(coverage(tested, untested))))
    blocks.append(_context(escape(rest) + "".join(f" · {escape(n)}" for n in notes)))
    if level < 3 and verdict == "Pass":
        blocks.append(
            {
                "type": "actions",
                "block_id": "diag_next",
                "elements": [diag_button(node, 3, 1, text="Run level 3 (about 15 minutes)")],
            }
        )
    return Message(text=f"DCGM diagnostics on {node}: {verdict}", blocks=blocks)


def second_confirmation(node: str, token: str, said: str = "") -> Message:
    """Level 3's second confirmation, sent to the operator who clicked (ephemeral); its button names
    the confirmation gpubot holds (`token`), which only that operator can use, once. `said`: what the
    Job would take and test (layers/diagjob.py `confirmation`)."""
    text = (
        f":warning: Level 3 takes every allocatable GPU of *{escape(node)}* for about fifteen minutes and "
        "stresses them (power, memory bandwidth). Confirm once more to run it."
    )
    if said:
        text += "\n" + escape(said)
    button = _button(
        "Yes, run level 3",
        RUN_DIAGNOSTICS,
        DiagValue(node, 3, 1, token).encode(),
        confirm=_confirm(
            "Run DCGM diagnostics level 3?",
            f"Level 3 on *{escape(shown_node(node))}*: about fifteen minutes of every GPU. Operators only.",
            "Run level 3",
            "danger",
        ),
    )
    return Message(
        text=f"Confirm level 3 on {node}", blocks=[_section(text), {"type": "actions", "elements": [button]}]
    )
