"""Request and query counts that must not grow with the fleet (benchmarks/scale_bench.py times them).

Counts, not times: a later change that adds a per-node or per-pod read to a walk, or a per-GPU
query to the digest, fails here. Each fleet is served by the fake API server and read through
the real kubernetes client (`KubeCluster`); the counts are the client's own (kube_counts.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.fleet import make_fleet, node_name
from benchmarks.scale_bench import bound_pod
from bot.sources.kube import PAGE_SIZE, KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from bot.sources.series import SeriesTelemetry
from layers.digest import collect_digest
from layers.facts.context import EXAMINED_NODES
from layers.sources import NoTelemetry
from layers.walk import walk
from tests.fakes.kube_api import serve


def _fleet(nodes: int, sick_every: int, series: bool = False) -> dict[str, Any]:
    fleet = make_fleet(nodes, 8, sick_every=sick_every, workload_pods=2, with_series=series)
    fleet["objects"].append(bound_pod(node_name(1)))
    return fleet


def _requests(nodes: int, sick_every: int, pod: str) -> tuple[dict[str, int], int]:
    """(requests by verb, resource and page kind, node-list pages) of one default walk."""
    snapshot, _ = build_sources(parse_scenario(_fleet(nodes, sick_every), f"<fleet-{nodes}>"))
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        walk(kube, NoTelemetry(now=0.0), "ml", pod)
        kube.close()
    reqs, _ = kube.counts.snapshot()
    out: dict[str, int] = {}
    node_pages = 0
    for kind, n in reqs.items():
        if kind.verb == "list" and kind.resource == "nodes":
            node_pages += n
            continue
        key = f"{kind.verb} {kind.resource} {kind.page}".strip()
        out[key] = out.get(key, 0) + n
    return out, node_pages


def test_a_bound_pods_walk_sends_the_same_requests_on_any_fleet() -> None:
    small, small_pages = _requests(40, 20, "bound-0")
    large, large_pages = _requests(1200, 20, "bound-0")
    assert small == large, (small, large)
    assert small_pages == large_pages == 0  # its own node by name, never the fleet's node list
    assert small.get("get nodes") == 1


def test_a_pending_pods_walk_lists_the_nodes_and_at_most_ten_pages_more() -> None:
    # Every 5th node sick: 8 candidates pointed at on 40 nodes, 240 on 1,200. The walk examines
    # EXAMINED_NODES of them, so the requests past the node list are the same on both.
    small, small_pages = _requests(40, 5, "trainer-0")
    large, large_pages = _requests(1200, 5, "trainer-0")
    assert small == large, (small, large)
    assert (small_pages, large_pages) == (1, math.ceil(1200 / PAGE_SIZE))
    other_lists = sum(n for k, n in large.items() if k.startswith("list "))
    # 11 since issue 26: the ClusterPolicies (one cluster-scoped page, read once per walk) say where the
    # operator runs, so a pod imitating an operand elsewhere is never evidence (layers/facts/trusted.py).
    assert other_lists <= 11, large
    assert large.get("list clusterpolicies.nvidia.com first") == 1
    # One spec.nodeName list per examined node, and the first candidate's (its GPUs in use).
    assert large.get("list pods first") == EXAMINED_NODES + 1


class CountingTelemetry(SeriesTelemetry):
    """The scenario's in-memory PromQL, counting the reads the digest makes."""

    calls = 0

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name in {"instant", "increase", "rate", "max_over_time", "range", "changed", "count"}:
            type(self).calls += 1
        return attr


@pytest.fixture
def counting() -> Iterator[type[CountingTelemetry]]:
    CountingTelemetry.calls = 0
    yield CountingTelemetry


def _digest_reads(nodes: int) -> int:
    sc = parse_scenario(_fleet(nodes, 50, series=True), f"<fleet-{nodes}>")
    snapshot, tel = build_sources(sc)
    counted = CountingTelemetry.__new__(CountingTelemetry)
    counted.__dict__.update(tel.__dict__)
    CountingTelemetry.calls = 0
    collect_digest(snapshot, counted)
    return CountingTelemetry.calls


def test_the_digest_asks_prometheus_the_same_queries_on_any_fleet(counting: type[CountingTelemetry]) -> None:
    assert _digest_reads(50) == _digest_reads(500)


def test_past_the_examined_nodes_each_layer_says_which_it_did_not_examine() -> None:
    snapshot, _ = build_sources(parse_scenario(_fleet(60, 5), "<fleet-60>"))
    result = walk(snapshot, NoTelemetry(now=0.0), "ml", "trainer-0", all_layers=True)
    for layer in result.layers[1:]:
        notes = [f for f in layer.findings if "were not examined" in f.summary]
        assert len(notes) == 1, layer.layer
        assert notes[0].summary.startswith(f"{12 - EXAMINED_NODES} more candidate node(s)")
        assert layer.status.name != "OK"


