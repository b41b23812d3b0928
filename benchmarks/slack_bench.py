"""The Slack bot under a burst: ack latency and time to the first layer message.

    python benchmarks/slack_bench.py [--burst 50] [--workers 4] [--pace 1]

`gpubot serve --http` runs as a subprocess reading the fake Kubernetes API
(tests/fakes/kube_api.py, through the real kubernetes client) and posting to
the fake Slack Web API (tests/fakes/slack_api.py). `--burst` signed `/gpu why`
commands are sent at once, one channel each, over real HTTP. Measured: the
HTTP round trip of each command (the ack), and, per command, the time from
sending it to the fake Slack receiving its layer-1 thread message. Every
command must produce its walk (root, layer 1, layer 5): none lost. The bot
keeps Slack's per-channel pace (`--pace`, GPUBOT_SLACK_CHANNEL_PACE_SECONDS,
1 s as in production): a walk's layer-1 message goes to its root's channel,
so it follows the root by at least that. The bot process's CPU seconds and
the machine's load are printed with the figures.

Targets (issue 5): ack p99 < 300 ms; layer-1 message p50 < 1.5 s; no command lost.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bot`, `tests` importable
    sys.path.insert(0, str(REPO))

ACK_P99_TARGET_S = 0.300
LAYER1_P50_TARGET_S = 1.5


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.burst import fire_burst, percentile
    from bot.sources.scenario import build_sources, load_scenario
    from tests.fakes.kube_api import serve
    from tests.fakes.slack_api import serve_slack
    from tests.slack_harness import BotProcess, bot_env, slash_body, write_scenario

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--burst", type=int, default=50)
    ap.add_argument("--workers", type=int, default=4, help="GPUBOT_WORKERS of the bot")
    ap.add_argument("--pace", type=float, default=1.0, help="GPUBOT_SLACK_CHANNEL_PACE_SECONDS of the bot")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="slack-bench-") as tmp, serve_slack() as slack:
        snapshot, _ = build_sources(load_scenario(write_scenario(Path(tmp))))
        with serve(snapshot) as kube:
            env = bot_env(
                slack.url,
                GPUBOT_WORKERS=str(args.workers),
                GPUBOT_SLACK_CHANNEL_PACE_SECONDS=f"{args.pace:g}",
            )
            bot = BotProcess(["--kubeconfig", kube.kubeconfig], env, Path(tmp) / "bot.log")
            cpu = _cpu_s(bot.proc.pid)
            try:
                channels = [f"C0BENCH{i:03d}" for i in range(args.burst)]
                bodies = {
                    c: slash_body("why ml/trainer-0", user=f"U0B{i:03d}", channel=c)
                    for i, c in enumerate(channels)
                }
                burst = fire_burst(bot.url + "/slack/events", slack, bodies)
                cpu = _cpu_s(bot.proc.pid) - cpu
            finally:
                bot.stop()

    acks, statuses, first, lost = burst.acks, burst.statuses, burst.first, burst.lost
    ack_p50, ack_p99 = percentile(acks, 50), percentile(acks, 99)
    print(
        f"burst of {args.burst} signed /gpu why over HTTP, {args.workers} walk workers, pace {args.pace:g} s"
    )
    print(f"  load {Path('/proc/loadavg').read_text().split()[:3]}; bot CPU during the burst {cpu:.2f} s")
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
