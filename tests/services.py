"""Real Redis and Prometheus for the tests, on 127.0.0.1 and free ports.

Prometheus gets its history by backfill: the series are written as
OpenMetrics (timestamps in seconds, `# EOF` last), turned into TSDB blocks
with `promtool tsdb create-blocks-from openmetrics`, and the server starts on
that data directory. Each instance gets a fresh temporary directory because
Prometheus rewrites it. Nothing here binds 0.0.0.0.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import ClassVar

import redis

from bot.sources.openmetrics import write_openmetrics
from bot.sources.series import SeriesData

HOST = "127.0.0.1"

# promtool (Debian 2.42) cuts blocks at 2 h and has no --max-block-duration;
# Prometheus >= 2.39 queries overlapping/old blocks without a flag, and
# retention counts from the newest block, so old backfilled data stays visible
# as long as the dataset itself spans less than this.
RETENTION = "30d"
PROMETHEUS_CONFIG = "global:\n  scrape_interval: 1m\nscrape_configs: []\n"


class ServiceUnavailable(RuntimeError):
    """A binary is missing: the fixture turns this into a pytest skip."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ServiceUnavailable(
            f"{name} is not installed (scripts/test.sh installs it: apt-get install prometheus redis-server)"
        )
    return path


def require(*names: str) -> None:
    """Raise ServiceUnavailable naming the first missing binary."""
    for name in names:
        _binary(name)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def start_ready_server(
    what: str, argv: Callable[[int], list[str]], log: Path, timeout_s: float
) -> tuple[subprocess.Popen[bytes], int]:
    """Start `argv(port)` on a free port, output to `log`, until its /-/ready answers 200 (Prometheus and
    Alertmanager alike): (the process, its port). Three tries: a free port can be taken before the bind."""
    port = 0
    for _ in range(3):
        port = free_port()
        with log.open("ab") as logf:
            proc = subprocess.Popen(argv(port), stdout=logf, stderr=subprocess.STDOUT)
        if _wait_ready(proc, f"http://{HOST}:{port}/-/ready", timeout_s):
            return proc, port
        _stop(proc)
    raise RuntimeError(f"{what} did not become ready on http://{HOST}:{port}:\n{_tail(log)}")


def _wait_ready(proc: subprocess.Popen[bytes], url: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.02)
    return False


# --- Redis ----------------------------------------------------------------------


class RedisServer:
    """A `redis-server`; `url` is redis://127.0.0.1:PORT/0. No persistence, unless `aof_dir` is given:
    then an append-only file there, fsynced on every write, so `restart()` (same port) keeps the data."""

    def __init__(self, aof_dir: Path | None = None) -> None:
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.aof_dir = aof_dir

    mode = "single"
    # What a gpubot process needs besides REDIS_URL (tests/redis_topologies.py): nothing.
    env: ClassVar[dict[str, str]] = {}

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.port}/0"

    def client(self, decode: bool = True) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=decode)

    def _args(self) -> list[str]:
        args = ["--port", str(self.port), "--bind", HOST, "--save", ""]
        if self.aof_dir is None:
            return [*args, "--appendonly", "no"]
        return [*args, "--appendonly", "yes", "--appendfsync", "always", "--dir", str(self.aof_dir)]

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        binary = _binary("redis-server")
        for _ in range(3):  # a free port can be taken between the probe and the bind
            self.port = free_port()
            self.proc = subprocess.Popen(
                [binary, *self._args()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            if self._wait_ping(timeout_s):
                return self
            _stop(self.proc)
        raise RuntimeError(f"redis-server did not answer PING on {HOST}:{self.port}")

    def restart(self, down_s: float = 0.0, timeout_s: float = 10.0) -> None:
        """Stop (SIGTERM) and start again on the same port, after `down_s` with nothing listening."""
        self.stop()
        time.sleep(down_s)
        self.proc = subprocess.Popen(
            [_binary("redis-server"), *self._args()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        if not self._wait_ping(timeout_s):
            raise RuntimeError(f"redis-server did not come back on {HOST}:{self.port}")

    def _wait_ping(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection((HOST, self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    return True
            time.sleep(0.01)
        return False

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- OpenMetrics ------------------------------------------------------------------

# One writer for the product and the tests: scenario series backfill exactly as the product writes them.
Series = SeriesData


# --- Prometheus -------------------------------------------------------------------


class PrometheusServer:
    """A `prometheus` serving backfilled history from a fresh temporary directory."""

    def __init__(self, workdir: Path, config: str = PROMETHEUS_CONFIG, flags: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.config = config  # rule_files in it are relative to workdir
        self.flags = tuple(flags)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def backfill(self, openmetrics_text: str) -> None:
        promtool = _binary("promtool")
        src = self.workdir / "series.om"
        src.write_text(openmetrics_text)
        res = subprocess.run(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "-q",
                str(src),
                str(self.workdir / "data"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if res.returncode != 0:
            raise RuntimeError(f"promtool backfill failed ({res.returncode}): {res.stderr.strip()[-800:]}")

    def start(self, timeout_s: float = 20.0) -> PrometheusServer:
        binary = _binary("prometheus")
        config = self.workdir / "prometheus.yml"
        config.write_text(self.config)
        self.proc, self.port = start_ready_server(
            "prometheus",
            lambda port: [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--storage.tsdb.retention.time={RETENTION}",
                f"--web.listen-address={HOST}:{port}",
                *self.flags,
            ],
            self.workdir / "prometheus.log",
            timeout_s,
        )
        return self

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
        shutil.rmtree(self.workdir, ignore_errors=True)  # a fresh one per instance, never reused


def openmetrics_text(series: Iterable[SeriesData]) -> str:
    buf = io.StringIO()
    write_openmetrics(series, buf)
    return buf.getvalue()


def start_prometheus(series: Iterable[SeriesData], parent: Path | None = None) -> PrometheusServer:
    """Backfill `series` into a fresh temporary directory and start Prometheus on it."""
    server = PrometheusServer(Path(tempfile.mkdtemp(prefix="gpubot-prom-", dir=parent)))
    server.backfill(openmetrics_text(series))
    return server.start()


class PrometheusFactory:
    """One Prometheus per distinct dataset for the whole session, stopped by `stop_all`."""

    def __init__(self, parent: Path | None = None) -> None:
        self.parent = parent
        self._servers: dict[str, PrometheusServer] = {}

    def __call__(self, series: Iterable[SeriesData]) -> PrometheusServer:
        text = openmetrics_text(series)
        key = hashlib.sha256(text.encode()).hexdigest()
        if key not in self._servers:
            server = PrometheusServer(Path(tempfile.mkdtemp(prefix="gpubot-prom-", dir=self.parent)))
            server.backfill(text)
            self._servers[key] = server.start()
        return self._servers[key]

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
