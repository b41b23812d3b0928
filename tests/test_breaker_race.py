"""The circuit breaker under concurrent cordons: the count and the patch are one step.

4 GPU nodes at GPUBOT_CORDON_MAX_FRACTION 0.25: one cordon may pass, a second would
be 2/4. Two cordons that both count before either patches would both pass; the
writer here sleeps in patch_node so that window is wide open.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bot.actions.cordon import BUSY, BreakerLock, CordonOutcome, cordon, store_breaker_lock
from bot.slack.state import MemoryState, RedisState
from bot.sources.snapshot import SnapshotCluster
from layers.sources import K8sObject
from tests.bundle_scenario import node
from tests.fakes.kube_api import serve
from tests.services import RedisServer

PATCH_S = 0.4


class SlowWriter:
    """The cluster's own writer, taking PATCH_S per patch as a real API round trip under load may."""

    def __init__(self, cluster: SnapshotCluster) -> None:
        self.cluster = cluster
        self.patched: list[str] = []

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> K8sObject:
        time.sleep(PATCH_S)
        self.patched.append(name)
        return self.cluster.patch_node(name, patch)


def four_gpu_nodes() -> SnapshotCluster:
    return SnapshotCluster([node(f"gpu-{i}", 8, 8) for i in range(4)] + [node("cpu-1", 0, 0, gpu=False)])


def race(locks: list[BreakerLock | None]) -> tuple[list[CordonOutcome], SlowWriter, SnapshotCluster]:
    """One thread per lock, each cordoning its own node, released together."""
    cluster = four_gpu_nodes()
    writer = SlowWriter(cluster)
    start = threading.Barrier(len(locks))
    out: list[CordonOutcome] = []

    def one(i: int, lock: BreakerLock | None) -> None:
        start.wait()
        out.append(cordon(cluster, writer, f"gpu-{i}", "Xid 79", f"slack:U{i}", breaker_lock=lock))

    threads = [threading.Thread(target=one, args=(i, lk)) for i, lk in enumerate(locks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out, writer, cluster


def cordoned(cluster: SnapshotCluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.list_nodes() if n["spec"].get("unschedulable"))


def test_without_a_lock_both_pass_the_breaker() -> None:
    """The race is real: this is what the lock prevents (and what the tests below would catch)."""
    out, _writer, cluster = race([contextlib.nullcontext, contextlib.nullcontext])
    assert sum(o.applied for o in out) == 2 and len(cordoned(cluster)) == 2


def test_two_threads_of_one_process_exactly_one_cordon_applies() -> None:
    out, writer, cluster = race([None, None])  # the process-local lock by default
    assert sum(o.applied for o in out) == 1 and len(writer.patched) == 1
    [refused] = [o for o in out if not o.applied]
    assert refused.refused and "2 of 4 GPU nodes" in refused.message
    assert len(cordoned(cluster)) == 1


def test_two_replicas_sharing_redis_exactly_one_cordon_applies(redis_server: RedisServer) -> None:
    prefix = f"race-{uuid.uuid4().hex[:8]}:"
    # Two clients with their own connections, as two pods have: only Redis is shared.
    locks = [store_breaker_lock(RedisState(redis_server.url, prefix=prefix)) for _ in range(2)]
    out, writer, cluster = race(list(locks))
    assert sum(o.applied for o in out) == 1 and len(writer.patched) == 1
    assert len(cordoned(cluster)) == 1


def test_a_cordon_that_cannot_get_the_lock_is_refused_and_sends_nothing() -> None:
    store = MemoryState()
    cluster = four_gpu_nodes()
    writer = SlowWriter(cluster)
    with store.lock("cordon-breaker", timeout_s=30):
        out = cordon(cluster, writer, "gpu-0", "r", "a", breaker_lock=store_breaker_lock(store, wait_s=0.2))
    assert out.refused and BUSY in out.message and writer.patched == []
    # Once the holder is done, the same cordon goes through.
    assert cordon(cluster, writer, "gpu-0", "r", "a", breaker_lock=store_breaker_lock(store)).applied


def test_the_bot_s_node_actions_take_the_store_lock() -> None:
    from bot.ops.config import load_config
    from bot.slack.node_actions import ClusterNodeActions
    from bot.sources.opener import Sources
    from layers.sources import NoTelemetry

    store = MemoryState()
    cluster = four_gpu_nodes()
    actions = ClusterNodeActions(Sources(cluster, cluster, NoTelemetry(0.0), "test"), load_config({}), store)
    with store.lock("cordon-breaker", timeout_s=30, wait_s=1):
        started = time.monotonic()
        got: list[Any] = []
        t = threading.Thread(target=lambda: got.append(actions.cordon("gpu-1", "slack:U1", "r")))
        t.start()
        time.sleep(0.3)
        assert got == []  # waiting on the store's lock, not cordoning
    t.join(20)
    assert time.monotonic() - started >= 0.3
    assert got[0].changed and cordoned(cluster) == ["gpu-1"]


def _cli(args: list[str], env: dict[str, str]) -> Callable[[], subprocess.CompletedProcess[str]]:
    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "bot.cli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            cwd=Path(__file__).resolve().parents[1],
        )

    return run


def test_two_cli_processes_with_redis_url_exactly_one_cordon_applies(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBOT_", "REDIS_", "PROMETHEUS_"))}
    env["REDIS_URL"] = redis_server.url
    with serve(four_gpu_nodes()) as api:
        # Longer than the two interpreters' start-up skew: both count before either patch lands.
        api.fail("/nodes/gpu-", delay=3.0, method="PATCH")
        runs = [
            _cli(["cordon", f"gpu-{i}", "--reason", "Xid 79", "--kubeconfig", api.kubeconfig], env)
            for i in range(2)
        ]
        results: list[subprocess.CompletedProcess[str]] = []
        threads = [threading.Thread(target=lambda r=r: results.append(r())) for r in runs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(r.returncode for r in results) == [0, 2], [r.stderr for r in results]
        assert api.count("/nodes/gpu-", method="PATCH") == 1
        assert len(cordoned(api.snapshot)) == 1
        refused = next(r for r in results if r.returncode == 2)
        assert "2 of 4 GPU nodes" in refused.stderr
