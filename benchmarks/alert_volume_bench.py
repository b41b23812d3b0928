"""Alertmanager's large notifications: how long the webhook takes, and what it asks Kubernetes.

    python benchmarks/alert_volume_bench.py [--alerts 10000] [--namespaces 20] [--runs 3]

`gpubot serve --http` runs as a subprocess over a 200-node fleet served by the fake Kubernetes
API (tests/fakes/kube_api.py, through the real kubernetes client), a real redis-server and the
fake Slack Web API. Two notifications, each sent `--runs` times (a fresh alert set each run, so
nothing is cached from the one before):

- `missing pods`: `--alerts` kube-state-metrics alerts (KubePodCrashLooping) naming pods that no
  longer exist, spread over `--namespaces` namespaces (a batch Job's pods, deleted since);
- `dcgm`: 3,000 dcgm-exporter alerts of ~600 bytes (a dozen labels, two annotations) on the
  fleet's nodes: one group of a rack losing NVLink.

Measured: the webhook's HTTP round trip (past 500 alerts the answer comes once the batch is
kept in Redis, handlers/alert_inbox.py), the time until every alert is recorded (counted in
gpubot_alerts_total), the body size, and the Kubernetes requests about pods it cost (from the
fake API's request log). Before issue 20 the first cost one GET per alert inside the request
and the second was refused with 413 at 1 MiB.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bot`, `tests` importable
    sys.path.insert(0, str(REPO))

TOKEN = "bench-alert-token-0123456789abcdef"
CHANNEL = "C0VOLUME"


def missing_pods(count: int, namespaces: int, run: int) -> list[dict[str, Any]]:
    from tests.alertmanager import alert

    return [
        alert(
            "KubePodCrashLooping",
            summary=f"Pod team-{i % namespaces}/job-{run}-{i} is crash looping",
            namespace=f"team-{i % namespaces}",
            pod=f"job-{run}-{i}-x7k2p",
            container="worker",
            job="kube-state-metrics",
            instance="10.42.0.12:8080",
        )
        for i in range(count)
    ]


def dcgm(count: int, run: int) -> list[dict[str, Any]]:
    from tests.alertmanager import alert

    return [
        alert(
            "GPUNVLinkErrors",
            summary=f"NVLink CRC errors on gpu-{i % 200:03d} GPU {i % 8}",
            Hostname=f"gpu-{i % 200:03d}",
            gpu=str(i % 8),
            UUID=f"GPU-{run:02d}{i:06d}-5b2e-4c1a-9f3d-7e6a2b1c0000",
            pci_bus_id=f"00000000:{i % 256:02X}:00.0",
            modelName="NVIDIA H100 80GB HBM3",
            DCGM_FI_DRIVER_VERSION="550.54.15",
            container="nvidia-dcgm-exporter",
            namespace="gpu-operator",
            pod=f"nvidia-dcgm-exporter-{i % 200:05d}",
            instance=f"10.1.0.{i % 200 + 1}:9400",
            job="nvidia-dcgm-exporter",
            link=str(i),
        )
        for i in range(count)
    ]


def alerts_counted(exposition: str) -> float:
    """Every alert the bot has decided something for (gpubot_alerts_total, all labels)."""
    return sum(float(v) for v in re.findall(r"^gpubot_alerts_total\{[^}]*\} (\S+)$", exposition, re.M))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.alerts_bench import fleet
    from bot.sources.snapshot import SnapshotCluster
    from tests.alertmanager import payload
    from tests.fakes.kube_api import serve
    from tests.fakes.slack_api import serve_slack
    from tests.services import RedisServer
    from tests.slack_harness import BotProcess, bot_env, get, post

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--alerts", type=int, default=10_000)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args(argv)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with (
        tempfile.TemporaryDirectory(prefix="alert-volume-") as tmp,
        serve_slack() as slack,
        RedisServer() as rds,
        serve(SnapshotCluster(fleet(200))) as kube,
    ):
        env = bot_env(slack.url, REDIS_URL=rds.url, GPUBOT_ALERT_TOKEN=TOKEN, GPUBOT_ALERT_CHANNEL=CHANNEL)
        bot = BotProcess(["--kubeconfig", kube.kubeconfig], env, Path(tmp) / "bot.log")
        ok = True
        try:
            for name, make in (
                ("missing pods", lambda run: missing_pods(args.alerts, args.namespaces, run)),
                ("dcgm", lambda run: dcgm(3000, run)),
            ):
                for run in range(args.runs):
                    data = json.dumps(payload(make(run)))
                    before = kube.count("/pods", method="GET")
                    counted = alerts_counted(get(bot.url + "/metrics")[1])
                    sent = len(json.loads(data)["alerts"])
                    started = time.perf_counter()
                    code, _ = post(bot.url + "/alertmanager", data, headers, timeout=120)
                    took = time.perf_counter() - started
                    while alerts_counted(get(bot.url + "/metrics")[1]) < counted + sent:
                        time.sleep(0.02)
                    recorded = time.perf_counter() - started
                    pods = kube.count("/pods", method="GET") - before
                    ok = ok and code == 200
                    print(
                        f"{name:13s} run {run}: {sent:6d} alerts, {len(data) / 1e6:5.2f} MB -> {code} in "
                        f"{took:6.3f} s, all recorded after {recorded:6.3f} s; pod requests to Kubernetes: {pods}"
                    )
        finally:
            bot.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
