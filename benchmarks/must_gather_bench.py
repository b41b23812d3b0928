"""must-gather of one node in a 1,000-node cluster with 30 operand pods on it, through the fake API server.

    python benchmarks/must_gather_bench.py [--nodes 1000] [--pods 30] [--log-lines 2000]

The fake server (tests/fakes/kube_api.py) runs in this process; the collector runs in a
child process (the real kubernetes client, KubeCluster), which reports its wall time and
peak RSS (ru_maxrss) next to the RSS it had after imports, so the difference is what the
collection cost. Every other GPU node carries 7 operand pods, so the node scope is tested.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.sources.snapshot import SnapshotCluster  # noqa: E402
from tests.bundle_scenario import dp_log, node, pod  # noqa: E402
from tests.fakes.kube_api import serve  # noqa: E402

APPS = [
    "nvidia-driver-daemonset",
    "nvidia-container-toolkit-daemonset",
    "nvidia-device-plugin-daemonset",
    "gpu-feature-discovery",
    "nvidia-dcgm-exporter",
    "nvidia-operator-validator",
    "nvidia-mig-manager",
]

CHILD = """
import json, os, resource, sys, time
sys.path.insert(0, {root!r})
from bot.actions.bundle_writer import collect_bundle
from bot.sources.kube import KubeCluster
from layers.sources import NoTelemetry
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
kube = KubeCluster.from_config({kubeconfig!r})
t0, c0 = time.perf_counter(), os.times()
report = collect_bundle(kube, NoTelemetry(now=time.time()), {out!r}, node="gpu-0")
c1 = os.times()
wall = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"wall_s": wall, "cpu_s": (c1.user - c0.user) + (c1.system - c0.system), "rss_base_mb": base / 1024, "rss_peak_mb": peak / 1024, "calls": kube.calls,
                  "files": report.files, "archive_mb": report.archive_bytes / 1e6,
                  "content_mb": report.content_bytes / 1e6, "errors": len(report.errors)}}))
"""


def cluster(nodes: int, pods_on_target: int, log_lines: int) -> SnapshotCluster:
    objs = [node(f"gpu-{i}", 8, 8) for i in range(nodes)]
    objs.append(
        pod("gpu-operator", "gpu-operator-6d5b8f7c9-abcde", "gpu-1", "gpu-operator", ["gpu-operator"])
    )
    logs: dict[str, str] = {}
    text = dp_log() * (log_lines // 4 + 1)
    for i in range(pods_on_target):
        app = APPS[i % len(APPS)]
        name = f"{app}-t{i:03d}"
        objs.append(
            pod(
                "gpu-operator",
                name,
                "gpu-0",
                app,
                ["main", "sidecar"],
                inits=["toolkit-validation"],
                restarts=1,
            )
        )
        for c in ("main", "sidecar", "toolkit-validation"):
            logs[f"gpu-operator/{name}/{c}"] = text
            logs[f"gpu-operator/{name}/{c}#previous"] = text
    for n in range(1, nodes):
        for app in APPS:
            objs.append(pod("gpu-operator", f"{app}-n{n:04d}", f"gpu-{n}", app, ["main"]))
    return SnapshotCluster(objs, logs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=30)
    ap.add_argument("--log-lines", type=int, default=2000)
    args = ap.parse_args()
    snap = cluster(args.nodes, args.pods, args.log_lines)
    with serve(snap) as api, tempfile.TemporaryDirectory() as tmp:
        code = CHILD.format(root=str(ROOT), kubeconfig=api.kubeconfig, out=str(Path(tmp) / "b.tar.gz"))
        result = json.loads(
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        )
    result.update(nodes=args.nodes, operand_pods_on_node=args.pods, log_lines=args.log_lines)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
