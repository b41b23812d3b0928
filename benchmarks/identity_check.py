"""Every bundled scenario and test incident walked and digested, its JSON written to a directory:
run before and after a change to the walk's speed, then compare the two directories byte for byte.

    python benchmarks/identity_check.py OUT_DIR [--api]      # write OUT_DIR/<scenario>.{why,all,digest}.json
    python benchmarks/identity_check.py --compare BEFORE AFTER

Beyond scripts/dump_walks.py (`why --all` of each): the default walk (where a speed change to
layer 1's candidates and examined nodes shows), the digest, and `--api`: each bundled scenario's
`why --all` through the fake Kubernetes API server and the real client (bot/sources/kube.py's
decode), against the same snapshot. A scenario whose walk fails writes its error line instead, so
a change that makes one fail shows as a difference too.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def scenarios() -> list[tuple[str, Path, str]]:
    """(id, file, target) of every scenario file with an x-expect target."""
    import yaml

    out = []
    for base in (ROOT / "bot" / "scenarios", ROOT / "tests" / "incidents"):
        for path in sorted(base.rglob("*.yaml")):
            try:
                doc = yaml.safe_load(path.read_text())
            except yaml.YAMLError:
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "Scenario":
                continue
            target = (doc.get("x-expect") or {}).get("target")
            if isinstance(target, str):
                rel = path.relative_to(ROOT)
                out.append((str(rel).replace("/", "__").removesuffix(".yaml"), rel, target))
    return out


def run_cli(argv: list[str]) -> str:
    from bot.cli.main import main

    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    return buf.getvalue() + (f"\nexit {code}: {err.getvalue()}" if code else "")


def write(out: Path, api: bool) -> int:
    import os

    os.chdir(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    for ident, rel, target in scenarios():
        (out / f"{ident}.why.json").write_text(
            run_cli(["why", target, "--scenario", str(rel), "--format", "json"])
        )
        (out / f"{ident}.all.json").write_text(
            run_cli(["why", target, "--all", "--scenario", str(rel), "--format", "json"])
        )
        (out / f"{ident}.digest.json").write_text(
            run_cli(["digest", "--scenario", str(rel), "--format", "json"])
        )
        if api and rel.parts[0] == "bot":
            from bot.sources.scenario import build_sources, load_scenario
            from tests.fakes.kube_api import serve

            snapshot, _ = build_sources(load_scenario(str(rel)))
            with serve(snapshot) as fake:
                text = run_cli(["why", target, "--all", "--kubeconfig", fake.kubeconfig, "--format", "json"])
            (out / f"{ident}.api.json").write_text(text)
    return 0


def compare(before: Path, after: Path) -> int:
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differ = [
        n
        for n in names
        if not (before / n).exists()
        or not (after / n).exists()
        or (before / n).read_bytes() != (after / n).read_bytes()
    ]
    print(f"{len(names)} files, {len(differ)} differ")
    for n in differ:
        print("  differs:", n)
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", type=Path)
    ap.add_argument("--api", action="store_true")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        ap.error("OUT_DIR or --compare BEFORE AFTER")
    return write(args.out, args.api)


if __name__ == "__main__":
    sys.exit(main())
