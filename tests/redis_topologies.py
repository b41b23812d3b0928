"""Redis as users run it, for the tests: a 3-master Redis Cluster and a primary/replica/3-Sentinel set.

Each is real `redis-server` processes on 127.0.0.1 and free ports (the
cluster bus and Sentinel ports too), started by the tests, with an
append-only file fsynced on every write where restarts must keep data. The
same small surface as tests/services.py's RedisServer: `url`, `env` (the
settings a gpubot process needs to reach it), `client()`, `restart()`, `stop()`.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import redis
from redis.cluster import RedisCluster
from redis.sentinel import Sentinel

from tests.services import HOST, free_port

MASTER = "gpubot-master"


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        from tests.services import ServiceUnavailable

        raise ServiceUnavailable(f"{name} is not installed (apt-get install redis-server)")
    return path


def _wait(what: str, probe: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if probe():
                return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def _stop(proc: subprocess.Popen[bytes] | None, kill: bool = False) -> None:
    if proc is None or proc.poll() is not None:
        return
    if kill:
        proc.kill()
    else:
        proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


class RedisClusterServer:
    """Three masters (each with `replicas` replicas), slots spread by `redis-cli --cluster create`."""

    mode = "cluster"

    def __init__(self, workdir: Path, masters: int = 3, replicas: int = 0) -> None:
        self.workdir = workdir
        self.replicas = replicas
        nodes = masters * (1 + replicas)
        self.ports = [free_port() for _ in range(nodes)]
        self.bus = [free_port() for _ in range(nodes)]
        self.procs: list[subprocess.Popen[bytes] | None] = [None] * nodes

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.ports[0]}/0"

    @property
    def env(self) -> dict[str, str]:
        return {"GPUBOT_REDIS_MODE": "cluster"}

    def client(self, decode: bool = True) -> Any:
        return RedisCluster(host=HOST, port=self.ports[0], decode_responses=decode)

    def _start_node(self, i: int) -> None:
        folder = self.workdir / f"node-{self.ports[i]}"
        folder.mkdir(parents=True, exist_ok=True)
        args = [
            _binary("redis-server"),
            "--port", str(self.ports[i]), "--bind", HOST, "--save", "",
            "--cluster-enabled", "yes", "--cluster-port", str(self.bus[i]),
            "--cluster-config-file", str(folder / "nodes.conf"), "--cluster-node-timeout", "2000",
            "--appendonly", "yes", "--appendfsync", "always", "--dir", str(folder),
        ]  # fmt: skip
        log = (folder / "redis.log").open("ab")
        self.procs[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        node = redis.Redis(host=HOST, port=self.ports[i])
        _wait(f"cluster node {self.ports[i]}", node.ping)

    def _ok(self) -> bool:
        return all(
            redis.Redis(host=HOST, port=p).cluster("info").get("cluster_state") == "ok" for p in self.ports
        )

    def start(self) -> RedisClusterServer:
        for i in range(len(self.ports)):
            self._start_node(i)
        subprocess.run(
            [_binary("redis-cli"), "--cluster", "create", *(f"{HOST}:{p}" for p in self.ports),
             "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        _wait("the cluster's state ok", self._ok, 30)
        if self.replicas:
            _wait("every replica in sync", self._replicas_up, 30)
        return self

    def _replicas_up(self) -> bool:
        infos = [redis.Redis(host=HOST, port=p).info("replication") for p in self.ports]
        return all(i.get("master_link_status") == "up" for i in infos if i["role"] == "slave")

    def primary_of(self, key: str) -> int:
        """The port of the primary that holds `key` now."""
        node = self.client().get_node_from_key(key)
        return int(node.port)

    def failover(self, key: str) -> int:
        """CLUSTER FAILOVER on a replica of `key`'s shard: it is promoted, the old primary demoted to its
        replica (as in a rolling upgrade or a managed maintenance). The promoted port."""
        old = self.primary_of(key)
        for port in self.ports:
            info = redis.Redis(host=HOST, port=port).info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == old:
                redis.Redis(host=HOST, port=port).execute_command("CLUSTER", "FAILOVER")
                return port
        raise RuntimeError(f"no replica of {old} to fail over to")

    def restart(self, down_s: float = 0.0, timeout_s: float = 30.0) -> None:
        """Every node stopped (SIGTERM), then started again on the same ports and files."""
        for proc in self.procs:
            _stop(proc)
        time.sleep(down_s)
        for i in range(len(self.ports)):
            self._start_node(i)
        _wait("the cluster's state ok again", self._ok, timeout_s)

    def stop(self) -> None:
        for proc in self.procs:
            _stop(proc)

    def __enter__(self) -> RedisClusterServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SentinelSet:
    """A primary, one replica and three Sentinels watching them (quorum 2, quick failover)."""

    mode = "sentinel"

    def __init__(self, workdir: Path, down_after_ms: int = 1000) -> None:
        self.workdir = workdir
        self.down_after_ms = down_after_ms
        self.data_ports = [free_port(), free_port()]  # primary, replica (at start)
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.data: list[subprocess.Popen[bytes] | None] = [None, None]
        self.sentinels: list[subprocess.Popen[bytes] | None] = [None] * 3

    @property
    def url(self) -> str:
        return f"redis://{HOST}:{self.data_ports[0]}/0"  # not used in sentinel mode but by plain probes

    @property
    def env(self) -> dict[str, str]:
        return {
            "GPUBOT_REDIS_MODE": "sentinel",
            "REDIS_SENTINELS": ",".join(f"{HOST}:{p}" for p in self.sentinel_ports),
            "REDIS_SENTINEL_MASTER": MASTER,
        }

    def client(self, decode: bool = True) -> Any:
        sentinel = Sentinel([(HOST, p) for p in self.sentinel_ports], socket_timeout=2)
        return sentinel.master_for(MASTER, decode_responses=decode, socket_timeout=2)

    def master_port(self) -> int:
        sentinel = Sentinel([(HOST, p) for p in self.sentinel_ports], socket_timeout=1)
        return int(sentinel.discover_master(MASTER)[1])

    def _start_data(self, i: int, replica_of: int | None) -> None:
        folder = self.workdir / f"data-{self.data_ports[i]}"
        folder.mkdir(parents=True, exist_ok=True)
        args = [
            _binary("redis-server"), "--port", str(self.data_ports[i]), "--bind", HOST, "--save", "",
            "--appendonly", "yes", "--appendfsync", "always", "--dir", str(folder),
        ]  # fmt: skip
        if replica_of is not None:
            args += ["--replicaof", HOST, str(replica_of)]
        log = (folder / "redis.log").open("ab")
        self.data[i] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        _wait(f"redis {self.data_ports[i]}", redis.Redis(host=HOST, port=self.data_ports[i]).ping)

    def _start_sentinel(self, i: int) -> None:
        port = self.sentinel_ports[i]
        conf = self.workdir / f"sentinel-{port}.conf"
        conf.write_text(
            f"port {port}\nbind {HOST}\ndir {self.workdir}\n"
            f"sentinel monitor {MASTER} {HOST} {self.data_ports[0]} 2\n"
            f"sentinel down-after-milliseconds {MASTER} {self.down_after_ms}\n"
            f"sentinel failover-timeout {MASTER} 5000\n"
            f"sentinel parallel-syncs {MASTER} 1\n"
        )
        log = (self.workdir / f"sentinel-{port}.log").open("ab")
        self.sentinels[i] = subprocess.Popen(
            [_binary("redis-server"), str(conf), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
        )
        _wait(f"sentinel {port}", redis.Redis(host=HOST, port=port).ping)

    def start(self) -> SentinelSet:
        self._start_data(0, None)
        self._start_data(1, self.data_ports[0])
        _wait(
            "the replica in sync",
            lambda: (
                redis.Redis(host=HOST, port=self.data_ports[1]).info("replication")["master_link_status"]
                == "up"
            ),
        )
        for i in range(3):
            self._start_sentinel(i)
        _wait(
            "the sentinels agreeing",
            lambda: all(
                int(redis.Redis(host=HOST, port=p).sentinel_master(MASTER)["num-other-sentinels"]) == 2
                and int(redis.Redis(host=HOST, port=p).sentinel_master(MASTER)["num-slaves"]) == 1
                for p in self.sentinel_ports
            ),
            30,
        )
        return self

    def failover(self) -> None:
        """SENTINEL FAILOVER: the replica is promoted, the old primary turns replica."""
        redis.Redis(host=HOST, port=self.sentinel_ports[0]).execute_command("SENTINEL", "FAILOVER", MASTER)

    def kill_primary(self) -> None:
        """SIGKILL of the data node that is primary now: no goodbye, the Sentinels must notice
        (down-after-milliseconds) and elect the replica."""
        port = self.master_port()
        _stop(self.data[self.data_ports.index(port)], kill=True)

    def stop(self) -> None:
        for proc in [*self.sentinels, *self.data]:
            _stop(proc)

    def __enter__(self) -> SentinelSet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
