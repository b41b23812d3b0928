"""The digest over a REAL Prometheus backfilled with the fleet's 24 h of series: same answer as in memory."""

from __future__ import annotations

from bot.slack.chart import read_chart_data
from bot.sources.prom import PrometheusTelemetry
from bot.sources.snapshot import SnapshotCluster
from layers.digest import collect_digest
from tests.layers.fake_telemetry import telemetry
from tests.services import PrometheusFactory
from tests.test_digest import EXPECTED, NOW, fleet


def test_same_flagged_set_and_numbers_as_in_memory(prometheus_factory: PrometheusFactory) -> None:
    objects, data = fleet()
    server = prometheus_factory(data)
    prom = PrometheusTelemetry(server.url, at=NOW)
    real = collect_digest(SnapshotCluster(objects), prom)
    memory = collect_digest(SnapshotCluster(objects), telemetry(data, NOW))
    assert {f.node: f.reasons for f in real.flagged} == EXPECTED
    assert real.to_dict() == {**memory.to_dict(), "metrics": real.to_dict()["metrics"]}
    assert real.metrics_error is None and real.metrics_source.startswith("Prometheus at http://127.0.0.1:")
    # six, one because a GPU's last-Xid series began in the window, one because rows rose (rowgrowth.py)
    assert prom.queries <= 8

    chart = read_chart_data(prom, real)
    assert prom.queries <= 10  # the fleet read and the chart's two range queries
    assert chart.error is None
    in_memory = read_chart_data(telemetry(data, NOW), memory)
    assert chart.correctable == in_memory.correctable and chart.uncorrectable == in_memory.uncorrectable
    # Hourly steps see the samples within the 5-minute lookback: 12 an hour ago, 14 now.
    assert [v for _, v in chart.correctable["gpu-rising"]] == [12, 14]
    assert [v for _, v in chart.correctable["a30-node"]] == [12, 14]  # via the exporter pod's host label


def test_prometheus_down_leaves_the_capacity_gaps(prometheus_factory: PrometheusFactory) -> None:
    from tests.services import free_port

    objects, _ = fleet()
    prom = PrometheusTelemetry(f"http://127.0.0.1:{free_port()}", at=NOW, timeout_s=1, retries=0)
    digest = collect_digest(SnapshotCluster(objects), prom)
    assert {f.node for f in digest.flagged} == {"ocio-gpu01", "gpu-gap", "gpu-all", "mig-gap"}
    assert digest.metrics_error is not None and "127.0.0.1" in digest.metrics_error
