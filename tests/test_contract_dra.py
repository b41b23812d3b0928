"""DRA through the real kubernetes client: clusters without the API, RBAC refusals, request counts.

The bundled DRA scenarios already walk alike through the fake API server and the snapshot
(tests/test_contract_kube.py serves every bundled scenario); here, what only a live cluster does:
a cluster that serves no resource.k8s.io (404 on the group), a 403 on ResourceSlices, and the
number of requests a DRA walk makes as the claims grow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.dra_fleet import make_dra_fleet
from bot.sources.kube import PAGE_SIZE, KubeCluster
from bot.sources.scenario import build_sources, load_scenario, parse_scenario
from bot.sources.snapshot import SnapshotCluster, api_group
from layers.findings import WalkResult
from layers.walk import walk
from tests.fakes.kube_api import DRA_GROUPS, Request, serve
from tests.test_contract_kube import explain, scenario_target

SCENARIOS = Path(__file__).resolve().parent.parent / "bot" / "scenarios"


def through_kube(
    snapshot: SnapshotCluster, telemetry: object, ns: str, pod: str, **serve_kw: object
) -> WalkResult:
    with serve(snapshot, **serve_kw) as api:  # type: ignore[arg-type]
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
        try:
            return walk(kube, telemetry, ns, pod)  # type: ignore[arg-type]
        finally:
            kube.close()


@pytest.mark.parametrize("name", ["pending-gpus-all-taken", "dra-selector-80gb-on-a100-40gb"])
def test_a_cluster_without_dra_walks_like_one_without_dra_objects(name: str) -> None:
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    ns, pod = scenario_target(sc)
    snapshot, telemetry = build_sources(sc)
    # The same cluster with no DRA objects at all, against the API server that answers 404 on the groups.
    bare = SnapshotCluster([o for o in snapshot.objects if api_group(o) not in DRA_GROUPS], snapshot.logs)
    expected = walk(bare, telemetry, ns, pod)
    got = through_kube(snapshot, telemetry, ns, pod, without=DRA_GROUPS)
    assert got.to_dict() == expected.to_dict(), explain(expected, got)


def test_without_dra_a_dra_pod_is_told_what_is_missing() -> None:
    # A pod with resourceClaims on a cluster that serves no resource.k8s.io: its claims cannot exist.
    sc = load_scenario(SCENARIOS / "dra-selector-80gb-on-a100-40gb.yaml")
    snapshot, telemetry = build_sources(sc)
    got = through_kube(snapshot, telemetry, *scenario_target(sc), without=DRA_GROUPS)
    by_code = {f.code: f for f in got.layers[0].findings}
    assert set(by_code) == {"L1_POD_PENDING", "L1_DRA_CLAIM_PENDING", "L1_DRA_NO_DEVICES"}
    pending = by_code["L1_DRA_CLAIM_PENDING"].evidence
    assert any("ResourceClaim llm/mixtral-8x7b-serve-0-gpu-" in e and "does not exist" in e for e in pending)
    assert "ResourceSlices of driver gpu.nvidia.com: none exists" in by_code["L1_DRA_NO_DEVICES"].evidence


def test_a_403_on_resourceslices_is_unknown_with_the_rule() -> None:
    sc = load_scenario(SCENARIOS / "dra-xid79-device-tainted.yaml")
    snapshot, telemetry = build_sources(sc)
    ns, pod = scenario_target(sc)
    with serve(snapshot) as api:
        api.fail(r"/resourceslices$", status=403)
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
        try:
            got = walk(kube, telemetry, ns, pod, all_layers=True)
        finally:
            kube.close()
    layer1 = got.layers[0]
    [refused] = [f for f in layer1.findings if f.code == "L1_UNKNOWN" and "ResourceSlices" in f.summary]
    assert (
        "grant the bot's ServiceAccount 'list' on 'resourceslices.resource.k8s.io' cluster-wide"
        in refused.summary
    )
    # The claim is still read and reported; nothing pretends the GPUs are fine or missing.
    codes = {f.code for f in layer1.findings}
    assert "L1_DRA_CLAIM_PENDING" in codes and not codes & {"L1_DRA_NO_DEVICES", "L1_DRA_DEVICE_TAINTED"}
    assert [r.layer for r in got.layers] == [1, 2, 3, 4, 5]


def _requests(claims: int) -> list[Request]:
    sc = parse_scenario(make_dra_fleet(40, 8, claims), f"<dra-fleet-{claims}>")
    snapshot, telemetry = build_sources(sc)
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=10.0)
        try:
            result = walk(kube, telemetry, "ml", "finetune-0")
        finally:
            kube.close()
        assert kube.calls == len(api.requests)
        assert result.layers[0].findings[0].code == "L1_DRA_DEVICE_TAINTED"
        return list(api.requests)


def test_requests_per_dra_walk_do_not_grow_with_the_claims() -> None:
    few, many = _requests(40), _requests(200)
    first = [
        [(r.method, r.path, tuple(sorted(r.query.items()))) for r in rs if not r.query.get("continue")]
        for rs in (few, many)
    ]
    assert first[0] == first[1]
    # The pod's own claim is read by name, never by listing its namespace.
    assert any(r.query.get("fieldSelector") == "metadata.name=finetune-0-gpus-8ssvq" for r in few)
    slices = [r for r in few if r.path.endswith("/resourceslices")]
    assert slices and all(r.query.get("fieldSelector") == "spec.driver=gpu.nvidia.com" for r in slices)
    assert all(
        r.query.get("limit") == str(PAGE_SIZE) for r in few if r.path.startswith("/apis/resource.k8s.io/")
    )
