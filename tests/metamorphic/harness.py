"""The metamorphic suite's corpus and walk: every bundled scenario and every test incident with an
`x-expect`, walked in-process from its dict (no subprocess), before and after a mutation. What is
compared: the verdict, and per layer its status and its fault and warn codes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.sources.scenario import build_sources, parse_scenario
from layers.findings import Severity
from layers.walk import walk
from tests.metamorphic.known_failures import KNOWN_FAILURES

ROOT = Path(__file__).resolve().parents[2]


def _files() -> list[Path]:
    found = sorted((ROOT / "bot" / "scenarios").glob("*.yaml"))
    for ext in ("yaml", "json"):
        found += sorted((ROOT / "tests" / "incidents").rglob(f"*.{ext}"))
    return found


_data: dict[Path, dict[str, Any]] = {}


def data(path: Path) -> dict[str, Any]:
    if path not in _data:
        text = path.read_text(encoding="utf-8")
        loaded = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=yaml.CSafeLoader)
        _data[path] = loaded if isinstance(loaded, dict) else {}
    return _data[path]


CORPUS = [p for p in _files() if "x-expect" in data(p)]


def case_id(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return (
        str(rel.with_suffix(""))
        .replace("/", ":")
        .removeprefix("bot:scenarios:")
        .removeprefix("tests:incidents:")
    )


Signature = tuple[str | None, tuple[tuple[int, str, tuple[str, ...]], ...]]


def signature(scenario: dict[str, Any], source: str) -> Signature:
    parsed = parse_scenario(scenario, source)
    cluster, telemetry = build_sources(parsed)
    ns, _, name = scenario["x-expect"]["target"].partition("/")
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


_before: dict[Path, Signature] = {}


def baseline(path: Path) -> Signature:
    if path not in _before:
        _before[path] = signature(data(path), str(path))
    return _before[path]


def cases(mutations: Iterable[str]) -> list[Any]:
    """(path, mutation) for the whole corpus; a known failure is a strict xfail naming its cause."""
    out = []
    for p in CORPUS:
        for m in mutations:
            why = KNOWN_FAILURES.get((case_id(p), m))
            marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
            out.append(pytest.param(p, m, id=f"{case_id(p)}--{m}", marks=marks))
    return out


def check_invariant(path: Path, mutation: Callable[[dict[str, Any]], dict[str, Any]], name: str) -> None:
    before = baseline(path)
    source = data(path)
    snapshot = json.dumps(source, sort_keys=True)
    after = signature(mutation(source), f"{path}#{name}")
    assert json.dumps(source, sort_keys=True) == snapshot, "a mutation changed its input"
    assert after == before, f"{name} changed the diagnosis:\n  before {before}\n  after  {after}"
