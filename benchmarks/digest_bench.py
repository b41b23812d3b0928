"""The daily digest over 1,000 → 10,000 GPU nodes (8 GPUs each), fake API server + real Prometheus.

    python benchmarks/digest_bench.py [--nodes 1000 5000 10000] [--sick-every 500] [--rounds 3]

For each size: `benchmarks/fleet.py` builds the fleet (a node and 6 operand pods per
node; six DCGM series per GPU with 1-3 samples over the last 24 h, kept few so the
backfill stays minutes, not hours), promtool backfills the series into a real
Prometheus, and the fake Kubernetes API server (tests/fakes/kube_api.py) serves the
objects. The digest then runs in a child process through the real kubernetes client
(KubeCluster) and PrometheusTelemetry: the fleet read, the digest, and the chart (its two
range queries and the PNG). The child reports its wall time, PromQL queries and peak RSS
(VmHWM, which starts afresh at exec, unlike ru_maxrss);
this process counts the node-list requests the fake server saw.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet import make_fleet  # noqa: E402
from bot.sources.scenario import parse_scenario  # noqa: E402
from bot.sources.snapshot import SnapshotCluster  # noqa: E402
from tests.fakes.kube_api import serve  # noqa: E402
from tests.services import start_prometheus  # noqa: E402

CHILD = """
import json, os, sys, time
sys.path.insert(0, {root!r})

def status_mb(field):
    # /proc's VmHWM starts afresh at exec; ru_maxrss would carry this big parent's peak over.
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024

from bot.slack.chart import digest_chart
from bot.sources.kube import KubeCluster
from bot.sources.prom import PrometheusTelemetry
from layers.digest import collect_digest
base = status_mb("VmHWM")
kube = KubeCluster.from_config({kubeconfig!r})
prom = PrometheusTelemetry({prom!r}, at={now!r}, timeout_s=60)
t0, c0 = time.perf_counter(), os.times()
digest = collect_digest(kube, prom)
t1 = time.perf_counter()
png = digest_chart(prom, digest)
t2, c2 = time.perf_counter(), os.times()
peak = status_mb("VmHWM")
print(json.dumps({{"digest_s": t1 - t0, "chart_s": t2 - t1, "wall_s": t2 - t0, "queries": prom.queries,
                  "cpu_s": (c2.user - c0.user) + (c2.system - c0.system),
                  "prom_bytes": prom.bytes_returned, "digest": digest.to_dict(),
                  "requests": kube.counts.by_verb_resource(), "list_pages": kube.counts.list_pages(),
                  "kube_calls": kube.calls, "flagged": len(digest.flagged), "gpu_nodes": digest.gpu_nodes,
                  "error": digest.metrics_error, "png_kb": len(png or b"") / 1024,
                  "rss_base_mb": base, "rss_peak_mb": peak}}))
