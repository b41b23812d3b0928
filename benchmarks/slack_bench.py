"""The Slack bot under a burst: ack latency and time to the first layer message.

    python benchmarks/slack_bench.py [--burst 50] [--workers 4]

`gpubot serve --http` runs as a subprocess reading the fake Kubernetes API
(tests/fakes/kube_api.py, through the real kubernetes client) and posting to
the fake Slack Web API (tests/fakes/slack_api.py). `--burst` signed `/gpu why`
commands are sent at once, one channel each, over real HTTP. Measured: the
HTTP round trip of each command (the ack), and, per command, the time from
sending it to the fake Slack receiving its layer-1 thread message. Every
command must produce its walk (root, layer 1, layer 5): none lost.

Targets (issue 5): ack p99 < 300 ms; layer-1 message p50 < 1.5 s; no command lost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bot`, `tests` importable
    sys.path.insert(0, str(REPO))

ACK_P99_TARGET_S = 0.300
LAYER1_P50_TARGET_S = 1.5


def main(argv: list[str] | None = None) -> int:
    from benchmarks.burst import fire_burst, percentile
    from bot.sources.scenario import build_sources, load_scenario
    from tests.fakes.kube_api import serve
    from tests.fakes.slack_api import serve_slack
    from tests.slack_harness import BotProcess, bot_env, slash_body, write_scenario

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--workers", type=int, default=4, help="GPUBOT_WORKERS of the bot")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="slack-bench-") as tmp, serve_slack() as slack:
        snapshot, _ = build_sources(load_scenario(write_scenario(Path(tmp))))
        with serve(snapshot) as kube:
            env = bot_env(slack.url, GPUBOT_WORKERS=str(args.workers))
            bot = BotProcess(["--kubeconfig", kube.kubeconfig], env, Path(tmp) / "bot.log")
            try:
                channels = [f"C0BENCH{i:03d}" for i in range(args.burst)]
                bodies = {
                    c: slash_body("why ml/trainer-0", user=f"U0B{i:03d}", channel=c)
                    for i, c in enumerate(channels)
                }
                burst = fire_burst(bot.url + "/slack/events", slack, bodies)
            finally:
                bot.stop()

    acks, statuses, first, lost = burst.acks, burst.statuses, burst.first, burst.lost
    ack_p50, ack_p99 = percentile(acks, 50), percentile(acks, 99)
    print(f"burst of {args.burst} signed /gpu why over HTTP, {args.workers} walk workers")
    print(f"  HTTP statuses: {sorted(set(statuses))}")
    print(
        f"  ack latency: p50 {ack_p50 * 1000:.0f} ms, p99 {ack_p99 * 1000:.0f} ms, max {max(acks) * 1000:.0f} ms"
    )
    if first:
        print(
            f"  time to the layer-1 message: p50 {statistics.median(first):.2f} s, "
            f"p99 {percentile(first, 99):.2f} s, max {max(first):.2f} s"
        )
    print(f"  commands lost: {len(lost)}")
    ok = (
        statuses.count(200) == args.burst
        and ack_p99 < ACK_P99_TARGET_S
        and not lost
        and bool(first)
        and statistics.median(first) < LAYER1_P50_TARGET_S
    )
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
