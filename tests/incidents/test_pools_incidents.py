"""Issue 18 incidents (tests/incidents/pools/*.yaml, made by tests/incidents/pools/build.py): driver
pools, L3_DRIVER_TOO_OLD suggestions, zonal volumes, topology spread, Kueue's quota message, a node
without a driver pod. Each expectation was written from spec/findings.md before the walk was run;
structure, names and the walk are checked like the bundled scenarios, then each rule's evidence."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.test_bundled_scenarios as bundled
from layers.findings import Finding
from tests.incidents.scenario_checks import Incidents, check_structure, names, names_elsewhere

POOLS = Incidents("pools")


def one(stem: str, code: str) -> Finding:
    [f] = POOLS.findings(stem, code)
    return f


def test_one_incident_per_item_at_least() -> None:
    assert len(POOLS.files) >= 7, POOLS.files


def test_names_do_not_clash() -> None:
    mine = names(POOLS.files)
    assert len(mine) == len(POOLS.files) and not mine & names_elsewhere("l12", "l3", "l45", "noise")


@pytest.mark.parametrize("path", POOLS.files, ids=POOLS.ids)
def test_structure(path: Path) -> None:
    check_structure(path)


@pytest.mark.parametrize("path", POOLS.files, ids=POOLS.ids)
def test_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def test_healthy_pod_beside_another_pools_branch_lists_both_pools() -> None:
    ok = one("pools-healthy-h100-pod-beside-a100-pool-on-535", "L3_OK")
    assert "driver: 570.158.01" in ok.evidence
    pools = next(e for e in ok.evidence if e.startswith("driver pools: "))
    assert (
        "eks.amazonaws.com/nodegroup=a100-batch · NVIDIA-A100-SXM4-80GB: driver 535.230.02 (6) of 6 nodes"
        in pools
    )
    assert "eks.amazonaws.com/nodegroup=h100-train · NVIDIA-H100-80GB-HBM3: driver 570.158.01" in pools


def test_skew_is_inside_the_nvidiadriver_pool() -> None:
    f = one("pools-nvidiadriver-per-pool-one-h100-on-565", "L3_DRIVER_VERSION_SKEW")
    assert f.node == "h100-train-04"
    assert (
        "driver 565.57.01 vs 570.158.01 on 9 of 10 GPU nodes of its driver pool (NVIDIADriver h100-570)"
        in f.summary
    )
    assert "driver pool: NVIDIADriver h100-570 (10 GPU nodes report it)" in f.evidence
    assert "driver: 570.158.01 → 9 nodes, 565.57.01 → 1 node" in f.evidence
    assert not any("550.163.01" in e or "575.57.08" in e for e in f.evidence)


def test_too_old_suggests_only_the_one_placeable_node() -> None:
    f = one("pools-cuda128-image-on-550-only-healthy-a100-suggested", "L3_DRIVER_TOO_OLD")
    assert "run it on a100-batch-06," in f.summary, f.summary
    good = next(e for e in f.evidence if e.startswith("GPU nodes the pod could run on whose driver would do"))
    assert "(1 of " in good and "a100-batch-06 (driver 570.172.08, CUDA 12.8)" in good
    off = next(e for e in f.evidence if e.startswith("newer drivers the pod cannot use now"))
    for node, why in (("a100-batch-02", "cordoned"), ("a100-batch-03", "allocatable below capacity"),
                      ("a100-batch-04", "not Ready"), ("a100-batch-05", "untolerated taint dedicated=ml-research")):  # fmt: skip
        assert f"{node} ({why}" in off, off
    assert "h100-train" in off  # another node group: not a suggestion


def test_zonal_volume_evidence_names_the_pv_and_the_zones() -> None:
    f = one("pools-zonal-ebs-volume-in-zone-without-a10g", "L1_VOLUME_NODE_AFFINITY")
    assert (
        f.evidence[0].startswith("scheduler: 0/27 nodes are available:")
        and "volume node affinity conflict" in f.evidence[0]
    )
    assert (
        "PersistentVolume pvc-3f9e2d1c-7b4a-4e8f-9c2d-1a2b3c4d5e6f (claim speech/whisper-data) node affinity: "
        "topology.ebs.csi.aws.com/zone In us-east-1c" in f.evidence
    )
    assert any(e.startswith("zone us-east-1a: ") and "free nvidia.com/gpu" in e for e in f.evidence)
    assert any(e.startswith("zone us-east-1b: ") for e in f.evidence)
    assert "no GPU node of the kind it requests (nvidia.com/gpu)" in f.summary


def test_topology_spread_evidence_has_the_constraint_and_free_gpus_per_zone() -> None:
    f = one("pools-topology-spread-h100-room-in-one-zone", "L1_TOPOLOGY_SPREAD")
    assert (
        "topologySpreadConstraint topologyKey=topology.kubernetes.io/zone maxSkew=1 whenUnsatisfiable=DoNotSchedule "
        "labelSelector app=vllm-llama-70b" in f.evidence
    )
    assert "topology.kubernetes.io/zone=us-east-1b: 0 free nvidia.com/gpu" in f.evidence
    assert any(
        e.startswith("topology.kubernetes.io/zone=us-east-1a: ") and " 0 free" not in e for e in f.evidence
    )


def test_kueue_message_says_which_quota_is_short() -> None:
    f = one("pools-kueue-clusterqueue-without-gpu-quota", "L1_SCHEDULING_GATED")
    assert (
        "insufficient quota for nvidia.com/gpu in flavor default-flavor, request > maximum capacity (8 > 0)"
        in f.summary
    )
    assert (
        "Workload pod-pretrain-7b-0-4c1f3: QuotaReserved=False (Pending): couldn't assign flavors to pod set main: "
        "insufficient quota for nvidia.com/gpu in flavor default-flavor, request > maximum capacity (8 > 0)"
        in f.evidence
    )
    assert "kubectl describe workload -n research pod-pretrain-7b-0-4c1f3" in f.commands


def test_missing_driver_pod_is_said_not_ok() -> None:
    [f] = [
        x
        for x in POOLS.findings("pools-deploy-driver-true-without-driver-pod", "L3_UNKNOWN")
        if x.node == "h100-train-02"
    ]
    assert "no driver pod runs there" in f.summary and "log was not read" in f.summary
    assert "nvidia.com/gpu.deploy.driver=true" in f.evidence


def test_overlapping_nvidiadrivers_are_evidence_and_the_driver_pods_decide() -> None:
    f = one("pools-nvidiadriver-default-overlaps-h100-pin", "L3_DRIVER_VERSION_SKEW")
    assert f.node == "h100-train-04" and "of its driver pool (NVIDIADriver default)" in f.summary
    assert (
        "NVIDIADriver node selectors overlap on h100-train-04: default, h100-565-pin all select it (the GPU "
        "Operator expects them not to); its driver pool is NVIDIADriver default, by the driver pods where "
        "the same selectors overlap (9 owned by default)"
    ) in f.evidence
