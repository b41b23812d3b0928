"""One command fifteen hundred times: what a flood costs (issue 28, item 3).

    python benchmarks/flood_bench.py [--asks 1500] [--people 50] [--pace 1] [--same 60] [--per-minute 30]

`gpubot serve --http` (one process) over a REAL redis-server posts to the fake
Slack Web API (tests/fakes/slack_api.py) at Slack's pace (`--pace`, 1 s as in
production). `--asks` signed `/gpu node gpu-1` from `--people` people into one
channel over real HTTP, 16 at a time. Measured: the acks (p50, max), what went
to Slack (ledger posts, PNG uploads, ephemerals the bot posted), the drain time
(first ask to the last post or upload), and the bot's RSS before and after.
With `--same 0 --per-minute 0` the coalescing and the limit are off: the
figures of the issue (245 posts in four minutes, ~1,255 still queued).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # run as a script: make `bot`, `tests` importable
    sys.path.insert(0, str(REPO))

CHANNEL = "C0FLOODBENCH"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main(argv: list[str] | None = None) -> int:
    from tests.fakes.slack_api import serve_slack
    from tests.services import RedisServer
    from tests.slack_harness import BotProcess, bot_env, write_scenario

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--asks", type=int, default=1500)
    ap.add_argument("--people", type=int, default=50)
    ap.add_argument("--pace", type=float, default=1.0, help="GPUBOT_SLACK_CHANNEL_PACE_SECONDS")
    ap.add_argument("--same", type=int, default=60, help="GPUBOT_SAME_REQUEST_SECONDS")
    ap.add_argument("--per-minute", type=int, default=30, help="GPUBOT_USER_REQUESTS_PER_MINUTE")
    ap.add_argument("--quiet-s", type=float, default=10.0, help="no new post for this long: drained")
    ap.add_argument("--max-s", type=float, default=1800.0, help="stop waiting for the drain after this")
    args = ap.parse_args(argv)

    with (
        tempfile.TemporaryDirectory(prefix="flood-bench-") as tmp,
        serve_slack() as slack,
        RedisServer() as redis,
    ):
        env = bot_env(
            slack.url,
            REDIS_URL=redis.url,
            GPUBOT_SLACK_CHANNEL_PACE_SECONDS=str(args.pace),
            GPUBOT_SAME_REQUEST_SECONDS=str(args.same),
            GPUBOT_USER_REQUESTS_PER_MINUTE=str(args.per_minute),
        )
        bot = BotProcess(["--scenario", str(write_scenario(Path(tmp)))], env, Path(tmp) / "bot.log")
        try:
            rss_before = _rss_mb(bot.proc.pid)
            acks: list[float] = []
            texts: list[str] = []

            def ask(i: int) -> None:
                started = time.monotonic()
                status, body = bot.command("node gpu-1", user=f"U0FB{i % args.people:03d}", channel=CHANNEL)
                acks.append(time.monotonic() - started)
                texts.append(str(json.loads(body)["text"]) if status == 200 else f"HTTP {status}")

            began = time.monotonic()
            with ThreadPoolExecutor(max_workers=16) as pool:
                list(pool.map(ask, range(args.asks)))
            acked_in = time.monotonic() - began

            def sent() -> list[float]:
                calls = [
                    c
                    for c in slack.calls
                    if c.method in ("chat.postMessage", "files.completeUploadExternal")
                    and c.params.get("channel", c.params.get("channel_id")) in (CHANNEL, None)
                ]
                return [c.at for c in calls]

            last_count, last_change = -1, time.monotonic()
            rss_peak = _rss_mb(bot.proc.pid)
            while time.monotonic() - began < args.max_s:
                rss_peak = max(rss_peak, _rss_mb(bot.proc.pid))
                n = len(sent())
                if n != last_count:
                    last_count, last_change = n, time.monotonic()
                elif time.monotonic() - last_change >= args.quiet_s:
                    break
                time.sleep(0.5)
            at = sent()
            drain = (max(at) - began) if at else 0.0
            posts = sum(1 for c in slack.calls_to("chat.postMessage") if c.params.get("channel") == CHANNEL)
            uploads = len(slack.calls_to("files.completeUploadExternal"))
            ephemerals = len(slack.calls_to("chat.postEphemeral"))
            first = sum(1 for t in texts if t.startswith("reading the ledger"))
            coalesced = sum(1 for t in texts if "was asked in this channel" in t)
            limited = sum(1 for t in texts if t.startswith(":hourglass: you have asked"))
            print(
                f"asks {args.asks} from {args.people} people (same {args.same} s, {args.per_minute}/min, pace {args.pace} s)"
            )
            print(
                f"acks: all {args.asks} in {acked_in:.1f} s; p50 {statistics.median(acks) * 1000:.0f} ms, max {max(acks) * 1000:.0f} ms"
            )
            print(f"answers: {first} run, {coalesced} told where the answer is, {limited} told when to retry")
            print(
                f"to Slack: {posts} ledger posts, {uploads} PNG uploads, {ephemerals} ephemerals; drained in {drain:.1f} s"
            )
            print(
                f"RSS: {rss_before:.0f} MB before, {rss_peak:.0f} MB peak, {_rss_mb(bot.proc.pid):.0f} MB after"
            )
        finally:
            bot.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
