"""Many clusters: the gateway's ack under a burst, and what the gateway adds to command → layer 1.

    python benchmarks/cluster_bench.py [--burst 50] [--clusters 3] [--sequential 20]

A real redis-server, the fake Slack Web API and one fake Kubernetes API per
cluster (tests/fakes/), all on 127.0.0.1. Two set-ups run one after the other:

1. the single process (`gpubot serve --http --kubeconfig …`, as
   benchmarks/slack_bench.py runs it), sent `--sequential` `/gpu why` one at a
   time: the time from sending each to the fake Slack receiving its layer-1
   message;
2. `gpubot serve --role gateway --http` and one `--role agent` per cluster,
   each agent on its own fake API: the same `--sequential` commands through the
   gateway (to the first cluster), then `--burst` signed commands at once spread
   over the clusters (ack = each command's HTTP round trip at the gateway).

Targets (issue 12): gateway ack p99 < 300 ms for 50 concurrent commands across 3
clusters; command → layer 1 through the gateway within 150 ms of the single
process (p50 of the sequential runs); no command lost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bot`, `tests` importable
    sys.path.insert(0, str(REPO))

ACK_P99_TARGET_S = 0.300
GATEWAY_OVERHEAD_TARGET_S = 0.150


def sequential(bot: Any, slack: Any, text: str, prefix: str, n: int) -> list[float]:
    """Send one command, wait for its layer-1 message, n times: the latencies."""
    from benchmarks.burst import layer_at
    from tests.slack_harness import post, sign, slash_body

    took: list[float] = []
    for i in range(n):
        channel = f"{prefix}{i:03d}"
        body = slash_body(text, user="U0SEQ", channel=channel)
        headers = sign(body)
        t0 = time.monotonic()
        status, _ = post(bot.url + "/slack/events", body, headers, timeout=30)
        assert status == 200
        deadline = time.monotonic() + 30
        while (at := layer_at(slack, channel, 1)) is None and time.monotonic() < deadline:
            time.sleep(0.002)
        if at is None:
            raise SystemExit(f"no layer 1 for {channel}")
        took.append(at - t0)
        while layer_at(slack, channel, 5) is None and time.monotonic() < deadline:
            time.sleep(0.005)  # let the walk end before the next one: one at a time
    return took


def main(argv: list[str] | None = None) -> int:
    from benchmarks.burst import fire_burst, percentile
    from bot.sources.scenario import build_sources, load_scenario
    from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
    from tests.fakes.kube_api import serve
    from tests.fakes.slack_api import serve_slack
    from tests.services import RedisServer
    from tests.slack_harness import BotProcess, bot_env, slash_body

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--clusters", type=int, default=3)
    ap.add_argument("--sequential", type=int, default=20)
    args = ap.parse_args(argv)
    names = [f"c{i}" for i in range(args.clusters)]

    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp, ExitStack() as stack:
        folder = Path(tmp)
        slack = stack.enter_context(serve_slack())
        redis = stack.enter_context(RedisServer())
        kubes = {}
        for n in names:
            snapshot, _ = build_sources(load_scenario(cluster_scenario(folder, n)))
            kubes[n] = stack.enter_context(serve(snapshot))

        single = BotProcess(
            ["--kubeconfig", kubes[names[0]].kubeconfig], bot_env(slack.url), folder / "single.log"
        )
        try:
            sequential(single, slack, "why ml/trainer-0", "C0WARM", 3)
            alone = sequential(single, slack, "why ml/trainer-0", "C0ALONE", args.sequential)
        finally:
            single.stop()

        procs = [BotProcess(["--role", "gateway"], gateway_env(slack.url, redis.url), folder / "gateway.log")]
        gateway = procs[0]
        try:
            for n in names:
                env = agent_env(
                    slack.url, redis.url, n, GPUBOT_HEARTBEAT_SECONDS="5", GPUBOT_CLAIM_IDLE_SECONDS="60"
                )
                procs.append(
                    BotProcess(
                        ["--role", "agent", "--kubeconfig", kubes[n].kubeconfig], env, folder / f"{n}.log"
                    )
                )
            sequential(gateway, slack, f"why {names[0]}/ml/trainer-0", "C0GWWARM", 3)
            through = sequential(gateway, slack, f"why {names[0]}/ml/trainer-0", "C0GWSEQ", args.sequential)

            channels = [f"C0BURST{i:03d}" for i in range(args.burst)]
            bodies = {
                c: slash_body(f"why {names[i % len(names)]}/ml/trainer-0", user=f"U0B{i:03d}", channel=c)
                for i, c in enumerate(channels)
            }
            burst = fire_burst(gateway.url + "/slack/events", slack, bodies)
        finally:
            for p in procs:
                p.stop()

    acks, statuses, first, lost = burst.acks, burst.statuses, burst.first, burst.lost
    alone_p50, through_p50 = statistics.median(alone), statistics.median(through)
    overhead = through_p50 - alone_p50
    ack_p50, ack_p99 = percentile(acks, 50), percentile(acks, 99)
    print(f"command → layer 1, one at a time ({args.sequential} each):")
    print(f"  single process: p50 {alone_p50 * 1000:.0f} ms, p99 {percentile(alone, 99) * 1000:.0f} ms")
    print(
        f"  through the gateway: p50 {through_p50 * 1000:.0f} ms, p99 {percentile(through, 99) * 1000:.0f} ms"
    )
    print(f"  the gateway adds {overhead * 1000:.0f} ms at p50")
    print(f"burst of {args.burst} across {args.clusters} clusters at the gateway:")
    print(f"  HTTP statuses: {sorted(set(statuses))}")
    print(
        f"  ack latency: p50 {ack_p50 * 1000:.0f} ms, p99 {ack_p99 * 1000:.0f} ms, max {max(acks) * 1000:.0f} ms"
    )
    if first:
        print(
            f"  time to the layer-1 message: p50 {statistics.median(first):.2f} s, p99 {percentile(first, 99):.2f} s"
        )
    print(f"  commands lost: {len(lost)}")
    ok = (
        statuses.count(200) == args.burst
        and ack_p99 < ACK_P99_TARGET_S
        and overhead < GATEWAY_OVERHEAD_TARGET_S
        and not lost
    )
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
