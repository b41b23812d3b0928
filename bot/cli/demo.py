"""`gpubot demo` and `gpubot scenarios`: the bundled incidents, listed or walked.

`demo` walks every bundled incident and shows what the bot finds.

No cluster, Slack or Redis: each scenario is its own cluster and metrics.
On a terminal it pauses between incidents; piped, it runs through and ends.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from bot.cli.args import EXIT_OK, colour

if TYPE_CHECKING:
    from bot.render import Style
    from bot.sources.scenario import Scenario
    from layers.findings import WalkResult

# The walk, the scenarios and the renderer are imported when a command runs, not when
# `gpubot` builds its parser: every other command would pay for them.


class DemoCase(msgspec.Struct):
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
    from bot.sources.scenario import build_sources
    from layers.walk import walk

    expect: dict[str, Any] = sc.extra.get("x-expect") or {}
    target = str(expect.get("target", ""))
    ns, _, pod = target.partition("/")
    cluster, telemetry = build_sources(sc)
    result = walk(cluster, telemetry, ns, pod)
    return DemoCase(sc, stem, result, expectation_problems(expect, result) if expect else [])


def _print_case(i: int, n: int, case: DemoCase, style: Style) -> None:
    from bot.render import finding_text
    from layers.findings import Severity

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
    from bot.render import Style
    from bot.sources.opener import bundled_scenarios
    from bot.sources.scenario import load_scenario

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


def register(
    sub: Any,
    add_sources: Callable[[argparse.ArgumentParser], None],
    add_format: Callable[[argparse.ArgumentParser], None],
) -> None:
    sub.add_parser("scenarios", help="list bundled scenarios")
    demo = sub.add_parser("demo", help="walk every bundled scenario: no cluster, Slack or Redis needed")
    demo.add_argument("--format", choices=("text", "json"), default="text")


def cmd_scenarios(_args: argparse.Namespace) -> int:
    from bot.sources.opener import bundled_scenarios
    from bot.sources.scenario import load_scenario

    paths = bundled_scenarios()
    rows = []
    for path in paths:
        expect = load_scenario(path).extra.get("x-expect") or {}
        rows.append((path.stem, str(expect.get("target", "")), str(expect.get("verdict") or "all ok")))
    width = max(len(r[0]) for r in rows) if rows else 0
    target_width = max(len(r[1]) for r in rows) if rows else 0
    for stem, target, verdict in rows:
        print(f"{stem:<{width}}  {target:<{target_width}}  {verdict}")
    print(f"\n{len(rows)} scenarios · gpubot why <target> --scenario <name> · what each one is: gpubot demo")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    return run_demo(fmt=args.format, interactive=sys.stdin.isatty() and sys.stdout.isatty(), colour=colour())


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"scenarios": cmd_scenarios, "demo": cmd_demo}
