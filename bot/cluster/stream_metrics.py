"""/metrics for the request streams: counters kept by agents, and gauges read from Redis at scrape time.

Per cluster: `gpubot_stream_length`, `gpubot_stream_waiting` (queued, not yet
delivered: the group's lag), `gpubot_stream_pending` (delivered, not yet
acknowledged), `gpubot_stream_oldest_pending_age_seconds`,
`gpubot_stream_dead` (entries in `gpubot:dead:<cluster>`); and from the agents
of this process `gpubot_stream_claims_total` (entries taken over from a dead
or stuck agent), `gpubot_stream_requests_total{kind,outcome}` (outcome `forged`: an
entry whose signature, age or nonce did not hold, bot/cluster/signing.py). The gateway
reports every cluster that heartbeats, an agent its own. The cluster label
only takes validated cluster names; kinds and outcomes are clipped to known
words.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bot.cluster.streams import ClusterStreams, StreamsUnavailable
from bot.ops.metrics import REGISTRY

log = logging.getLogger("gpubot.metrics")

KINDS = frozenset({"why", "click", "digest_part", "alert", "unreadable"})
OUTCOMES = frozenset({"done", "failed", "dead", "repeated", "unknown_kind", "forged"})
OTHER = "other"

CLAIMS = Counter(
    "gpubot_stream_claims_total",
    "Stream entries this process took over from an agent that died or stalled (XAUTOCLAIM)",
    ["cluster"],
    registry=REGISTRY,
)
REQUESTS = Counter(
    "gpubot_stream_requests_total",
    "Stream entries this process's agent ran, by kind and outcome",
    ["cluster", "kind", "outcome"],
    registry=REGISTRY,
)


def record_claim(cluster: str) -> None:
    CLAIMS.labels(cluster).inc()


def record_request(cluster: str, kind: str, outcome: str) -> None:
    REQUESTS.labels(
        cluster, kind if kind in KINDS else OTHER, outcome if outcome in OUTCOMES else OTHER
    ).inc()


def prime(cluster: str) -> None:
    """Children exist from the first scrape, so increase() sees the 0 before the first claim."""
    CLAIMS.labels(cluster)
    for outcome in OUTCOMES:
        REQUESTS.labels(cluster, "why", outcome)


class StreamCollector(Collector):
    """Reads each cluster's stream from Redis when /metrics is scraped (a handful of commands)."""

    def __init__(self, streams: ClusterStreams, clusters: Callable[[], Iterable[str]]) -> None:
        self.streams = streams
        self.clusters = clusters

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # collected on demand: nothing to describe up front

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            "length": GaugeMetricFamily(
                "gpubot_stream_length", "Entries kept in the cluster's request stream", labels=["cluster"]
            ),
            "waiting": GaugeMetricFamily(
                "gpubot_stream_waiting",
                "Requests queued and not yet delivered to any agent",
                labels=["cluster"],
            ),
            "pending": GaugeMetricFamily(
                "gpubot_stream_pending",
                "Requests delivered to an agent and not yet acknowledged",
                labels=["cluster"],
            ),
            "oldest": GaugeMetricFamily(
                "gpubot_stream_oldest_pending_age_seconds",
                "Age of the oldest unacknowledged request (0 when none)",
                labels=["cluster"],
            ),
            "dead": GaugeMetricFamily(
                "gpubot_stream_dead",
                "Requests moved to gpubot:dead:<cluster> after failing",
                labels=["cluster"],
            ),
        }
        try:
            names = sorted(set(self.clusters()))
            for name in names:
                s = self.streams.stats(name)
                families["length"].add_metric([name], s.length)
                families["waiting"].add_metric([name], s.waiting)
                families["pending"].add_metric([name], s.pending)
                families["oldest"].add_metric([name], s.oldest_pending_age_s)
                families["dead"].add_metric([name], s.dead)
        except StreamsUnavailable as err:  # /metrics still answers; the gauges are absent this scrape
            log.warning("stream gauges not read: %s", err)
        yield from families.values()


def register(streams: ClusterStreams, clusters: Callable[[], Iterable[str]]) -> StreamCollector:
    collector = StreamCollector(streams, clusters)
    REGISTRY.register(collector)
    return collector
