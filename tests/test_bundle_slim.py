"""A large fleet's bundle with a target pod (issue 23): past SLIM_PAST nodes it keeps its nodes
slimmed and masked part by part (the same dicts as mask_object of the slimmed node), the pods its
target's walk reads instead of the fleet's, and replays the same walk. SLIM_PAST is lowered so a
fleet of 60 nodes is "large"; served by the fake API server and read by the real client."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks.fleet import _node, make_fleet, node_name
from benchmarks.scale_bench import bound_pod
from bot.actions import gather_pool
from bot.actions.bundle_writer import collect_bundle
from bot.actions.gather_pool import NodeMasker, slim_node
from bot.actions.redact import mask_object
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from layers.walk import walk
from tests.fakes.kube_api import serve


def test_the_node_masker_masks_as_mask_object_does() -> None:
    nodes = [_node(i, 8, i % 5 == 0) for i in range(40)]
    for i, node in enumerate(nodes[::3]):
        node["metadata"]["annotations"] = {
            "csi.volume.kubernetes.io/nodeid": '{"ebs.csi.aws.com":"i-0abc"}',
            "secret-token": f"ghp_{'a' * 30}{i:06d}",
            "nfd.node.kubernetes.io/extended-resources": "",
        }
        node["metadata"]["labels"]["api_key"] = "sk_live_abcdefghijklmnopqrstuvwx"
        node["metadata"]["labels"]["password"] = "true"
        node["metadata"]["managedFields"] = [{"manager": "kubelet"}]
        node["spec"] = {
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            "providerID": "aws:///x",
        }
        node["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"}]
    masker = NodeMasker()
    assert [masker.mask(n) for n in nodes] == [mask_object(slim_node(n)) for n in nodes]
    kept = masker.mask(nodes[0])
    assert "addresses" not in kept["status"] and "managedFields" not in kept["metadata"]
    assert kept["metadata"]["labels"]["api_key"] == "<masked>"


def _bundle(
    nodes: int, target: tuple[str, str], node: str | None, tmp_path: Path
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], int]:
    fleet = make_fleet(nodes, 8, sick_every=nodes // 3, workload_pods=2, with_series=False)  # 3 sick
    fleet["objects"].append(bound_pod(node_name(1)))
    snapshot, telemetry = build_sources(parse_scenario(fleet, f"<fleet-{nodes}>"))
    live = _named(walk(snapshot, telemetry, *target).to_dict())
    out = tmp_path / f"b{nodes}.tar.gz"
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        collect_bundle(kube, telemetry, out, node=node, target=target)
        kube.close()
    reqs, _ = kube.counts.snapshot()
    pod_pages = sum(n for k, n in reqs.items() if k.verb == "list" and k.resource == "pods")
    replay, replay_telemetry = build_sources(read_bundle(out))
    with tarfile.open(out, "r:gz") as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        manifest = json.load(member)
    return live, _named(walk(replay, replay_telemetry, *target).to_dict()), manifest, pod_pages


def _named(result: dict[str, Any]) -> dict[str, Any]:
    """The walk with the metrics source's name left out: "no DCGM series … in scenario <fleet-60>"
    and "… in scenario must-gather …" differ in the scenario's name only."""
    out: dict[str, Any] = json.loads(re.sub(r"in scenario [^:]*:", "in scenario S:", json.dumps(result)))
    return out


@pytest.mark.parametrize(
    ("target", "node"),
    [(("ml", "trainer-0"), "gpu-00020"), (("ml", "bound-0"), "gpu-00001"), (("ml", "trainer-0"), None)],
    ids=["pending", "bound", "pending-no-node"],
)
def test_a_large_fleet_bundle_replays_its_targets_walk(
    target: tuple[str, str], node: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gather_pool, "SLIM_PAST", 30)
    live, replayed, manifest, pages = _bundle(60, target, node, tmp_path)
    assert replayed == live
    assert any(s["what"] == "node fields no layer reads" for s in manifest["skipped"])
    assert any(s["what"] == "the fleet's pods" for s in manifest["skipped"])
    if node is None:
        return  # a bundle of every GPU node lists every node's operands (and reads their logs)
    # Past SLIM_PAST the fleet's pods are not listed: the same pod lists on twice the fleet.
    _, _, _, pages_twice = _bundle(120, target, node, tmp_path)
    assert pages == pages_twice, (pages, pages_twice)
