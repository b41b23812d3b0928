"""A node-only bundle holds its node's driver pool (issue 23): a replayed layer 3 compares the node
with its pool as the live walk does. Before, the bundle held the node alone and the replay of a
driver skew said L3_OK. The bundles are collected through the fake API server and the real client."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.actions.bundle_writer import collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, load_scenario
from layers.facts import objects as o
from layers.walk import walk
from tests.fakes.kube_api import serve

SCENARIOS = Path(__file__).resolve().parent.parent / "bot" / "scenarios"
INCIDENTS = Path(__file__).resolve().parent / "incidents"


def _l3(result: dict[str, object]) -> list[str]:
    layers = result["layers"]
    assert isinstance(layers, list)
    return [f["code"] for layer in layers if layer["layer"] == 3 for f in layer["findings"]]


@pytest.mark.parametrize(
    "path",
    [
        SCENARIOS / "driver-version-skew-new-node.yaml",  # cloud node pool and GPU product
        INCIDENTS / "pools" / "pools-nvidiadriver-per-pool-one-h100-on-565.yaml",  # NVIDIADriver's selector
    ],
    ids=lambda p: p.stem,
)
def test_a_node_bundle_replays_the_pools_skew(path: Path, tmp_path: Path) -> None:
    sc = load_scenario(path)
    snap, telemetry = build_sources(sc)
    ns, pod = str(sc.extra["x-expect"]["target"]).split("/", 1)
    live = walk(snap, telemetry, ns, pod).to_dict()
    skews = [c for c in _l3(live) if c.endswith("_SKEW")]
    assert skews, _l3(live)  # the incident is a skew, so equality below means something
    node = o.pod_node(snap.get_pod(ns, pod))
    assert node
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        collect_bundle(kube, telemetry, out, node=node)
        kube.close()
    replay_cluster, replay_telemetry = build_sources(read_bundle(out))
    replayed = walk(replay_cluster, replay_telemetry, ns, pod).to_dict()
    assert [c for c in _l3(replayed) if c.endswith("_SKEW")] == skews
    assert replayed["verdict"] == live["verdict"]
