"""`gpubot demo`: walk every bundled incident and show what the bot finds.

No cluster, Slack or Redis: each scenario is its own cluster and metrics.
On a terminal it pauses between incidents; piped, it runs through and ends.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from bot.render import Style, finding_text
from bot.scenario import Scenario, build_sources, load_scenario
from bot.sources import bundled_scenarios
from layers.findings import Severity, WalkResult
from layers.walk import walk


@dataclass
class DemoCase:
    scenario: Scenario
    stem: str
    result: WalkResult
    problems: list[str]


def expectation_problems(expect: dict[str, Any], result: WalkResult) -> list[str]:
    """How a walk differs from the scenario's `x-expect` (empty when it matches)."""
    problems: list[str] = []
    ran = [r.layer for r in result.layers]
    if "walk" in expect and list(expect["walk"]) != ran:
        problems.append(f"walked layers {ran}, expected {expect['walk']}")
    verdict = result.verdict.code if result.verdict else None
    if "verdict" in expect and expect["verdict"] != verdict:
        problems.append(f"verdict {verdict}, expected {expect['verdict']}")
    codes = {f.code for r in result.layers for f in r.findings}
    missing = [c for c in expect.get("codes", []) if c not in codes]
    if missing:
        problems.append(f"missing codes {missing}")
    return problems


def run_case(stem: str, sc: Scenario) -> DemoCase:
    expect: dict[str, Any] = sc.extra.get("x-expect") or {}
    target = str(expect.get("target", ""))
    ns, _, pod = target.partition("/")
    cluster, telemetry = build_sources(sc)
    result = walk(cluster, telemetry, ns, pod)
    return DemoCase(sc, stem, result, expectation_problems(expect, result) if expect else [])


def _print_case(i: int, n: int, case: DemoCase, style: Style) -> None:
    r = case.result
    print(style.bold(f"[{i}/{n}] {case.scenario.name}"))
    print("   " + " ".join(case.scenario.description.split()))
    print(style.dim(f"   $ gpubot why {r.target.label} --scenario {case.stem}"))
    track = "  →  ".join(
        f"L{x.layer} {x.name} {style.sev(x.status, x.status.label.upper())}" for x in r.layers
    )
    print(f"   {track}")
    v = r.verdict
    if v is None:
        print("   verdict: " + style.sev(Severity.OK, "all OK"))
    else:
        for line in finding_text(v, style, indent="   "):
            print(line)
    if case.problems:
        print(style.sev(Severity.FAULT, "   ✗ unexpected: " + "; ".join(case.problems)))
    else:
        print(style.sev(Severity.OK, "   ✓ diagnosed as expected"))
    print()


def run_demo(fmt: str = "text", interactive: bool = False, colour: bool = False) -> int:
    paths = bundled_scenarios()
    cases = []
    style = Style(colour)
    if fmt == "text":
        print(style.bold(f"gpubot demo: {len(paths)} bundled GPU incidents, diagnosed offline\n"))
    for i, path in enumerate(paths, 1):
        case = run_case(path.stem, load_scenario(path))
        cases.append(case)
        if fmt == "text":
            _print_case(i, len(paths), case, style)
            if interactive and i < len(paths):
                try:
                    answer = input(style.dim("Enter: next incident · q: quit › "))
                except EOFError:  # Ctrl-D at the prompt: the same as q
                    print()
                    break
                if answer.strip().lower().startswith("q"):
                    break
    bad = [c for c in cases if c.problems]
    if fmt == "json":
        out = [
            {
                "scenario": c.stem,
                "walk": c.result.to_dict(),
                "as_expected": not c.problems,
                "problems": c.problems,
            }
            for c in cases
        ]
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        ok = len(cases) - len(bad)
        print(style.bold(f"{ok}/{len(cases)} incidents diagnosed as expected"))
    if bad:
        print(f"gpubot: {len(bad)} scenario(s) not diagnosed as expected", file=sys.stderr)
        return 1
    return 0
