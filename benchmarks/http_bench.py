"""`/healthz` and a signed command while hostile clients hold connections to `gpubot serve --http`.

    python benchmarks/http_bench.py [--each 50] [--probes 200]

The bot runs as a process on 127.0.0.1 against the fake Slack. First the
latency of `/healthz` alone; then with `--each` connections of each hostile
kind held open (idle, headers trickled, a body shorter than its
Content-Length, an unsigned 64 KB `a-a-a-…` body re-sent in a loop,
Transfer-Encoding with Content-Length): `/healthz` p50/p99/max and a signed
`/gpu help` round trip. Each phase also prints the CPU seconds the bot process
spent in it (user + system, from /proc/<pid>/stat), so a figure can be read
next to the machine's load (`uptime`) it was taken under.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakes.slack_api import serve_slack
from tests.slack_harness import BotProcess, bot_env, get, post, sign, slash_body, write_scenario

BOMB = ("token=" + "a-" * 32768).encode()


def _req(headers: list[str], body: bytes = b"") -> bytes:
    head = "".join(f"{h}\r\n" for h in ["POST /slack/events HTTP/1.1", "Host: 127.0.0.1", *headers])
    return head.encode() + b"\r\n" + body


HOLD = {
    "idle": b"",
    "slow headers": b"POST /slack/events HTTP/1.1\r\nHost: x\r\nX-Slow: a",
    "short body": _req(["Content-Length: 5000"], b"0123456789"),
    "TE+CL": _req(["Transfer-Encoding: chunked", "Content-Length: 5"], b"0\r\n\r\n"),
}


def _bombs(port: int, stop: Any, each: int) -> None:
    """`each` clients re-sending the unsigned 64 KB body until stopped (in their own process, so
    their threads do not share the probing client's interpreter lock)."""

    def loop() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(_req([f"Content-Length: {len(BOMB)}", "X-Slack-Signature: v0=1"], BOMB))
                s.recv(4096)

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(each)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _probe(url: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        assert get(url + "/healthz", timeout=5)[0] == 200
        out.append(time.perf_counter() - started)
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _line(name: str, times: list[float], cpu_s: float) -> str:
    q = statistics.quantiles(times, n=100)
    return (
        f"{name}: p50 {q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms, max {max(times) * 1000:.1f} ms; "
        f"bot CPU {cpu_s:.2f} s over {len(times)} probes"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--each", type=int, default=50)
    ap.add_argument("--probes", type=int, default=200)
    args = ap.parse_args()
    with serve_slack() as slack, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bot = BotProcess(["--scenario", str(write_scenario(folder))], bot_env(slack.url), folder / "bot.log")
        try:
            pid = bot.proc.pid
            print(f"load: {Path('/proc/loadavg').read_text().split()[:3]}")
            cpu = _cpu_s(pid)
            alone = _probe(bot.url, args.probes)
            print(_line("/healthz alone", alone, _cpu_s(pid) - cpu))
            held = []
            for data in HOLD.values():
                for _ in range(args.each):
                    conn = socket.create_connection(("127.0.0.1", bot.port), timeout=5)
                    if data:
                        conn.sendall(data)
                    held.append(conn)
            stop = multiprocessing.Event()
            bombs = multiprocessing.Process(target=_bombs, args=(bot.port, stop, args.each), daemon=True)
            bombs.start()
            time.sleep(1.0)  # let the senders get going
            try:
                kinds = len(HOLD) + 1
                cpu = _cpu_s(pid)
                loaded = _probe(bot.url, args.probes)
                hostile = f"/healthz with {args.each} of each of {kinds} hostile kinds"
                print(_line(hostile, loaded, _cpu_s(pid) - cpu))
                body = slash_body("help")
                started = time.perf_counter()
                status, _ = post(bot.url + "/slack/events", body, sign(body))
                print(
                    f"signed /gpu help under the same load: {status} in {(time.perf_counter() - started) * 1000:.1f} ms"
                )
            finally:
                stop.set()
                bombs.join(timeout=15)
                if bombs.is_alive():
                    bombs.kill()
                for conn in held:
                    conn.close()
            log = (folder / "bot.log").read_text()
            print(f"log: {len(log.splitlines())} lines, tracebacks: {log.count('Traceback')}")
        finally:
            bot.stop()


if __name__ == "__main__":
    main()
