"""Must-gather on a DRA cluster: the DRA objects involved are in the bundle, and the replay walks alike."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from bot.actions.bundle_writer import collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import build_sources, load_scenario
from layers.walk import walk
from tests.fakes.kube_api import serve
from tests.test_bundle import members


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("dra-xid79-device-tainted", ("ml", "llama-sft-worker-0")),
        ("dra-compute-domain-imex-not-ready", ("training", "nemotron-pretrain-worker-0")),
    ],
)
def test_dra_bundle_holds_the_objects_and_replays(name: str, target: tuple[str, str], tmp_path: Path) -> None:
    [path] = [p for p in bundled_scenarios() if p.stem == name]
    snapshot, telemetry = build_sources(load_scenario(path))
    original = walk(snapshot, telemetry, *target).to_dict()
    out = tmp_path / "b.tar.gz"
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        report = collect_bundle(kube, telemetry, out, target=target)
    assert report.errors == []
    kinds = {}
    for obj in yaml.safe_load(members(out)["dra.yaml"])["items"]:
        kinds.setdefault(obj["kind"], set()).add(obj["metadata"]["name"])
    assert {"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "GPUCluster"} <= set(
        kinds
    )
    assert "gpu.nvidia.com" in kinds["DeviceClass"]
    pod = next(o for o in snapshot.objects if o["kind"] == "Pod" and o["metadata"]["name"] == target[1])
    own = {s["resourceClaimName"] for s in pod["status"]["resourceClaimStatuses"]}
    assert own <= kinds["ResourceClaim"]
    if name == "dra-compute-domain-imex-not-ready":
        assert kinds["ComputeDomain"] == {"nemotron-pretrain-domain"}
    replay_cluster, replay_telemetry = build_sources(read_bundle(out))
    assert walk(replay_cluster, replay_telemetry, *target).to_dict() == original
