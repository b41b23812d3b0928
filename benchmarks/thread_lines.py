"""How long a thread reads (issue 27): every bundled scenario and test incident walked with
`why --all`, in-process, and counted.

    python benchmarks/thread_lines.py            # the table: median, mean, max per walk
    python benchmarks/thread_lines.py --each     # and one row per incident

Per walk: the lines of `--format text`; the evidence lines (`│ …`) that repeat one shown before
in the same walk; from `--format blocks`, the lines of evidence in the thread's code blocks that
repeat one before, every button, and the remediation buttons (Collect must-gather, Cordon,
Uncordon). Bundled scenarios (bot/scenarios) and test incidents (tests/incidents) are counted
apart and together. A scenario whose walk fails counts its error output and is listed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.compare_walks import cli, scenarios  # noqa: E402

REMEDY = {"must_gather", "cordon_node", "uncordon_node"}


@dataclass(frozen=True)
class Walk:
    ident: str
    bundled: bool
    lines: int
    repeated_text: int
    repeated_blocks: int
    buttons: int
    remedy_buttons: int
    failed: bool


def repeats(lines: list[str]) -> int:
    """Lines that are a copy of one before them."""
    return sum(n - 1 for n in Counter(lines).values() if n > 1)


def block_evidence(messages: list[dict[str, object]]) -> list[str]:
    """The evidence lines of every layer message: the text inside ``` of its sections."""
    out: list[str] = []
    for m in messages:
        for b in m.get("blocks") or []:  # type: ignore[attr-defined]
            text = ((b.get("text") or {}).get("text") or "") if b.get("type") == "section" else ""
            if text.startswith("```"):
                out += text.split("```")[1].splitlines()
    return out


def buttons(messages: list[dict[str, object]]) -> list[str]:
    return [
        e["action_id"]
        for m in messages
        for b in m.get("blocks") or []  # type: ignore[attr-defined]
        if b.get("type") == "actions"
        for e in b.get("elements") or []
    ]


def measure(ident: str, rel: Path, target: str) -> Walk:
    base = ["why", target, "--all", "--scenario", str(rel)]
    text = cli([*base, "--format", "text"], fresh=False)
    failed = "\nexit " in text
    evidence = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("│")]
    raw = cli([*base, "--format", "blocks"], fresh=False)
    try:
        messages = json.loads(raw)
    except json.JSONDecodeError:
        messages, failed = [], True
    acts = buttons(messages)
    return Walk(
        ident,
        rel.parts[0] == "bot",
        len(text.rstrip("\n").splitlines()),
        repeats(evidence),
        repeats(block_evidence(messages)),
        len(acts),
        sum(a in REMEDY for a in acts),
        failed,
    )


FIELDS = (
    ("lines", "text lines"),
    ("repeated_text", "repeated evidence lines (text)"),
    ("repeated_blocks", "repeated evidence lines (blocks)"),
    ("buttons", "buttons"),
    ("remedy_buttons", "must-gather/cordon buttons"),
)


def table(title: str, walks: list[Walk]) -> list[str]:
    out = [f"{title}: {len(walks)} walks", f"  {'per walk':34} {'median':>7} {'mean':>7} {'max':>5}"]
    for name, label in FIELDS:
        values = [getattr(w, name) for w in walks]
        if values:
            out.append(
                f"  {label:34} {statistics.median(values):7.1f} {statistics.fmean(values):7.1f} {max(values):5d}"
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--each", action="store_true", help="one row per incident too")
    args = ap.parse_args(argv)
    import os

    os.chdir(ROOT)
    walks = [measure(*s) for s in scenarios(None)]
    if args.each:
        for w in walks:
            print(
                f"{w.ident:90} lines {w.lines:4} rep {w.repeated_text:3}/{w.repeated_blocks:3} "
                f"buttons {w.buttons:3} remedy {w.remedy_buttons:3}" + (" FAILED" if w.failed else "")
            )
    for title, group in (
        ("bundled scenarios", [w for w in walks if w.bundled]),
        ("test incidents", [w for w in walks if not w.bundled]),
        ("all", walks),
    ):
        print("\n".join(table(title, group)))
    failed = [w.ident for w in walks if w.failed]
    if failed:
        print(f"{len(failed)} walk(s) failed: {', '.join(failed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
