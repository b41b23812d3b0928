"""A Prometheus that accepts the connection and never answers: the walk and the digest end,
with `unknown` findings and notes naming the timeout, instead of hanging."""

from __future__ import annotations

import time

from bot.sources.opener import bundled_scenarios
from bot.sources.prom import PrometheusTelemetry
from bot.sources.scenario import build_sources, load_scenario
from layers.digest import collect_digest
from layers.findings import Severity
from layers.walk import walk


def test_a_walk_over_a_stalled_prometheus_ends_in_unknown(stalled_url: str) -> None:
    path = next(p for p in bundled_scenarios() if p.stem == "gfd-crashloop-driver-rpc-timeout-xid79")
    sc = load_scenario(path)
    cluster, _ = build_sources(sc)
    telemetry = PrometheusTelemetry(stalled_url, at=sc.now, timeout_s=0.3)
    ns, _, pod = str(sc.extra["x-expect"]["target"]).partition("/")
    start = time.monotonic()
    result = walk(cluster, telemetry, ns, pod, all_layers=True)
    assert time.monotonic() - start < 20  # a bounded number of 0.3 s timeouts, no hang
    unknowns = [f for r in result.layers for f in r.findings if f.severity == Severity.UNKNOWN]
    assert any("no answer within 0.3s" in f.summary for f in unknowns), [f.summary for f in unknowns]
    # The cluster's own evidence still decides: the capacity gap sends the walk to layer 5.
    assert result.layers[0].findings and result.verdict is not None


def test_the_digest_over_a_stalled_prometheus_lists_capacity_gaps_and_says_why(stalled_url: str) -> None:
    path = next(p for p in bundled_scenarios() if p.stem == "gfd-crashloop-driver-rpc-timeout-xid79")
    sc = load_scenario(path)
    cluster, _ = build_sources(sc)
    start = time.monotonic()
    digest = collect_digest(cluster, PrometheusTelemetry(stalled_url, at=sc.now, timeout_s=0.3))
    assert time.monotonic() - start < 10
    assert digest.metrics_error and "no answer within 0.3s" in digest.metrics_error
    assert digest.flagged  # the node with allocatable below capacity is still there
