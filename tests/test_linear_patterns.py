"""Every pattern that runs on outside text takes linear time (issue 10, item 1).

A pattern with adjacent or nested unbounded quantifiers over overlapping
classes (`\\b[\\w-]*password` on `a-a-a-…`, `[a-z][a-z0-9+.-]*://` on a token
line) is quadratic: one 12 KB unsigned request froze the bot for 14 s. Each
pattern found by tests/hostile_text.py is run over 64 KB of each hostile
input; a linear one takes milliseconds, the bound is generous, and it is this
thread's CPU time, not wall time, so a loaded machine's waiting does not count. benchmarks/regex_bench.py prints the figures.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.hostile_text import SIZE, anchored, chunks_for, hostile, patterns, run

BOUND_S = 0.5
PATTERNS = list(patterns())


def test_the_patterns_of_every_module_are_found() -> None:
    found = {where.split(":", 1)[0] for where, _ in PATTERNS}
    assert {
        "bot.ops.secrets",
        "layers.facts.pluginlog",
        "layers.facts.logsigs",
        "layers.facts.driverlogs",
        "bot.actions.freetext",  # the bundle's default-deny masker (its whole pass: tests/test_freetext.py)
        "bot.sources.bounded",
    } <= found
    assert len(PATTERNS) > 100


@pytest.mark.parametrize(("where", "pattern"), PATTERNS, ids=[w for w, _ in PATTERNS])
def test_each_pattern_is_linear_on_64_kb_of_hostile_text(where: str, pattern: re.Pattern[str]) -> None:
    at_start = anchored(where)
    for chunk in chunks_for(pattern):
        text = hostile(chunk)
        started = time.thread_time()
        run(pattern, text, at_start=at_start)
        took = time.thread_time() - started
        assert took < BOUND_S, f"{where} took {took:.2f}s on {SIZE // 1024} KB of {chunk!r}"
