"""Alertmanager's webhook under an alert storm: 1,000 alerts over 200 subjects in one minute.

    python benchmarks/alerts_bench.py [--alerts 1000] [--subjects 200] [--seconds 60] [--senders 4]

`gpubot serve --http` runs as a subprocess over a 200-node GPU fleet served by the fake
Kubernetes API (tests/fakes/kube_api.py, through the real kubernetes client), a real
redis-server and the fake Slack Web API. The subjects are what real exporters name: nodes by
dcgm-exporter's `Hostname` (most), node-exporter's `instance` (an InternalIP:port) and pods by
kube-state-metrics' `namespace`+`pod`. Each subject gets its share of the alerts in webhooks of
one to four alerts of Alertmanager's shape (first firing, repeats, a second alert name, a resolved
one), sent over real HTTP by `--senders` threads, evenly spread over `--seconds`.

Measured: each webhook's HTTP round trip. Checked once Slack has caught up: threads opened at
most GPUBOT_ALERT_MAX_THREADS_PER_HOUR (10) per clock hour, every other subject in that hour's
summary once, every subject exactly one incident in Redis (none lost, none duplicated).

Targets (issue 15): webhook p99 < 100 ms; threads <= storm limit; no incident lost or duplicated.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bot`, `tests` importable
    sys.path.insert(0, str(REPO))

P99_TARGET_S = 0.100
MAX_THREADS = 10
TOKEN = "bench-alert-token-0123456789abcdef"
CHANNEL = "C0STORM"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def fleet(nodes: int) -> list[dict[str, Any]]:
    """GPU nodes of two models with addresses, a workload pod on each and a dcgm-exporter pod."""
    objects: list[dict[str, Any]] = []
    for i in range(nodes):
        name = f"gpu-{i:03d}"
        product = "NVIDIA-H100-80GB-HBM3" if i % 3 else "NVIDIA-A100-SXM4-80GB"
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product},
                },
                "spec": {},
                "status": {
                    "addresses": [
                        {"type": "InternalIP", "address": f"10.1.{i // 250}.{i % 250 + 1}"},
                        {"type": "Hostname", "address": name},
                    ],
                    "capacity": {"nvidia.com/gpu": "8"},
                    "allocatable": {"nvidia.com/gpu": "8" if i % 17 else "7"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
        for ns, pod, labels in (
            ("ml", f"trainer-{i:03d}", {"app": "trainer"}),
            ("gpu-operator", f"nvidia-dcgm-exporter-{i:05d}", {"app": "nvidia-dcgm-exporter"}),
        ):
            objects.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": pod, "namespace": ns, "labels": labels},
                    "spec": {"nodeName": name, "containers": [{"name": "c", "image": "x"}]},
                    "status": {"phase": "Running"},
                }
            )
    return objects


def subject_labels(i: int) -> tuple[str, dict[str, str]]:
    """(subject key, the labels naming it): 80 % dcgm Hostname, 10 % node-exporter instance, 10 % pods."""
    if i % 10 == 8:
        return f"node:gpu-{i:03d}", {
            "instance": f"10.1.{i // 250}.{i % 250 + 1}:9100",
            "job": "node-exporter",
        }
    if i % 10 == 9:
        return f"pod:ml/trainer-{i:03d}", {
            "namespace": "ml",
            "pod": f"trainer-{i:03d}",
            "job": "kube-state-metrics",
        }
    return f"node:gpu-{i:03d}", {"Hostname": f"gpu-{i:03d}", "gpu": str(i % 8), "UUID": f"GPU-{i:08x}"}


def webhooks(alerts: int, subjects: int, rng: random.Random) -> list[tuple[float, bytes]]:
    """(fraction of the run at which to send it, body), in send order."""
    from tests.alertmanager import alert, body

    per = alerts // subjects
    plan: list[tuple[float, list[dict[str, Any]]]] = []
    for i in range(subjects):
        _, labels = subject_labels(i)
        names = (
            ["GPUXidError", "GPURowRemapFailure"]
            if "Hostname" in labels
            else ["NodeHighTemp", "GPUPodPending"]
        )
        sequence = [alert(names[0], **labels)]
        sequence += [alert(names[0], **labels) for _ in range(max(0, per - 3))]  # Alertmanager's repeats
        sequence += [alert(names[1], **labels), alert(names[1], "resolved", **labels)][: max(0, per - 1)]
        start = rng.random() * 0.8
        chunks: list[list[dict[str, Any]]] = []
        while sequence:
            n = rng.randint(1, 4)
            chunks.append(sequence[:n])
            sequence = sequence[n:]
        for k, chunk in enumerate(chunks):
            plan.append((start + k * (1 - start) / len(chunks), chunk))
    plan.sort(key=lambda p: p[0])
    return [(at, body(chunk)) for at, chunk in plan]


def main(argv: list[str] | None = None) -> int:
    import redis

    from bot.sources.snapshot import SnapshotCluster
    from tests.fakes.kube_api import serve
    from tests.fakes.slack_api import serve_slack
    from tests.services import RedisServer
    from tests.slack_harness import BotProcess, bot_env, post

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--alerts", type=int, default=1000)
    ap.add_argument("--subjects", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--senders", type=int, default=4)
    ap.add_argument("--seed", type=int, default=15)
    args = ap.parse_args(argv)

    plan = webhooks(args.alerts, args.subjects, random.Random(args.seed))
    sent_alerts = sum(len(json.loads(b)["alerts"]) for _, b in plan)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    with (
        tempfile.TemporaryDirectory(prefix="alerts-bench-") as tmp,
        serve_slack() as slack,
        RedisServer() as rds,
        serve(SnapshotCluster(fleet(args.subjects))) as kube,
    ):
        env = bot_env(
            slack.url,
            REDIS_URL=rds.url,
            GPUBOT_ALERT_TOKEN=TOKEN,
            GPUBOT_ALERT_CHANNEL=CHANNEL,
            GPUBOT_ALERT_MAX_THREADS_PER_HOUR=str(MAX_THREADS),
        )
        bot = BotProcess(["--kubeconfig", kube.kubeconfig], env, Path(tmp) / "bot.log")
        try:
            latencies: list[float] = []
            codes: dict[int, int] = {}
            lock = threading.Lock()
            queue = list(enumerate(plan))
            t0 = time.monotonic()
            hours = {int(time.time() // 3600)}

            def sender() -> None:
                while True:
                    with lock:
                        if not queue:
                            return
                        _, (at, data) = queue.pop(0)
                    wait = t0 + at * args.seconds - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
                    started = time.perf_counter()
                    code, _ = post(bot.url + "/alertmanager", data.decode(), headers)
                    took = time.perf_counter() - started
                    with lock:
                        latencies.append(took)
                        codes[code] = codes.get(code, 0) + 1

            threads = [threading.Thread(target=sender) for _ in range(args.senders)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            hours.add(int(time.time() // 3600))
            sent_s = time.monotonic() - t0
            # Slack catches up after the answers: wait until the bot's posts stop changing.
            last, still = -1, 0
            while still < 20:
                n = len(slack.calls)
                still = still + 1 if n == last else 0
                last = n
                time.sleep(0.25)
        finally:
            bot.stop()
        store = redis.Redis.from_url(rds.url, decode_responses=True)
        incidents = [json.loads(store.get(k) or "{}") for k in store.keys("gpubot:alert:incident:*")]
        summaries = [json.loads(store.get(k) or "{}") for k in store.keys("gpubot:alert:summary:*")]

    roots = [
        c
        for c in slack.calls_to("chat.postMessage")
        if c.params.get("channel") == CHANNEL and not c.params.get("thread_ts")
    ]
    storm_posts = [c for c in roots if "Alert storm" in json.dumps(c.params.get("blocks"))]
    threads_opened = len(roots) - len(storm_posts)
    subjects = {
        f"{i['subject']['kind']}:{i['subject'].get('namespace') + '/' if i['subject'].get('namespace') else ''}{i['subject']['name']}"
        for i in incidents
    }
    expected = {subject_labels(i)[0] for i in range(args.subjects)}
    rows = [r for s in summaries for r in s["rows"].values()]
    in_threads = [i for i in incidents if i["kind"] == "thread"]
    print(
        f"{sent_alerts} alerts in {len(plan)} webhooks over {sent_s:.1f} s, {args.senders} senders; codes {codes}"
    )
    print(
        f"webhook round trip: p50 {statistics.median(latencies) * 1000:.1f} ms, "
        f"p99 {percentile(latencies, 99) * 1000:.1f} ms, max {max(latencies) * 1000:.1f} ms"
    )
    print(
        f"threads opened {threads_opened} (limit {MAX_THREADS} per hour, {len(hours)} clock hour(s)), "
        f"storm summaries {len(storm_posts)} with {len(rows)} rows; incidents {len(incidents)} of {len(expected)} subjects"
    )
    ok = True
    checks = [
        (percentile(latencies, 99) < P99_TARGET_S, f"p99 >= {P99_TARGET_S * 1000:.0f} ms"),
        (codes == {200: len(plan)}, f"not every webhook answered 200: {codes}"),
        (
            threads_opened <= MAX_THREADS * len(hours) and len(in_threads) == threads_opened,
            "more threads than the storm limit",
        ),
        (len(storm_posts) == len(summaries) <= len(hours), "more than one summary message an hour"),
        (subjects == expected and len(incidents) == len(expected), "an incident lost or duplicated"),
        (
            len(rows) + len(in_threads) == len(expected) and len({r["label"] for r in rows}) == len(rows),
            "a storm row lost or doubled",
        ),
    ]
    for good, why in checks:
        if not good:
            print("FAILED:", why)
            ok = False
    print("targets met" if ok else "targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
