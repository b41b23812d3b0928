"""The contract: a cluster read through the real `kubernetes` client walks like its scenario snapshot.

Every bundled scenario is served by the fake API server (tests/fakes/kube_api.py)
on the real REST paths and read through bot/sources/kube.py; the walk must equal the
one over the in-memory snapshot, finding for finding. A second part counts the
API calls of one walk: a constant, whatever the size of the cluster, except for
the `continue` pages of paginated lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from benchmarks.fleet import make_fleet, node_name
from bot.sources.kube import PAGE_SIZE, KubeCluster
from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import Scenario, build_sources, load_scenario, parse_scenario
from bot.sources.series import SeriesTelemetry
from bot.sources.snapshot import SnapshotCluster
from layers.digest import ALLOCATABLE_BELOW_CAPACITY, collect_digest
from layers.findings import WalkResult
from layers.sources import NoTelemetry
from layers.walk import walk
from tests.fakes.kube_api import FakeKubeAPI, Request, serve

SCENARIOS = bundled_scenarios()


def scenario_target(sc: Scenario) -> tuple[str, str]:
    """The pod a bundled scenario is about: its `x-expect.target`, "namespace/pod"."""
    expect = sc.extra.get("x-expect") or {}
    target = str(expect.get("target") or "")
    ns, _, pod = target.partition("/")
    assert ns and pod, f"{sc.path}: x-expect.target must name namespace/pod, got {target!r}"
    return ns, pod


def explain(snapshot: WalkResult, kube: WalkResult) -> str:
    """The first layer where the two walks differ, both sides in JSON, for a readable failure."""
    for la, lb in zip(snapshot.layers, kube.layers, strict=False):
        if la.to_dict() != lb.to_dict():
            return (
                f"layer {la.layer} differs\nsnapshot: {json.dumps(la.to_dict(), indent=1)}\n"
                f"kube:     {json.dumps(lb.to_dict(), indent=1)}"
            )
    return f"snapshot: {json.dumps(snapshot.to_dict())}\nkube:     {json.dumps(kube.to_dict())}"


def test_every_scenario_is_bundled() -> None:
    # The parametrisation below is only as good as this list (issue 2 asks for at least 15).
    assert len(SCENARIOS) >= 15, [p.name for p in SCENARIOS]


@dataclass
class Served:
    scenario: Scenario
    snapshot: SnapshotCluster
    telemetry: SeriesTelemetry
    api: FakeKubeAPI


@pytest.fixture(params=SCENARIOS, ids=[p.stem for p in SCENARIOS])
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    sc = load_scenario(request.param)
    snapshot, telemetry = build_sources(sc)
    with serve(snapshot) as api:
        yield Served(sc, snapshot, telemetry, api)


# Page size 2 makes every list of more than two objects go through `continue`.
@pytest.mark.parametrize("page_size", [PAGE_SIZE, 2], ids=["pages-of-500", "pages-of-2"])
@pytest.mark.parametrize("all_layers", [False, True], ids=["walk", "all"])
def test_kube_client_walks_like_the_snapshot(served: Served, all_layers: bool, page_size: int) -> None:
    ns, pod = scenario_target(served.scenario)
    expected = walk(served.snapshot, served.telemetry, ns, pod, all_layers=all_layers)
    kube = KubeCluster.from_config(served.api.kubeconfig, timeout_s=5.0)
    kube.page_size = page_size
    try:
        got = walk(kube, served.telemetry, ns, pod, all_layers=all_layers)
    finally:
        kube.close()
    # The walk really went over HTTP: at least the target pod and one list.
    assert served.api.count(rf"^/api/v1/namespaces/{ns}/pods/{pod}$") == 1
    assert kube.calls == len(served.api.requests) >= 2
    assert got.to_dict() == expected.to_dict(), explain(expected, got)


# --- API calls per walk ---------------------------------------------------------------------


def is_continue_page(r: Request) -> bool:
    return bool(r.query.get("continue"))


@dataclass
class Counted:
    first_pages: list[Request]
    continue_pages: int
    walk: WalkResult


def count_walk(nodes: int, all_layers: bool, **fleet: Any) -> Counted:
    """Walk ml/trainer-0 of a synthetic fleet through the fake API server; the requests it made."""
    sc = parse_scenario(make_fleet(nodes, 8, **fleet), f"<fleet-{nodes}>")
    snapshot, telemetry = build_sources(sc)
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=10.0)
        try:
            result = walk(kube, telemetry, "ml", "trainer-0", all_layers=all_layers)
        finally:
            kube.close()
        requests = list(api.requests)
    assert kube.calls == len(requests)
    return Counted(
        first_pages=[r for r in requests if not is_continue_page(r)],
        continue_pages=sum(1 for r in requests if is_continue_page(r)),
        walk=result,
    )


def shape(requests: list[Request]) -> list[tuple[str, str, tuple[tuple[str, str], ...]]]:
    """Method, path and query of each request: what was asked, in order."""
    return [(r.method, r.path, tuple(sorted(r.query.items()))) for r in requests]


@pytest.mark.parametrize("all_layers", [False, True], ids=["walk", "all"])
def test_api_calls_per_walk_do_not_grow_with_the_fleet(all_layers: bool) -> None:
    small, large = count_walk(50, all_layers), count_walk(500, all_layers)
    # Both fleets have one sick node (gpu-00001): the walk examines the same node in each.
    for counted in (small, large):
        assert counted.walk.layers[0].findings[0].node == node_name(1)
    assert len(small.first_pages) == len(large.first_pages), (
        shape(small.first_pages),
        shape(large.first_pages),
    )
    # Not just the same number: the same requests, with the fleet size nowhere in them.
    assert shape(small.first_pages) == shape(large.first_pages)
    # 500 nodes x 6 operand pods is 3,000 pods. The default walk reads pods node by node, so 500
    # nodes fit one page; --all lists the operator's pods fleet-wide (layer 2), in pages.
    assert small.continue_pages == 0
    assert (large.continue_pages > 0) if all_layers else (large.continue_pages == 0)


def test_a_pending_walk_lists_no_pods_of_the_fleet() -> None:
    # 50 nodes / 500 pods against 5,000 nodes / 50,000 pods (ten per node), one sick node in both.
    fleet = {"sick_every": 10**9, "with_series": False, "workload_pods": 4}
    small, large = count_walk(50, False, **fleet), count_walk(5000, False, **fleet)
    for counted in (small, large):
        assert counted.walk.layers[0].findings[0].node == node_name(1)
    assert shape(small.first_pages) == shape(large.first_pages)
    # Pods are read node by node (the first candidate, the sick node), never listed fleet-wide,
    # so the only pages that grow are the node list's.
    pod_lists = [r for r in large.first_pages if r.path == "/api/v1/pods"]
    assert pod_lists and all(r.query.get("fieldSelector", "").startswith("spec.nodeName=") for r in pod_lists)
    assert small.continue_pages == 0
    assert large.continue_pages == 5000 // PAGE_SIZE - 1


@pytest.mark.parametrize("all_layers", [False, True], ids=["walk", "all"])
def test_nodes_are_listed_once_never_read_one_by_one(all_layers: bool) -> None:
    counted = count_walk(500, all_layers)
    node_lists = [r for r in counted.first_pages if r.path == "/api/v1/nodes"]
    node_gets = [r for r in counted.first_pages if r.path.startswith("/api/v1/nodes/")]
    assert len(node_lists) == 1 and node_gets == []
    # Every list is asked for in pages, never whole.
    lists = [r for r in counted.first_pages if not r.path.endswith("/log") and "/pods/" not in r.path]
    assert lists and all(r.query.get("limit") == str(PAGE_SIZE) for r in lists)


# --- API calls per digest -------------------------------------------------------------------


def count_digest(nodes: int, sick_every: int) -> tuple[list[Request], int, int]:
    """The daily digest of a synthetic fleet through the fake API server: first pages, `continue`
    pages, nodes flagged for a capacity gap."""
    sc = parse_scenario(make_fleet(nodes, 8, sick_every=sick_every, with_series=False), f"<fleet-{nodes}>")
    snapshot, _ = build_sources(sc)
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=10.0)
        try:
            digest = collect_digest(kube, NoTelemetry(now=sc.now))
        finally:
            kube.close()
        requests = list(api.requests)
    flagged = sum(1 for f in digest.flagged if ALLOCATABLE_BELOW_CAPACITY in f.reasons)
    # The sick nodes' device plugin logs were read for Xids DCGM cannot report.
    assert all(79 in f.xids_24h for f in digest.flagged)
    return [r for r in requests if not is_continue_page(r)], sum(map(is_continue_page, requests)), flagged


def test_digest_api_calls_grow_with_flagged_nodes_only() -> None:
    small, _, one = count_digest(50, 10**9)
    large, large_pages, same = count_digest(2000, 10**9)
    assert one == same == 1
    # Ten times the nodes (12,000 operand pods), one flagged node: the same requests, the node
    # list's pages apart. No list of the fleet's operator pods.
    assert shape(small) == shape(large) and large_pages == 2000 // PAGE_SIZE - 1
    sick, _, ten = count_digest(2000, 200)
    assert ten == 10
    # Each further flagged node costs its own pod list and its plugin's two logs, nothing more.
    assert len(sick) == len(large) + 3 * (ten - 1)
    per_node = [r for r in sick if r.path == "/api/v1/pods"]
    assert len(per_node) == ten and all(
        r.query["fieldSelector"].startswith("spec.nodeName=") for r in per_node
    )
