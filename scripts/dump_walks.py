"""Dump `gpubot why --format json` of every bundled scenario and test incident into one folder.

Used to prove a refactor leaves verdicts byte-identical: run it before and after, then `diff -r`.
Usage: python scripts/dump_walks.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(out: Path) -> int:
    from bot.render import walk_json
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import walk

    out.mkdir(parents=True, exist_ok=True)
    files = sorted((ROOT / "bot" / "scenarios").glob("*.yaml")) + sorted(
        (ROOT / "tests" / "incidents").rglob("*.yaml")
    )
    count = 0
    for path in files:
        try:
            scenario = load_scenario(path)
        except Exception as err:  # a fixture that is not a scenario is skipped, named
            print(f"skip {path.relative_to(ROOT)}: {type(err).__name__}", file=sys.stderr)
            continue
        target = (scenario.extra.get("x-expect") or {}).get("target")
        if not target:
            continue
        ns, _, name = str(target).partition("/")
        rel = str(path.relative_to(ROOT)).replace("/", "__")
        for all_layers in (False, True):
            cluster, telemetry = build_sources(scenario)
            text = walk_json(walk(cluster, telemetry, ns, name, all_layers=all_layers))
            (out / f"{rel}{'.all' if all_layers else ''}.json").write_text(text + "\n", encoding="utf-8")
        count += 1
    print(f"{count} scenarios dumped to {out}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(Path(sys.argv[1])))
