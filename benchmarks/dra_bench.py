"""A DRA fleet: 2,000 nodes, 8 GPUs per ResourceSlice, 10,000 allocated claims (benchmarks/dra_fleet.py).

    python benchmarks/dra_bench.py [--nodes 2000] [--gpus 8] [--claims 10000]

Measures, in this process, on the in-memory snapshot the CLI reads a scenario into:
- the default walk of the pending DRA pod `ml/finetune-0`: every node a candidate, CEL class and
  claim selectors on all 16,000 devices, every claim listed for the devices they hold, a tainted GPU
  (walk 1 -> 5); and the same walk with all five layers;
- the daily digest over the fleet (DRA nodes with tainted GPUs flagged);
then, through the fake API server and the real kubernetes client, the requests one walk makes on
a smaller fleet as the claims grow (the first pages must not change; only `continue` pages grow
with the claim list).

Targets (issue 11): walk < 2 s, digest < 5 s on this machine; requests independent of the claims.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.dra_fleet import make_dra_fleet  # noqa: E402
from bot.sources.kube import KubeCluster  # noqa: E402
from bot.sources.scenario import build_sources, parse_scenario  # noqa: E402
from layers.digest import collect_digest  # noqa: E402
from layers.walk import walk  # noqa: E402
from tests.fakes.kube_api import serve  # noqa: E402

TARGET = ("ml", "finetune-0")


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def measure(nodes: int, gpus: int, claims: int) -> dict[str, Any]:
    doc, build_s = timed(lambda: make_dra_fleet(nodes, gpus, claims))
    (snapshot, telemetry), load_s = timed(lambda: build_sources(parse_scenario(doc, f"<dra-fleet-{nodes}>")))
    result, walk_s = timed(lambda: walk(snapshot, telemetry, *TARGET))
    _, all_s = timed(lambda: walk(snapshot, telemetry, *TARGET, all_layers=True))
    digest, digest_s = timed(lambda: collect_digest(snapshot, telemetry))
    return {
        "walk_s": walk_s,
        "all_s": all_s,
        "digest_s": digest_s,
        "load_s": load_s + build_s,
        "path": " -> ".join(str(r.layer) for r in result.layers),
        "verdict": result.verdict.code if result.verdict else None,
        "layer1": sorted({f.code for f in result.layers[0].findings}),
        "flagged": [f.node for f in digest.flagged],
    }


def requests(nodes: int, gpus: int, claims: int) -> dict[str, int]:
    snapshot, telemetry = build_sources(parse_scenario(make_dra_fleet(nodes, gpus, claims), "<dra-fleet>"))
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=60.0)
        try:
            walk(kube, telemetry, *TARGET)
        finally:
            kube.close()
        made = list(api.requests)
    pages = sum(1 for r in made if r.query.get("continue"))
    return {
        "claims": claims,
        "requests": len(made),
        "first_pages": len(made) - pages,
        "continue_pages": pages,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--claims", type=int, default=10_000)
    args = ap.parse_args(argv)
    m = measure(args.nodes, args.gpus, args.claims)
    ok = lambda v, t: "ok" if v < t else "OVER"  # noqa: E731
    print(
        f"{args.nodes} nodes, {args.nodes * args.gpus} GPUs, {args.claims} claims (scenario built+loaded in {m['load_s']:.1f} s)"
    )
    print(
        f"walk (default, {m['path']}, verdict {m['verdict']}): {m['walk_s']:.2f} s [{ok(m['walk_s'], 2.0)} < 2 s]"
    )
    print(f"walk (all five layers): {m['all_s']:.2f} s")
    print(f"digest: {m['digest_s']:.2f} s [{ok(m['digest_s'], 5.0)} < 5 s], flagged {m['flagged'][:5]}")
    print(f"layer 1: {', '.join(m['layer1'])}")
    print("\nrequests per walk through the fake API server (200 nodes):")
    print("| claims | requests | first pages | continue pages |\n|---|---|---|---|")
    rows = [requests(200, args.gpus, c) for c in (200, 600, 1000)]
    for r in rows:
        print(f"| {r['claims']} | {r['requests']} | {r['first_pages']} | {r['continue_pages']} |")
    same = len({r["first_pages"] for r in rows}) == 1
    print(f"first pages independent of the claims: {'yes' if same else 'NO'}")
    return 0 if same and m["walk_s"] < 2.0 and m["digest_s"] < 5.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
