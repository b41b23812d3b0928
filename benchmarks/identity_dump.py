"""Dump every bundled scenario's walk and digest as JSON, to compare a change before and after.

For each scenario under bot/scenarios: `gpubot why TARGET --format json` (default walk and
`--all`) and `gpubot digest --format json` over the in-memory snapshot, and the same walk and
digest through the fake API server and the real kubernetes client (pages of 500 and of 2), so a
change to the live reads shows up too. One JSON file per (scenario, run) under OUT; compare two
dumps with `diff -r` or `python benchmarks/identity_dump.py --compare A B`.

    python benchmarks/identity_dump.py OUT
    python benchmarks/identity_dump.py --compare BEFORE AFTER
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _target(path: Path) -> str:
    import yaml

    with open(path, encoding="utf-8") as f:
        doc = yaml.safe_load(f)
    return str((doc.get("x-expect") or {}).get("target") or "")


def _cli(args: list[str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from bot.cli.main import main; sys.exit(main())", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return json.dumps({"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}, indent=1)


def _through_api(path: Path, target: str, page_size: int) -> dict[str, object]:
    from bot.sources.kube import KubeCluster
    from bot.sources.scenario import build_sources, load_scenario
    from layers.digest import collect_digest
    from layers.walk import walk
    from tests.fakes.kube_api import serve

    sc = load_scenario(path)
    snapshot, telemetry = build_sources(sc)
    ns, _, pod = target.partition("/")
    out: dict[str, object] = {}
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        kube.page_size = page_size
        out["walk"] = walk(kube, telemetry, ns, pod).to_dict()
        out["all"] = walk(kube, telemetry, ns, pod, all_layers=True).to_dict()
        out["digest"] = collect_digest(kube, telemetry).to_dict()
        kube.close()
    return out


def dump(out: Path) -> None:
    from bot.sources.opener import bundled_scenarios

    out.mkdir(parents=True, exist_ok=True)
    for path in bundled_scenarios():
        target = _target(path)
        stem = path.stem
        (out / f"{stem}.why.json").write_text(
            _cli(["why", target, "--scenario", str(path), "--format", "json"])
        )
        (out / f"{stem}.all.json").write_text(
            _cli(["why", target, "--all", "--scenario", str(path), "--format", "json"])
        )
        (out / f"{stem}.digest.json").write_text(
            _cli(["digest", "--scenario", str(path), "--format", "json"])
        )
        for size in (500, 2):
            api = _through_api(path, target, size)
            (out / f"{stem}.api{size}.json").write_text(json.dumps(api, indent=1, sort_keys=True))
        print(stem, flush=True)


def compare(a: Path, b: Path) -> int:
    names = sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()})
    bad = [
        n
        for n in names
        if not (a / n).exists() or not (b / n).exists() or (a / n).read_bytes() != (b / n).read_bytes()
    ]
    for n in bad:
        print("differs:", n)
    print(f"{len(names) - len(bad)} of {len(names)} identical")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("give OUT or --compare BEFORE AFTER")
    dump(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
