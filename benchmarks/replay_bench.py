"""Scenario replay: `gpubot why --scenario FILE` against a plain `json.load` of the same file.

    python benchmarks/replay_bench.py [--nodes 2000 5000] [--series-nodes 2000] [--rounds 3]

A synthetic fleet (benchmarks/fleet.py: a node and ten operand pods per node, six DCGM
series per GPU with 25 samples over 24 h, every 500th node sick) is written as a JSON
scenario (70 MB at 2,000 nodes). Fresh processes, side by side and alternating:

- `python -c "json.load(open(FILE))"`: the standard library's decoder, nothing else;
- `python -c "orjson.loads(...)"` and `"msgspec.json.decode(...)"`: the two candidate
  decoders on the whole file (how the loader's decoder was chosen);
- `gpubot why ml/trainer-0 --scenario FILE --format json`: the whole command, start to exit.

The series-heavy shape (`--series-nodes`, benchmarks/series_fleet.py): 2,000 nodes x 8 GPUs with
17 DCGM health series per GPU, three points each (~190 MB), operator pods around the target
only; `gpubot why ml/target-0 --all --format json` walks a bound pod, whose walk needs one
node's series out of ~272,000 (issue 31: no slower than `json.load` of the file).

Wall time, user+system CPU and peak RSS come from each child's own rusage (os.wait4).
Targets (issue 13): gpubot no slower than `json.load` at 2,000 nodes, under 5 s at 5,000,
peak RSS under 500 MB.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

WALL_TARGET_S = 5.0
RSS_TARGET_MB = 500.0


# gpubot runs with its bytecode cached, as an installed package is (this machine's shells set
# PYTHONDONTWRITEBYTECODE=1; the first round's gpubot writes the caches here).
PYCACHE = tempfile.mkdtemp(prefix="replay-bench-pycache-")
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {
    "PYTHONPYCACHEPREFIX": PYCACHE
}


def run(argv: list[str]) -> dict[str, float]:
    """One fresh process: wall seconds, CPU seconds, peak RSS in MB (its own, via wait4)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO, env=ENV)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv!r} failed ({proc.returncode}):\n{err.decode()[-2000:]}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024}


def gpubot() -> list[str]:
    found = shutil.which("gpubot", path=str(Path(sys.executable).parent))
    return [found] if found else [sys.executable, "-m", "bot.cli"]


def write_fleet(path: Path, nodes: int) -> None:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from benchmarks.fleet import make_fleet; "
        "open(sys.argv[2], 'w').write(json.dumps(make_fleet(int(sys.argv[3]), 8, operands=10, samples=25)))"
    )
    subprocess.run([sys.executable, "-c", code, str(REPO), str(path), str(nodes)], check=True)


def write_series_fleet(path: Path, nodes: int) -> None:
    subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "series_fleet.py"), str(path), "--nodes", str(nodes)],
        check=True,
    )


def measure(nodes: int, rounds: int, shape: str = "fleet") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="replay-bench-") as tmp:
        path = Path(tmp) / f"{shape}-{nodes}.json"
        (write_series_fleet if shape == "series" else write_fleet)(path, nodes)
        f = str(path)
        why = (
            ["why", "ml/target-0", "--scenario", f, "--all", "--format", "json"]
            if shape == "series"
            else ["why", "ml/trainer-0", "--scenario", f, "--format", "json"]
        )
        commands = {
            "json.load": [sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1]))", f],
            "orjson.loads": [
                sys.executable,
                "-c",
                "import orjson, sys; orjson.loads(open(sys.argv[1], 'rb').read())",
                f,
            ],
            "msgspec decode": [
                sys.executable,
                "-c",
                "import msgspec, sys; msgspec.json.decode(open(sys.argv[1], 'rb').read())",
                f,
            ],
            "gpubot why": [*gpubot(), *why],
        }
        # orjson is no dependency of gpubot's: measured where it is installed, left out where not.
        if importlib.util.find_spec("orjson") is None:
            del commands["orjson.loads"]
        runs: dict[str, list[dict[str, float]]] = {k: [] for k in commands}
        for _ in range(rounds):
            for key, argv in commands.items():
                runs[key].append(run(argv))
        size_mb = path.stat().st_size / 1e6
    med = {
        k: {m: statistics.median(r[m] for r in rs) for m in ("wall", "cpu", "rss")} for k, rs in runs.items()
    }
    return {"nodes": nodes, "shape": shape, "file_mb": size_mb, "median": med}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[2000, 5000])
    p.add_argument("--series-nodes", type=int, nargs="*", default=[2000])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    try:
        subprocess.run([*gpubot(), "--help"], env=ENV, stdout=subprocess.DEVNULL, check=True)
        subprocess.run(
            [*gpubot(), "why", "ml/trainer-0", "--scenario", "xid79-fell-off-bus"],
            env=ENV,
            stdout=subprocess.DEVNULL,
            check=True,
        )  # warm-up: the bytecode caches
        results = [measure(n, args.rounds) for n in args.nodes]
        results += [measure(n, args.rounds, "series") for n in args.series_nodes]
    finally:
        shutil.rmtree(PYCACHE, ignore_errors=True)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"python {sys.version.split()[0]} on {os.cpu_count()} CPUs, load average {load}; "
        f"medians of {args.rounds} rounds\n"
    )
    print("| shape | nodes | file | process | wall | CPU (user+sys) | peak RSS |")
    print("|---|---|---|---|---|---|---|")
    missed = False
    for r in results:
        for key, m in r["median"].items():
            print(
                f"| {r['shape']} | {r['nodes']:,} | {r['file_mb']:.0f} MB | `{key}` | {m['wall']:.2f} s | {m['cpu']:.2f} s "
                f"| {m['rss']:.0f} MB |"
            )
        why, base = r["median"]["gpubot why"], r["median"]["json.load"]
        ok_ratio = why["wall"] <= base["wall"]
        ok_rss = why["rss"] < RSS_TARGET_MB
        line = (
            f"  {r['shape']} {r['nodes']:,} nodes: gpubot / json.load = {why['wall'] / base['wall']:.2f} (wall), "
            f"{why['cpu'] / base['cpu']:.2f} (CPU); peak {why['rss']:.0f} MB "
            f"(< {RSS_TARGET_MB:g}: {'ok' if ok_rss else 'MISSED'})"
        )
        if r["nodes"] >= 5000 and r["shape"] == "fleet":
            ok_wall = why["wall"] < WALL_TARGET_S
            line += f"; wall {why['wall']:.2f} s (< {WALL_TARGET_S:g} s: {'ok' if ok_wall else 'MISSED'})"
            missed = missed or not ok_wall
        else:
            line += f"; no slower than json.load: {'ok' if ok_ratio else 'MISSED'}"
            missed = missed or not ok_ratio
        missed = missed or not ok_rss
        print(line, file=sys.stderr)
        print(f"\n{line.strip()}")
    print(json.dumps(results), file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
