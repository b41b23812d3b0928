"""How many incidents a node-only bundle replays to the live walk's diagnosis (issue 23).

For every scenario with a bound target (bot/scenarios/*.yaml and tests/incidents/**/*.yaml), the
live walk of the target (the scenario's own sources) is compared with the walk replayed from
`collect_bundle(node=<the target's node>)` (no --pod: what `gpubot must-gather --node N` writes).
Counted three ways: the same verdict code, the same layer-3 codes, and the same walk (`WalkResult.to_dict()`, every finding).
A mismatch is printed with the layer-3 codes of both walks, the comparisons a node-only bundle can
lose. No timing: a correctness count, quick on any machine.

    python benchmarks/bundle_replay_check.py [--quiet]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def scenario_files() -> list[Path]:
    return sorted((ROOT / "bot" / "scenarios").glob("*.yaml")) + sorted(
        (ROOT / "tests" / "incidents").rglob("*.yaml")
    )


def codes(result: dict[str, Any]) -> list[str]:
    return [f["code"] for layer in result.get("layers") or [] for f in layer.get("findings") or []]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quiet", action="store_true", help="print the totals only")
    args = ap.parse_args(argv)

    import yaml

    from bot.actions.bundle_writer import collect_bundle
    from bot.sources.bundle_reader import read_bundle
    from bot.sources.scenario import ScenarioError, build_sources, parse_scenario
    from layers.facts import objects as o
    from layers.walk import walk

    bound = same_verdict = same_walk = same_l3 = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in scenario_files():
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            target = ((data or {}).get("x-expect") or {}).get("target") if isinstance(data, dict) else None
            if not isinstance(target, str) or "/" not in target:
                continue
            try:
                snap, telemetry = build_sources(parse_scenario(data, str(path)))
                ns, name = target.split("/", 1)
                node = o.pod_node(snap.get_pod(ns, name))
            except (ScenarioError, Exception):  # a scenario this check cannot load is not counted
                continue
            if not node:
                continue
            bound += 1
            live = walk(snap, telemetry, ns, name).to_dict()
            out = Path(tmp) / "b.tar.gz"
            collect_bundle(snap, telemetry, out, node=node)
            replay_cluster, replay_telemetry = build_sources(read_bundle(out))
            replayed = walk(replay_cluster, replay_telemetry, ns, name).to_dict()
            verdict = (live.get("verdict") or {}).get("code") == (replayed.get("verdict") or {}).get("code")
            same_verdict += verdict
            same_walk += live == replayed
            l3 = [c for c in codes(live) if c.startswith("L3")]
            r3 = [c for c in codes(replayed) if c.startswith("L3")]
            same_l3 += l3 == r3
            if not verdict and not args.quiet:
                print(f"{path.relative_to(ROOT)}: live {l3} replayed {r3}")
    print(
        f"bound targets: {bound}; same verdict: {same_verdict}; same layer-3 codes: {same_l3}; "
        f"same walk: {same_walk}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
