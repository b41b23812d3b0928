"""Probe 8: a backend that accepts and never answers costs a walk one timeout, not one per read.

Before: a stalled pods/log (a node's kubelet gone) made `gpubot why --all` wait 4 x 10 s (one timeout per pod log), a
stalled events list 2 x 10 s, and a stalled Prometheus 2 x 10 s (the layer 4 and layer 5
batches). The walk still ends in `unknown`, saying which read timed out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.sources.kube import KubeCluster
from bot.sources.prom import PrometheusTelemetry
from bot.sources.scenario import build_sources, load_scenario
from bot.sources.snapshot import SnapshotCluster
from bot.sources.stalls import STALL_MEMORY_TIMEOUTS
from layers.findings import Severity
from layers.sources import NoTelemetry, SourceError, TelemetryError
from layers.walk import walk
from tests.fakes.kube_api import FakeKubeAPI, serve

SCENARIO_FILE = Path(__file__).resolve().parents[1] / "bot" / "scenarios" / "xid79-fell-off-bus.yaml"
TIMEOUT_S = 0.3
PLUGIN = ("gpu-operator", "nvidia-device-plugin-daemonset-w9f7f", "nvidia-device-plugin")


@pytest.fixture(scope="module")
def snapshot() -> SnapshotCluster:
    cluster, _ = build_sources(load_scenario(SCENARIO_FILE))
    return cluster


@pytest.fixture
def api(snapshot: SnapshotCluster) -> Iterator[FakeKubeAPI]:
    with serve(snapshot) as fake:
        yield fake


NODE1_LOGS = r"/namespaces/gpu-operator/pods/nvidia-[^/]+/log$"  # the operands on gpu-node-1


@pytest.mark.parametrize("path", [NODE1_LOGS, r"/events$"])
def test_a_stalled_kind_of_read_is_asked_once_per_walk(path: str, api: FakeKubeAPI) -> None:
    api.fail(path, delay=5 * TIMEOUT_S)
    cluster = KubeCluster.from_config(api.kubeconfig, timeout_s=TIMEOUT_S)
    start = time.monotonic()
    result = walk(cluster, NoTelemetry(now=time.time), "ml", "trainer-0", all_layers=True)
    elapsed = time.monotonic() - start
    assert api.count(path) == 1  # the walk reads several; only the first went out
    assert elapsed < 3 * TIMEOUT_S, elapsed
    said = [e for r in result.layers for f in r.findings for e in (f.summary, *f.evidence)]
    assert any(f"no answer within {TIMEOUT_S:g}s" in s for s in said), said
    assert result.layers[0].findings  # the reads that answered still decide layer 1


def test_a_stalled_kubelet_holds_back_its_own_node_s_logs_only(api: FakeKubeAPI) -> None:
    api.fail(NODE1_LOGS, delay=5 * TIMEOUT_S)
    cluster = KubeCluster.from_config(api.kubeconfig, timeout_s=TIMEOUT_S)
    with pytest.raises(SourceError, match="no answer within"):
        cluster.pod_log(*PLUGIN)
    with pytest.raises(SourceError, match="an earlier log read of a pod on gpu-node-1"):
        cluster.pod_log("gpu-operator", "nvidia-driver-daemonset-nt5c9", "nvidia-driver-ctr")
    assert api.count(NODE1_LOGS) == 1
    # A pod on gpu-node-2 is asked as usual, and the API's own answer comes back at once.
    start = time.monotonic()
    with pytest.raises(SourceError, match="is waiting to start: ContainerCreating"):
        cluster.pod_log("ml", "pretrain-llama-0", "trainer")
    assert time.monotonic() - start < TIMEOUT_S
    assert api.count(r"/pods/pretrain-llama-0/log$") == 1


def test_a_stalled_read_is_asked_again_once_its_memory_lapses(api: FakeKubeAPI) -> None:
    api.fail(NODE1_LOGS, delay=5 * TIMEOUT_S)
    cluster = KubeCluster.from_config(api.kubeconfig, timeout_s=TIMEOUT_S)
    for _ in range(2):
        with pytest.raises(SourceError, match="no answer within"):
            cluster.pod_log(*PLUGIN)
    assert api.count(NODE1_LOGS) == 1
    api.clear_faults()
    deadline = time.monotonic() + STALL_MEMORY_TIMEOUTS * TIMEOUT_S + 2.0
    while True:  # the memory lapses: the next read goes out and is answered
        try:
            log = cluster.pod_log(*PLUGIN)
            break
        except SourceError as err:
            assert "no answer within" in err.message
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert log.strip() and api.count(NODE1_LOGS) == 2


def test_a_stalled_prometheus_costs_a_walk_one_timeout(stalled_url: str, snapshot: SnapshotCluster) -> None:
    telemetry = PrometheusTelemetry(stalled_url, timeout_s=TIMEOUT_S)
    start = time.monotonic()
    result = walk(snapshot, telemetry, "ml", "trainer-0", all_layers=True)
    elapsed = time.monotonic() - start
    first_batch = telemetry.queries
    unknown = [f for r in result.layers for f in r.findings if f.severity == Severity.UNKNOWN]
    assert unknown and any(f"no answer within {TIMEOUT_S:g}s" in f.summary for f in unknown)
    assert elapsed < 4 * TIMEOUT_S, elapsed  # was two batches' timeouts
    with pytest.raises(TelemetryError, match="an earlier query timed out"):
        telemetry.instant("DCGM_FI_DEV_XID_ERRORS")
    assert telemetry.queries == first_batch  # nothing more was sent while it stalls
