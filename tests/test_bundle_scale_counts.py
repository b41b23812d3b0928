"""A node's must-gather sends the same requests on any fleet (issue 23; benchmarks/scale_bench.py
times it at 65,000 nodes): the node by name, its pods by spec.nodeName, the operator's pods, its
DRA slices by field selector, the operator namespace's events object by object; never the
fleet's node list. Counts, not times: a later per-node read of the fleet fails here. The fleet
is served by the fake API server (paged as the real one) and read by the real client.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from benchmarks.fleet import make_fleet, node_name
from bot.actions.bundle_writer import collect_bundle
from bot.actions.gather_pool import PEER_PAGE
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from layers.sources import NoTelemetry
from tests.fakes.kube_api import serve


def _bundle_requests(nodes: int, tmp_path: Path) -> tuple[dict[str, int], int, int, list[dict[str, Any]]]:
    """(requests by verb, resource and page kind; node-list pages; nodes in scenario.yaml; cut)."""
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
    with tarfile.open(out, "r:gz") as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        cut = json.load(member)["cut"]
    return counts, node_pages, len(kept), cut


def test_a_node_bundle_sends_the_same_requests_on_any_fleet(tmp_path: Path) -> None:
    small, small_pages, small_nodes, small_cut = _bundle_requests(40, tmp_path)
    large, large_pages, large_nodes, large_cut = _bundle_requests(1200, tmp_path)
    assert small == large, (small, large)
    # Its node by name and one page of its driver pool (every node of this fleet: one product,
    # no node-pool label), never a `continue` of the fleet's node list.
    assert small_pages == large_pages == 1
    assert large.get("list nodes continue", 0) == 0, large
    assert small_nodes == 40 and large_nodes == PEER_PAGE  # the node and its pool's first page
    assert [c["reason"] for c in large_cut if c["file"] == "scenario.yaml"] == [
        "driver pool page (-l nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3)"
    ]
    assert not [c for c in small_cut if c["file"] == "scenario.yaml"]
    assert sum(n for k, n in large.items() if k.startswith("list ")) <= 40, large
