"""Findings → terminal text and JSON. The same findings feed Slack (handlers/blocks.py)."""

from __future__ import annotations

import json
from typing import Any

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


def finding_text(f: Finding, style: Style, indent: str = "  ") -> list[str]:
    node = f" [{f.node}]" if f.node else ""
    lines = [f"{indent}{style.sev(f.severity, _MARK[f.severity])} {style.bold(f.code)}{node}"]
    lines.append(f"{indent}      {_clean(f.summary)}")
    for e in f.evidence:
        lines.append(f"{indent}      {style.dim('│')} {_clean(e)}")
    for c in f.commands:
        lines.append(f"{indent}      {style.dim('$')} {_clean(c)}")
    return lines


def layer_text(r: LayerResult, style: Style) -> list[str]:
    nxt = "walk ends" if r.next_layer is None else f"next → layer {r.next_layer}"
    head = f"Layer {r.layer} · {r.name}: {style.sev(r.status, r.status.label.upper())}  ({nxt})"
    lines = [style.bold(head)]
    for f in r.findings:
        lines += finding_text(f, style)
    return lines


def walk_text(w: WalkResult, colour: bool = False, source: str | None = None) -> str:
    style = Style(colour)
    t = w.target
    where = f" on node {t.node}" if t.node else (" (not scheduled)" if t.pod else "")
    lines = [style.bold(f"gpubot why {t.label}{where}")]
    if source:
        lines.append(style.dim(f"sources: {source}"))
    lines.append("")
    for r in w.layers:
        lines += layer_text(r, style)
        lines.append("")
    v = w.verdict
    if v is None:
        lines.append(style.sev(Severity.OK, "Verdict: every layer that ran is OK"))
    else:
        lines.append(
            style.bold("Verdict: ")
            + style.sev(v.severity, f"{v.code} (layer {v.layer})")
            + f" — {_clean(v.summary)}"
        )
    return "\n".join(lines)


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, ensure_ascii=False)


def walk_json(w: WalkResult) -> str:
    return to_json(w.to_dict())