"""


def run(nodes: int, sick_every: int, anomalous_only: bool = False, rounds: int = 1) -> dict[str, Any]:
    t0 = time.perf_counter()
    fleet = make_fleet(nodes, 8, sick_every=sick_every, sick_series_only=anomalous_only)
    sc = parse_scenario(fleet, f"fleet-{nodes}")
    del fleet
    build_s = time.perf_counter() - t0
    series = sc.series
    if anomalous_only:
        # The stand-in: a real Prometheus holding only the sick nodes' series. Every query of the
        # digest filters on the server (`increase(...[24h]) > 0`, `max_over_time(...) > 0`, ...),
        # so it answers exactly what the fully backfilled one does (checked by --validate)
        # without a backfill of 520,000 GPUs' series this machine cannot hold.
        sick = {f"gpu-{i:05d}" for i in range(nodes) if i % sick_every == 1}
        series = [s for s in sc.series if s.labels.get("Hostname") in sick]
    samples = sum(len(s.points) for s in series)
    t0 = time.perf_counter()
    prometheus = start_prometheus(series)
    backfill_s = time.perf_counter() - t0
    try:
        with serve(SnapshotCluster(sc.objects, sc.logs)) as api:
            code = CHILD.format(root=str(ROOT), kubeconfig=api.kubeconfig, prom=prometheus.url, now=sc.now)
            results = []
            for _ in range(rounds):
                # Each round a fresh child against the same server and Prometheus: the median
                # of the rounds, the machine's noise (other work on the cores) left out.
                api.requests.clear()
                out = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
                )
                if out.returncode != 0:
                    raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            results.sort(key=lambda r: r["wall_s"])
            result = results[len(results) // 2]
            result["wall_rounds"] = [round(r["wall_s"], 2) for r in results]
            result["cpu_s"] = statistics.median(r["cpu_s"] for r in results)
            node_pages = api.count(r"^/api/v1/nodes$", "GET")
            node_lists = sum(
                1 for r in api.requests if r.path == "/api/v1/nodes" and not r.query.get("continue")
            )
    finally:
        prometheus.stop()
    return {
        "nodes": nodes,
        "gpus": nodes * 8,
        "series": len(series),
        "samples": samples,
        "build_s": build_s,
        "backfill_s": backfill_s,
        "node_lists": node_lists,
        "node_pages": node_pages,
        **result,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="+", default=[1000, 2500, 5000, 10000])
    ap.add_argument("--sick-every", type=int, default=500)
    ap.add_argument(
        "--anomalous-only",
        action="store_true",
        help="backfill only the sick nodes' series (the stand-in for fleets too large to backfill)",
    )
    ap.add_argument(
        "--validate", action="store_true", help="per size: full backfill and stand-in, their digests compared"
    )
    ap.add_argument("--rounds", type=int, default=1, help="digests per size; the median is shown")
    args = ap.parse_args()
    rows = []
    for n in args.nodes:
        if args.validate:
            full, stand_in = run(n, args.sick_every), run(n, args.sick_every, anomalous_only=True)
            for r in (full, stand_in):
                r["digest"]["metrics"].pop("source")  # each Prometheus has its own port
            same = full["digest"] == stand_in["digest"] and full["prom_bytes"] == stand_in["prom_bytes"]
            print(
                f"# {n} nodes: stand-in digest and answer bytes {'equal' if same else 'DIFFER'} to the full "
                f"backfill's ({full['prom_bytes']:,} / {stand_in['prom_bytes']:,} bytes, "
                f"{full['queries']} / {stand_in['queries']} queries)",
                flush=True,
            )
            if not same:
                raise SystemExit(1)
        before = " ".join(f"{v:.1f}" for v in os.getloadavg())
        r = run(n, args.sick_every, args.anomalous_only, args.rounds)
        r["load"] = f"{before} -> " + " ".join(f"{v:.1f}" for v in os.getloadavg())
        rows.append(r)
        shown = {k: v for k, v in r.items() if k != "digest"}
        print(
            f"# {n} nodes done (load {os.getloadavg()[0]:.1f}): {json.dumps(shown)}",
            file=sys.stderr,
            flush=True,
        )
    head = (
        "| nodes | GPUs | series | node lists (pages) | kube calls | PromQL queries | digest | chart "
        "| wall | client CPU | peak RSS (after imports) | flagged | backfill | PromQL bytes | list pages | load |"
    )
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for r in rows:
        print(
            f"| {r['nodes']:,} | {r['gpus']:,} | {r['series']:,} | {r['node_lists']} ({r['node_pages']}) "
            f"| {r['kube_calls']} | {r['queries']} | {r['digest_s']:.2f} s | {r['chart_s']:.2f} s "
            f"| {r['wall_s']:.2f} s{' (' + ', '.join(map(str, r['wall_rounds'])) + ')' if len(r['wall_rounds']) > 1 else ''} "
            f"| {r['cpu_s']:.2f} s | {r['rss_peak_mb']:.0f} MB ({r['rss_base_mb']:.0f} MB) "
            f"| {r['flagged']} | {r['backfill_s']:.0f} s | {r['prom_bytes']:,} | {r['list_pages']} | {r['load']} |"
        )
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        scale = int(last["nodes"]) / int(first["nodes"])  # type: ignore[arg-type]
        wall = float(last["wall_s"]) / float(first["wall_s"])  # type: ignore[arg-type]
        mem = float(last["rss_peak_mb"]) - float(last["rss_base_mb"])  # type: ignore[arg-type]
        mem0 = float(first["rss_peak_mb"]) - float(first["rss_base_mb"])  # type: ignore[arg-type]
        cpu = float(last["cpu_s"]) / float(first["cpu_s"])  # type: ignore[arg-type]
        print(
            f"\n{scale:g}x the nodes: wall x{wall:.2f}, client CPU x{cpu:.2f}, "
            f"memory above imports {mem0:.0f} → {mem:.0f} MB; "
            f"queries {first['queries']} → {last['queries']}, node lists {first['node_lists']} → {last['node_lists']}"
        )


if __name__ == "__main__":
    main()