def _digest_requests(
    nodes: int, sick_every: int, page_size: int = PAGE_SIZE
) -> dict[tuple[str, str, str, str], int]:
    """(verb, resource, page kind, selector) -> requests of one digest through the fake API server."""
    snapshot, _ = build_sources(parse_scenario(_fleet(nodes, sick_every), f"<fleet-{nodes}>"))
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        kube.page_size = page_size
        digest = collect_digest(kube, NoTelemetry(now=0.0))
        kube.close()
    assert len(digest.flagged) == len(range(1, nodes, sick_every))
    reqs, _ = kube.counts.snapshot()
    out: dict[tuple[str, str, str, str], int] = {}
    for kind, n in reqs.items():
        key = (kind.verb, kind.resource, kind.page, kind.selector)
        out[key] = out.get(key, 0) + n
    return out


def test_the_digests_kubernetes_reads_grow_with_the_flagged_nodes_only() -> None:
    # Four sick nodes in 200 and in 400: the same reads past the node list, whose pages are the fleet's.
    small = _digest_requests(200, 50, page_size=50)
    large = _digest_requests(400, 100, page_size=50)
    node_pages = {k: n for k, n in small.items() if k[:2] == ("list", "nodes")}
    assert sum(node_pages.values()) == 4
    assert sum(n for k, n in large.items() if k[:2] == ("list", "nodes")) == 8
    assert {k: n for k, n in small.items() if k[:2] != ("list", "nodes")} == {
        k: n for k, n in large.items() if k[:2] != ("list", "nodes")
    }
    # Per flagged node: one pod list (its plugin pod) and its plugin log's reads.
    assert small[("list", "pods", "first", "field")] == 4


def test_past_fifty_capacity_gaps_the_digest_lists_no_fleet_wide_pods() -> None:
    # 60 nodes with a capacity gap: the plugin logs of the first 50 are read, each node's pods by
    # its own list. The 50th node's second question (its plugin pod, then its log) once listed the
    # operator's pods of the whole fleet: 445 pages at 32,500 nodes.
    reqs = _digest_requests(120, 2)
    pod_lists = {k: n for k, n in reqs.items() if k[:2] == ("list", "pods")}
    assert pod_lists == {("list", "pods", "first", "field"): 50}, pod_lists


class AnswerCounting:
    """The scenario's in-memory PromQL (its filters are Prometheus'), counting the queries the digest
    sends and the series they answer."""

    READS = frozenset({"instant", "increase", "rate", "max_over_time", "range", "changed", "count"})

    def __init__(self, inner: SeriesTelemetry) -> None:
        self.inner = inner
        self.queries = 0
        self.series = 0

    def __getattr__(self, name: str) -> Any:
        if name == "read_many":
            raise AttributeError(name)  # one query at a time, each counted
        attr = getattr(self.inner, name)
        if name not in self.READS:
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            self.queries += 1
            self.series += len(out) if isinstance(out, list | tuple | dict) else 0
            return out

        return counted


def _digest_answers(nodes: int, sick_every: int) -> tuple[int, int]:
    snapshot, tel = build_sources(parse_scenario(_fleet(nodes, sick_every, series=True), f"<fleet-{nodes}>"))
    counting = AnswerCounting(tel)
    digest = collect_digest(snapshot, counting)  # type: ignore[arg-type]
    assert len(digest.flagged) == 2
    return counting.queries, counting.series


def test_the_digests_prometheus_answers_carry_the_sick_gpus_only() -> None:
    # Two sick nodes among 50 (400 GPUs) and among 500 (4,000 GPUs): the same queries, and answers
    # with the same series: the filters (`> 0`, the changed read) leave the healthy GPUs out.
    small = _digest_answers(50, 25)
    large = _digest_answers(500, 250)
    assert small == large, (small, large)
    assert small[1] < 50  # a handful of the sick GPUs' series, not one per GPU


def _walk_answers(nodes: int, sick_every: int, all_layers: bool) -> tuple[int, int]:
    snapshot, tel = build_sources(parse_scenario(_fleet(nodes, sick_every, series=True), f"<fleet-{nodes}>"))
    counting = AnswerCounting(tel)
    walk(snapshot, counting, "ml", "trainer-0", all_layers=all_layers)  # type: ignore[arg-type]
    return counting.queries, counting.series


@pytest.mark.parametrize("all_layers", [False, True], ids=["default", "all"])
def test_a_pending_pods_walk_asks_prometheus_the_same_on_any_fleet(all_layers: bool) -> None:
    # Four sick nodes in 200 and in 400 (1,600 and 3,200 GPUs): the walk examines those four, so
    # its queries and the series they answer are the same; a per-node or per-GPU read fails here.
    small = _walk_answers(200, 50, all_layers)
    large = _walk_answers(400, 100, all_layers)
    assert small == large, (small, large)
    assert small[1] <= small[0] * 8 * EXAMINED_NODES  # each query: at most a series per examined GPU
