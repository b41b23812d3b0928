"""A node's must-gather sends the same requests on any fleet (issue 23; benchmarks/scale_bench.py
times it at 65,000 nodes): the node by name, its pods by spec.nodeName, the operator's pods, its
DRA slices by field selector, the operator namespace's events object by object; never the
fleet's node list. Counts, not times: a later per-node read of the fleet fails here. The fleet
is served by the fake API server (paged as the real one) and read by the real client.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.fleet import make_fleet, node_name
from bot.actions.bundle_writer import collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from layers.sources import NoTelemetry
from tests.fakes.kube_api import serve


def _bundle_requests(nodes: int, tmp_path: Path) -> tuple[dict[str, int], int, int]:
    """(requests by verb, resource and page kind; node-list pages; nodes in scenario.yaml)."""
    fleet = make_fleet(nodes, 8, sick_every=20, workload_pods=2, with_series=False)
    snapshot, _ = build_sources(parse_scenario(fleet, f"<fleet-{nodes}>"))
    out = tmp_path / f"b{nodes}.tar.gz"
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        collect_bundle(kube, NoTelemetry(now=0.0), out, node=node_name(1))
        kube.close()
    reqs, _ = kube.counts.snapshot()
    counts: dict[str, int] = {}
    node_pages = 0
    for kind, n in reqs.items():
        if kind.verb == "list" and kind.resource == "nodes":
            node_pages += n
        key = f"{kind.verb} {kind.resource} {kind.page}".strip()
        counts[key] = counts.get(key, 0) + n
    kept = [o for o in read_bundle(out).objects if o.get("kind") == "Node"]
    return counts, node_pages, len(kept)


def test_a_node_bundle_sends_the_same_requests_on_any_fleet(tmp_path: Path) -> None:
    small, small_pages, small_nodes = _bundle_requests(40, tmp_path)
    large, large_pages, large_nodes = _bundle_requests(1200, tmp_path)
    assert small == large, (small, large)
    assert small_pages == large_pages == 0  # its node by name, never the fleet's node list
    assert small_nodes == large_nodes == 1
    assert sum(n for k, n in large.items() if k.startswith("list ")) <= 40, large
