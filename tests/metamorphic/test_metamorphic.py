"""The metamorphic suite: every bundled scenario, walked in-process, then walked again after each
change of tests/metamorphic/mutations.py; the verdict, each layer's status and its fault/warn codes
must stay. Cases that fail for a cause in another helper's area are listed in KNOWN_FAILURES (see
KNOWN_FAILURES.md), strict xfails the lead removes after merging the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sources.scenario import build_sources, parse_scenario
from layers.findings import Severity
from layers.walk import walk
from tests.metamorphic.mutations import INVARIANT

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted((ROOT / "bot" / "scenarios").glob("*.yaml"))

# (scenario stem, mutation) -> why it fails today (KNOWN_FAILURES.md)
KNOWN_FAILURES: dict[tuple[str, str], str] = {}

_loaded: dict[Path, dict[str, Any]] = {}


def _data(path: Path) -> dict[str, Any]:
    if path not in _loaded:
        _loaded[path] = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    return _loaded[path]


def signature(data: dict[str, Any], source: str) -> tuple[Any, ...]:
    scenario = parse_scenario(data, source)
    cluster, telemetry = build_sources(scenario)
    ns, _, name = data["x-expect"]["target"].partition("/")
    result = walk(cluster, telemetry, ns, name)
    layers = tuple(
        (
            r.layer,
            r.status.label,
            tuple(sorted(f.code for f in r.findings if f.severity in (Severity.FAULT, Severity.WARN))),
        )
        for r in result.layers
    )
    return (result.verdict.code if result.verdict else None, layers)


CASES = [
    pytest.param(
        p,
        m,
        id=f"{p.stem}-{m}",
        marks=[pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[(p.stem, m)])]
        if (p.stem, m) in KNOWN_FAILURES
        else [],
    )
    for p in CORPUS
    for m in INVARIANT
]


@pytest.mark.parametrize(("path", "mutation"), CASES)
def test_a_change_that_must_not_matter_does_not(path: Path, mutation: str) -> None:
    data = _data(path)
    before = signature(data, str(path))
    after = signature(INVARIANT[mutation](data), f"{path}#{mutation}")
    assert after == before


def test_the_corpus_is_whole() -> None:
    assert len(CORPUS) >= 40
    assert all("x-expect" in _data(p) for p in CORPUS)
