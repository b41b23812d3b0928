"""Every scenario's walks and digest as JSON, to show a change keeps them (or which it changes).

    python scripts/compare_walks.py OUT_DIR [--runs why all digest] [--api] [--pages 500 2]
                                            [--only bundled|incidents] [--subprocess]
    python scripts/compare_walks.py --compare BEFORE AFTER [--diff]

For each scenario with an `x-expect` target (bot/scenarios and tests/incidents/**), one file per run:
`why` (the default walk, where layer 1's candidate and examined nodes show), `all` (`why --all`),
`digest`. `--api` adds each walk and digest through the fake Kubernetes API server and the real
client (bot/sources/kube.py's reads and decode) at each `--pages` size, against the same snapshot.
Runs are in-process with this checkout's code (`--subprocess`: each in a fresh `python -m bot.cli`,
as a user runs it). A run that fails writes its exit status and error line, so a change that makes
one fail shows as a difference too. `--compare` lists the files that differ (exit 1 when any do;
`--diff` prints a unified diff of each).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ("why", "all", "digest")


def scenarios(only: str | None) -> Iterator[tuple[str, Path, str]]:
    """(file id, path relative to the checkout, target) of every scenario with an x-expect target."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    bases = {"bundled": ROOT / "bot" / "scenarios", "incidents": ROOT / "tests" / "incidents"}
    for key, base in bases.items():
        if only and key != only:
            continue
        for path in sorted(base.rglob("*.yaml")):
            try:
                doc = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
            except yaml.YAMLError:
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "Scenario":
                continue
            target = (doc.get("x-expect") or {}).get("target")
            if isinstance(target, str) and target:
                rel = path.relative_to(ROOT)
                yield str(rel).replace("/", "__").removesuffix(".yaml"), rel, target


def cli(argv: list[str], fresh: bool) -> str:
    """`gpubot ARGV`: its output, and its exit status and stderr when it failed."""
    if fresh:
        proc = subprocess.run(
            [sys.executable, "-m", "bot.cli", *argv], capture_output=True, text=True, cwd=ROOT, check=False
        )
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    else:
        from bot.cli.main import main

        buf, ebuf = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(ebuf):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        out, err = buf.getvalue(), ebuf.getvalue()
    return out + (f"\nexit {code}: {err}" if code else "")


def through_api(rel: Path, target: str, runs: tuple[str, ...], page_size: int) -> dict[str, object]:
    """The runs through the fake API server and the real client, pages of `page_size`."""
    from bot.sources.kube import KubeCluster
    from bot.sources.scenario import build_sources, load_scenario
    from layers.digest import collect_digest
    from layers.walk import walk
    from tests.fakes.kube_api import serve

    snapshot, telemetry = build_sources(load_scenario(ROOT / rel))
    ns, _, pod = target.partition("/")
    out: dict[str, object] = {}
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        kube.page_size = page_size
        try:
            if "why" in runs:
                out["why"] = walk(kube, telemetry, ns, pod).to_dict()
            if "all" in runs:
                out["all"] = walk(kube, telemetry, ns, pod, all_layers=True).to_dict()
            if "digest" in runs:
                out["digest"] = collect_digest(kube, telemetry).to_dict()
        finally:
            kube.close()
    return out


def write(
    out: Path, runs: tuple[str, ...], api: bool, pages: list[int], only: str | None, fresh: bool
) -> int:
    out.mkdir(parents=True, exist_ok=True)
    args = {
        "why": lambda rel, t: ["why", t, "--scenario", str(rel), "--format", "json"],
        "all": lambda rel, t: ["why", t, "--all", "--scenario", str(rel), "--format", "json"],
        "digest": lambda rel, t: ["digest", "--scenario", str(rel), "--format", "json"],
    }
    count = 0
    for ident, rel, target in scenarios(only):
        for run in runs:
            (out / f"{ident}.{run}.json").write_text(
                cli(args[run](ROOT / rel, target), fresh), encoding="utf-8"
            )
        for size in pages if api else ():
            text = json.dumps(through_api(rel, target, runs, size), indent=1, sort_keys=True)
            (out / f"{ident}.api{size}.json").write_text(text, encoding="utf-8")
        count += 1
    print(f"{count} scenarios written to {out}", file=sys.stderr)
    return 0


def compare(before: Path, after: Path, show: bool) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differ = [
        n
        for n in names
        if not (before / n).exists()
        or not (after / n).exists()
        or (before / n).read_bytes() != (after / n).read_bytes()
    ]
    for n in differ:
        print("differs:", n)
        if show and (before / n).exists() and (after / n).exists():
            a = (before / n).read_text(encoding="utf-8").splitlines()
            b = (after / n).read_text(encoding="utf-8").splitlines()
            sys.stdout.writelines(
                f"{line}\n" for line in difflib.unified_diff(a, b, f"before/{n}", f"after/{n}")
            )
    print(f"{len(names) - len(differ)} of {len(names)} identical")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    ap.add_argument("--api", action="store_true", help="also through the fake API server and the real client")
    ap.add_argument("--pages", nargs="+", type=int, default=[500, 2], help="page sizes for --api")
    ap.add_argument("--only", choices=("bundled", "incidents"))
    ap.add_argument("--subprocess", action="store_true", help="each run in a fresh `python -m bot.cli`")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--diff", action="store_true", help="with --compare: print a unified diff of each")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare, args.diff)
    if args.out is None:
        ap.error("give OUT_DIR, or --compare BEFORE AFTER")
    # This checkout's code, not whatever `gpubot` the environment has installed.
    sys.path.insert(0, str(ROOT))
    return write(args.out, tuple(args.runs), args.api, args.pages, args.only, args.subprocess)


if __name__ == "__main__":
    sys.exit(main())
