"""Time every pattern that sees outside text on 64 KB of hostile input, and the patterns it replaced.

    python benchmarks/regex_bench.py [--kb 64]

For each pattern found by tests/hostile_text.py (every compiled pattern of bot/,
handlers/ and layers/), the slowest of its hostile inputs; then the v0.1 patterns
that issue 10 found quadratic, on the same inputs at 4, 8 and 16 KB (64 KB would
take minutes); then google-re2 against the stdlib engine on ordinary log lines,
which is why the stdlib engine was kept.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hostile_text import anchored, chunks_for, hostile, patterns, run

# v0.1's quadratic patterns, verbatim, with the input that shows it.
BEFORE = {
    "logs key=value `\\b[\\w-]*(?:password|…)`": (
        r"(?i)\b([\w-]*(?:password|passwd|secret|token|api[_-]?key))(['\"]?\s*[:=]\s*['\"]?)"
        r"(?!<masked>)[^\s'\",;&)}\]]+",
        "a-",
    ),
    "URL credentials `\\b[a-z][a-z0-9+.-]*://`": (r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@", "a-"),
    "device marked unhealthy `[\\w./-]+`": (
        r"""(?i)['"]?(?P<res>[\w./-]+)['"]?\s+device marked unhealthy:\s*(?P<dev>[^\s;,]+)""",
        "a",
    ),
    "scheduler `\\.?\\s*preemption`": (r"(?i)\.?\s*preemption\s*:", " "),
    "scheduler `(\\d+)\\s*/`": (r"(?i)(\d+)\s*/\s*(\d+)\s+nodes?\s+(?:are|is)\s+available", "0"),
}


def timed(fn: Any, *args: Any, **kw: Any) -> float:
    started = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=int, default=64)
    size = ap.parse_args().kb * 1024
    rows = []
    for where, pattern in patterns():
        at_start = anchored(where)
        worst, chunk = max(
            (timed(run, pattern, hostile(c, size), at_start=at_start), c) for c in chunks_for(pattern)
        )
        rows.append((worst, where, chunk))
    rows.sort(reverse=True)
    print(f"{len(rows)} patterns, {size // 1024} KB each; slowest hostile input per pattern:")
    for worst, where, chunk in rows[:8]:
        print(f"  {worst * 1000:8.1f} ms  {where}  ({chunk!r})")
    print(
        f"  all {len(rows)} under {rows[0][0] * 1000:.1f} ms; median {rows[len(rows) // 2][0] * 1000:.2f} ms"
    )
    print("v0.1's quadratic patterns (4 / 8 / 16 KB):")
    for name, (source, chunk) in BEFORE.items():
        p = re.compile(source)
        times = [timed(run, p, hostile(chunk, kb * 1024)) for kb in (4, 8, 16)]
        print(
            f"  {name}: " + " / ".join(f"{t:.2f} s" for t in times) + f"  (x{times[2] / times[0]:.0f} for x4)"
        )
    _re2_against_re()


def _re2_against_re() -> None:
    import re2  # google-re2, measured here only

    from layers.facts import logsigs

    lines = (
        Path(__file__).resolve().parent.parent
        / "tests/fixtures/samples/06_node_7_of_8_gpus_device_plugin_xid79.txt"
    )
    text = (
        lines.read_text() if lines.exists() else "I0624 22:58:05.486697 1 health.go:185] XidCriticalError\n"
    )
    sample = (text.splitlines() * 2000)[:20000]
    pats = [*logsigs.NO_RUNTIME_NVIDIA.compiled, *logsigs.APP_SEES_NO_GPU.compiled]
    opts = re2.Options()
    opts.case_sensitive = False
    compiled = []
    for p in pats:
        try:
            compiled.append((p, re2.compile(p.pattern, opts)))
        except (re2.error, UnicodeEncodeError):
            continue  # lookarounds, \uXXXX escapes, lone surrogates: re2 refuses them
    refused = 0
    for _, p in patterns():
        try:
            re2.compile(p.pattern, opts)
        except (re2.error, UnicodeEncodeError):  # a lone surrogate cannot be UTF-8 for re2
            refused += 1
    std = timed(lambda: [p.search(ln) for ln in sample for p, _ in compiled])
    lin = timed(lambda: [q.search(ln) for ln in sample for _, q in compiled])
    calls = len(sample) * len(compiled)
    print(
        f"ordinary log lines ({len(sample)} lines x {len(compiled)} signature patterns): "
        f"re {std / calls * 1e6:.2f} us/search, re2 {lin / calls * 1e6:.2f} us/search"
    )
    print(f"patterns re2 cannot compile (lookarounds, \\u escapes): {refused} of {len(list(patterns()))}")


if __name__ == "__main__":
    main()
