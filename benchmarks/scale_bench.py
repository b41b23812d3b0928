"""Walks and a must-gather on a 65,000-node fleet through the fake API server and the real client.

The fleet (benchmarks/fleet.py): N DGX-style nodes of 8 GPUs, six GPU Operator operand pods and
`--workload-pods` CPU pods on each (1,040,000 pods at 65,000 nodes with 9), every 500th node
sick (a GPU lost), a pending pod `ml/trainer-0` (8 GPUs, every node a candidate) and a bound
pod `ml/bound-0` on a sick node. The fake API server (tests/fakes/kube_api.py) pages lists as
the real one does (limit/continue, 500 a page, kind and spec.nodeName indexes) in this process;
each measured run is a fresh child process (the real kubernetes client, `KubeCluster`), which
reports its own CPU time (user+sys, so the server's work is not in it), peak RSS (VmHWM) and
its requests by verb, resource and page. No metrics source: DCGM reads answer "no metrics
source" (the walk's PromQL is one query per signal for the examined nodes either way).

APF seats are estimated as kube-apiserver's list work estimator does for a list served from the
watch cache (the default since ConsistentListFromCache): one seat per 100 objects of the
resource stored, whatever the selector, at least 1 and at most 10; any other request 1 seat.

    python benchmarks/scale_bench.py [--nodes 65000] [--workload-pods 9] [--modes bound pending gather gather-pod gather-pending]
        [--profile /tmp/scale.prof]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = """
import json, os, sys, time
sys.path.insert(0, {root!r})
from bot.sources.kube import KubeCluster
from layers.sources import NoTelemetry
mode, kubeconfig, out, profile = {mode!r}, {kubeconfig!r}, {out!r}, {profile!r}
kube = KubeCluster.from_config(kubeconfig, timeout_s=600.0)
from bot.ops.gctune import tune
tune()  # as every gpubot process does (bot/cli/main.py)
if profile:
    import cProfile
    prof = cProfile.Profile(time.process_time)
    prof.enable()
t0, c0 = time.perf_counter(), os.times()
if mode.startswith("gather"):
    from bot.actions.bundle_writer import collect_bundle
    # gather: a node's bundle; gather-pod and gather-pending: the Slack button's (the node and the
    # target pod, bound or pending; gpu-00001 is one of the pending pod's examined, sick nodes).
    node = "gpu-00001"
    target = {{"gather-pod": ("ml", "bound-0"), "gather-pending": ("ml", "trainer-0")}}.get(mode)
    report = collect_bundle(kube, NoTelemetry(now=time.time()), out, node=node, target=target)
    codes = [f.code for layer in report.walk.layers for f in layer.findings] if report.walk else []
else:
    from layers.walk import walk
    result = walk(kube, NoTelemetry(now=time.time()), "ml", "bound-0" if mode == "bound" else "trainer-0")
    codes = [f.code for layer in result.layers for f in layer.findings]
c1 = os.times()
wall = time.perf_counter() - t0
if profile:
    prof.disable()
    prof.dump_stats(f"{{profile}}.{{mode}}")
hwm = 0.0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        hwm = int(line.split()[1]) / 1024
reqs, items = kube.counts.snapshot()
print(json.dumps({{
    "wall_s": wall, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system), "peak_mb": hwm,
    "requests": [[k.verb, k.resource, k.page, k.selector, k.cached, n, items[k]] for k, n in reqs.items()],
    "codes": codes,
}}))
"""


def seats(verb: str, resource: str, stored: dict[str, int]) -> int:
    if verb != "list":
        return 1
    return max(1, min(10, math.ceil(stored.get(resource, 0) / 100)))


def bound_pod(node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bound-0", "namespace": "ml"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "trainer",
                    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                    "resources": {"limits": {"nvidia.com/gpu": "4"}},
                }
            ],
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [
                {"name": "trainer", "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        },
    }


def loadavg() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def summarize(mode: str, raw: dict[str, Any], stored: dict[str, int]) -> dict[str, Any]:
    by_vr: dict[str, int] = {}
    pages = cont = seat_total = max_seats = 0
    for verb, resource, page, _sel, _cached, n, _items in raw["requests"]:
        by_vr[f"{verb} {resource}"] = by_vr.get(f"{verb} {resource}", 0) + n
        if verb == "list":
            pages += n
            cont += n if page == "continue" else 0
        s = seats(verb, resource, stored)
        seat_total += s * n
        max_seats = max(max_seats, s)
    return {
        "mode": mode,
        "wall_s": round(raw["wall_s"], 2),
        "cpu_s": round(raw["cpu_s"], 2),
        "peak_mb": round(raw["peak_mb"]),
        "requests": sum(by_vr.values()),
        "list_pages": pages,
        "continue_pages": cont,
        "apf_seats": seat_total,
        "by_verb_resource": dict(sorted(by_vr.items())),
        "codes": raw["codes"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=65_000)
    ap.add_argument("--workload-pods", type=int, default=9)
    ap.add_argument(
        "--modes",
        nargs="+",
        default=["bound", "pending", "gather"],
        choices=["bound", "pending", "gather", "gather-pod", "gather-pending"],
    )
    ap.add_argument(
        "--profile", default="", help="write each child's cProfile stats to PROFILE.<mode> (times inflated)"
    )
    args = ap.parse_args(argv)

    from benchmarks.fleet import make_fleet, node_name
    from bot.sources.scenario import build_sources, parse_scenario
    from tests.fakes.kube_api import serve

    t0 = time.perf_counter()
    fleet = make_fleet(args.nodes, 8, workload_pods=args.workload_pods, with_series=False)
    fleet["objects"].append(bound_pod(node_name(1)))
    pods = sum(1 for o in fleet["objects"] if o["kind"] == "Pod")
    stored = {"nodes": args.nodes, "pods": pods, "events": 1}
    snapshot, _ = build_sources(parse_scenario(fleet, f"<fleet-{args.nodes}>"), consume=True)
    del fleet
    print(
        f"fleet: {args.nodes:,} nodes, {args.nodes * 8:,} GPUs, {pods:,} pods, built in "
        f"{time.perf_counter() - t0:.0f} s",
        flush=True,
    )
    rows = []
    with serve(snapshot) as api, tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            before = loadavg()
            code = CHILD.format(
                root=str(ROOT),
                mode=mode,
                kubeconfig=api.kubeconfig,
                out=str(Path(tmp) / "bundle.tar.gz"),
                profile=args.profile,
            )
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(f"{mode}: failed\n{proc.stderr}", file=sys.stderr)
                return 1
            row = summarize(mode, json.loads(proc.stdout.strip().splitlines()[-1]), stored)
            row["load"] = f"{before} -> {loadavg()}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    # The node list's pages plus the walk's other reads: 10 until issue 26, which added one constant
    # ClusterPolicy list (the operator's namespace, for trusted evidence; tests/test_scale_counts.py).
    target = args.nodes // 500 + 11
    for r in rows:
        print(
            f"| {r['mode']} | {r['wall_s']} s | {r['cpu_s']} s | {r['peak_mb']} MB | {r['requests']} | "
            f"{r['list_pages']} ({r['continue_pages']} continue; target <= {target}) | {r['apf_seats']} | {r['load']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
