"""Findings → terminal text and JSON. The same findings feed Slack (handlers/blocks.py).

Text shows the walk as layers/threadfold.py folds it (each evidence line once, a node's owner lines
where the node first appears, the verdict naming who holds the node); JSON keeps every finding's
full evidence (spec/interfaces.md's schema, key for key).
"""

from __future__ import annotations

import json
from typing import Any

from layers import threadfold
from layers.findings import Finding, LayerResult, Severity, WalkResult

_COLOUR = {
    Severity.OK: "32",  # green
    Severity.INFO: "36",  # cyan
    Severity.UNKNOWN: "35",  # magenta
    Severity.WARN: "33",  # yellow
    Severity.FAULT: "31",  # red
}
_MARK = {
    Severity.OK: "ok   ",
    Severity.INFO: "info ",
    Severity.UNKNOWN: "UNKN ",
    Severity.WARN: "WARN ",
    Severity.FAULT: "FAULT",
}


class Style:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def sev(self, severity: Severity, text: str) -> str:
        return f"\x1b[{_COLOUR[severity]}m{text}\x1b[0m" if self.colour else text

    def bold(self, text: str) -> str:
        return f"\x1b[1m{text}\x1b[0m" if self.colour else text

    def dim(self, text: str) -> str:
        return f"\x1b[2m{text}\x1b[0m" if self.colour else text


def _clean(text: str) -> str:
    """Cluster text must not drive the terminal: drop control characters (escape sequences)."""
    return "".join(ch if ch == "\t" or ch >= " " else "?" for ch in text)


def finding_text(
    f: Finding,
    style: Style,
    indent: str = "  ",
    evidence: tuple[str, ...] | None = None,
    refs: tuple[str, ...] = (),
) -> list[str]:
    """One finding; `evidence` and `refs`: its lines as the thread shows them (default: all)."""
    node = f" [{f.node}]" if f.node else ""
    lines = [f"{indent}{style.sev(f.severity, _MARK[f.severity])} {style.bold(f.code)}{node}"]
    lines.append(f"{indent}      {_clean(f.summary)}")
    for e in f.evidence if evidence is None else evidence:
        lines.append(f"{indent}      {style.dim('│')} {_clean(e)}")
    for ref in refs:
        lines.append(f"{indent}      {style.dim('↳ ' + _clean(ref))}")
    for c in f.commands:
        lines.append(f"{indent}      {style.dim('$')} {_clean(c)}")
    return lines


def layer_text(shown: threadfold.ShownLayer, style: Style) -> list[str]:
    r: LayerResult = shown.result
    nxt = "walk ends" if r.next_layer is None else f"next → layer {r.next_layer}"
    head = f"Layer {r.layer} · {r.name}: {style.sev(r.status, r.status.label.upper())}  ({nxt})"
    lines = [style.bold(head)]
    for s in shown.findings:
        lines += finding_text(s.finding, style, evidence=s.evidence, refs=s.refs)
    actions = [
        *([f"gpubot must-gather --node {shown.node}"] if shown.must_gather and shown.node else []),
        *([f"gpubot cordon {shown.node} --reason …"] if shown.cordon and shown.node else []),
    ]
    if actions:
        lines.append(f"  {style.dim('actions:')} " + "  ·  ".join(_clean(a) for a in actions))
    return lines


def verdict_text(w: WalkResult, style: Style) -> list[str]:
    v = threadfold.verdict(w)
    if v is None:
        return [style.sev(Severity.OK, "Verdict: every layer that ran is OK")]
    f = v.finding
    on = f" on {v.node}" if v.node else ""
    line = (
        style.bold("Verdict: ")
        + style.sev(f.severity, f"{f.code} (layer {f.layer}){on}")
        + f" — {_clean(v.what)}"
    )
    if v.holder:
        line += f"; {style.bold('held by')} {_clean(v.holder)}"
    if v.next_step:
        line += f"; {style.bold('next:')} {_clean(v.next_step)}"
    return [line]


def walk_text(w: WalkResult, colour: bool = False, source: str | None = None) -> str:
    style = Style(colour)
    t = w.target
    where = f" on node {t.node}" if t.node else (" (not scheduled)" if t.pod else "")
    lines = [style.bold(f"gpubot why {t.label}{where}")]
    if source:
        lines.append(style.dim(f"sources: {source}"))
    lines.append("")
    thread = threadfold.fold(t, w.layers)
    for shown in thread.layers:
        lines += layer_text(shown, style)
        lines.append("")
    lines += verdict_text(w, style)
    return "\n".join(lines)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False)


def walk_json(w: WalkResult) -> str:
    """The spec's schema, key for key: every finding's full evidence (what the text folds is here)."""
    return to_json(w.to_dict())
