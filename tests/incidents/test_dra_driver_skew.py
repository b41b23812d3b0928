"""Driver skew on DRA fleets (issue 9): a GPUCluster / NVIDIA DRA driver fleet runs no GFD, so the
node's driver and CUDA versions are the `driverVersion` / `cudaDriverVersion` device attributes its
ResourceSlices publish (the driver's deviceinfo.go, semver: `580.95.5`, `13.0.0`).

Written from spec/findings.md before running gpubot: `L3_DRIVER_VERSION_SKEW` (warn) when the node's
driver (or the CUDA version it supports) differs from the majority of the GPU nodes that report one,
evidence the version → node count table and the odd nodes; a node reporting none is not a skew. The
walk's verdict is its worst finding: the skew, on a pod that runs. Read here: a DRA attribute stands
for the missing GFD label, and GFD's `580.95.05` / `13.0` are the same versions as the DRA driver's
`580.95.5` / `13.0.0`, so a fleet half GFD-labelled, half DRA-only is one fleet, not a split one.

Production-shaped fleets (tests/incidents/drafleet.py): 16 GPU nodes of four pools where other nodes
carry a lost GPU, an Xid 79 taint, a crash-looping kubelet plugin (publishing nothing), a
crash-looping driver pod, a cordoned node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from bot.sources.scenario import build_sources, parse_scenario
from layers.facts.fleet import version_key
from layers.findings import Finding, Severity, WalkResult
from layers.walk import walk
from tests.incidents.dra_fleets_build import _noisy_fleet
from tests.incidents.drafleet import DRIVER_VERSION, OPERATOR_NS, DraFleet

POOLS = {"h100": 6, "h200": 4, "a100": 4, "l40s": 2}
TARGET = "h100-03"  # an odd index: _noisy_fleet keeps the sickness on even ones
POD = "llama-pretrain-0"
OLD_DRIVER = ("570.172.8", "12.8.0")  # what the DRA driver publishes for 570.172.08 (CUDA 12.8)
GFD_LABELS = {
    "nvidia.com/cuda.driver-version.full": DRIVER_VERSION,
    "nvidia.com/cuda.driver-version.major": "580",
    "nvidia.com/cuda.driver-version.minor": "95",
    "nvidia.com/cuda.driver-version.revision": "05",
    "nvidia.com/cuda.runtime-version.full": "13.0",
    "nvidia.com/cuda.runtime-version.major": "13",
    "nvidia.com/cuda.runtime-version.minor": "0",
}


def _objects(f: DraFleet, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in f.objects if o["kind"] == kind}


def _publish(f: DraFleet, node: str, driver: str, cuda: str) -> None:
    """The node's slices publish another driver, and its operator driver pod runs that driver's image."""
    [sl] = [s for s in _objects(f, "ResourceSlice").values() if s["spec"]["nodeName"] == node]
    for device in sl["spec"]["devices"]:
        device["attributes"]["driverVersion"] = {"version": driver}
        device["attributes"]["cudaDriverVersion"] = {"version": cuda}
    [drv] = [
        p
        for p in _objects(f, "Pod").values()
        if p["metadata"].get("namespace") == OPERATOR_NS
        and p["spec"].get("nodeName") == node
        and p["metadata"]["name"].startswith("nvidia-driver-daemonset")
    ]
    gfd_driver = ".".join(p if i < 2 else p.zfill(2) for i, p in enumerate(driver.split(".")))
    drv["spec"]["containers"][0]["image"] = f"nvcr.io/nvidia/driver:{gfd_driver}-ubuntu24.04"


def _label_gfd(f: DraFleet, nodes: Sequence[str]) -> None:
    """These nodes run GFD (an operator-managed pool beside the GPUCluster one): GFD's driver/CUDA labels."""
    by_name = _objects(f, "Node")
    for node in nodes:
        by_name[node]["metadata"]["labels"].update(GFD_LABELS)


def _fleet(name: str, *, odd: bool, gfd: Sequence[str] = ()) -> DraFleet:
    f = DraFleet(
        name,
        "A pretraining pod runs on h100-03 of a 16-node DRA fleet (no GFD); after a driver rollout paused, "
        "the node may still run the previous driver. Elsewhere the usual sick nodes.",
        now="2026-11-30T09:00:00Z",
    )
    _noisy_fleet(f, POOLS, {TARGET})
    f.gpu_node(TARGET, "h100")
    f.workload("llm", POD, TARGET, [f"gpu-{g}" for g in range(8)], created="2026-11-30T07:10:00Z")
    if odd:
        _publish(f, TARGET, *OLD_DRIVER)
    _label_gfd(f, gfd)
    return f


def _walk(f: DraFleet, target: str = f"llm/{POD}") -> WalkResult:
    data = {"kind": "Scenario", "name": f.name, "now": f.now, "objects": f.objects, "logs": f.logs}
    cluster, telemetry = build_sources(parse_scenario(data, f.name))
    ns, _, name = target.partition("/")
    return walk(cluster, telemetry, ns, name)


def _layer3(result: WalkResult) -> list[Finding]:
    [layer] = [r for r in result.layers if r.layer == 3]
    return list(layer.findings)


def _skews(result: WalkResult) -> list[Finding]:
    return [f for f in _layer3(result) if f.code == "L3_DRIVER_VERSION_SKEW"]


def _gpu_nodes(f: DraFleet) -> int:
    return sum(1 for o in f.objects if o["kind"] == "Node" and "pool" in o["metadata"]["labels"])


def test_a_dra_pods_node_with_another_driver_is_a_skew() -> None:
    f = _fleet("dra-driver-skew-h100-16-nodes", odd=True)
    assert _gpu_nodes(f) == 16
    result = _walk(f)
    [skew] = _skews(result)
    assert skew.node == TARGET and skew.severity == Severity.WARN
    verdict = result.verdict
    assert verdict is not None and verdict.code == "L3_DRIVER_VERSION_SKEW", [
        (x.code, x.summary) for r in result.layers for x in r.findings
    ]
    # Compared inside its driver pool (issue 18): the H100s, by the product their slices publish
    # (no GFD, no node-pool label). The plugin node publishes nothing and has no label: it is left
    # out, not counted as a skew. The other pools (H200, A100, L40S) are not compared with.
    reporting = 5
    pool = "GPU product NVIDIA-H100-80GB-HBM3"
    assert (
        f"driver 570.172.8 vs 580.95.5 on {reporting - 1} of {reporting} GPU nodes of its driver pool ({pool})"
        in skew.summary
    )
    assert "CUDA runtime 12.8.0 vs 13.0.0" in skew.summary
    assert f"driver pool: {pool} ({reporting} GPU nodes report it)" in skew.evidence
    assert f"driver: 580.95.5 → {reporting - 1} nodes, 570.172.8 → 1 node" in skew.evidence
    assert f"odd nodes (driver): {TARGET}" in skew.evidence
    assert any("driverVersion / cudaDriverVersion (no GFD label) on 5 nodes" in e for e in skew.evidence)
    assert (
        f"kubectl get resourceslices --field-selector spec.driver=gpu.nvidia.com,spec.nodeName={TARGET} -o yaml"
        in skew.commands
    )
    # The noise never decides the walk.
    assert not {x.node for r in result.layers for x in r.findings} & set(f.noise)


def test_a_uniform_dra_fleet_has_no_skew() -> None:
    f = _fleet("dra-driver-uniform-16-nodes", odd=False)
    result = _walk(f)
    assert not _skews(result)
    [ok] = [x for x in _layer3(result) if x.code == "L3_OK"]
    # The versions the node reports are read from its slices, not "not reported".
    assert "driver: 580.95.5" in ok.evidence and "CUDA runtime: 13.0.0" in ok.evidence


def test_a_mixed_fleet_reads_gfd_and_dra_nodes_as_one() -> None:
    """Half the fleet is GFD-labelled (580.95.05, 13.0), half DRA-only (580.95.5, 13.0.0): the same
    versions. Uniform: no skew, whichever node the pod runs on. One DRA-only node on another driver: a
    skew against the 4 others of its H100 pool, the majority written as most of its nodes write it."""
    # Eight GFD nodes, seven DRA-only ones publishing, the crash-looping plugin's node (h100-06) neither.
    gfd = ["h100-01", "h100-02", "h100-04", "h100-05", "h200-01", "h200-02", "a100-01", "a100-03"]
    uniform = _fleet("dra-driver-mixed-uniform-16-nodes", odd=False, gfd=gfd)
    assert not _skews(_walk(uniform))
    uniform.workload("llm", "bert-serve-0", "h100-01", ["gpu-6", "gpu-7"], created="2026-11-30T07:20:00Z")
    assert not _skews(_walk(uniform, "llm/bert-serve-0"))

    mixed = _fleet("dra-driver-mixed-skew-16-nodes", odd=True, gfd=gfd)
    [skew] = _skews(_walk(mixed))
    assert skew.node == TARGET
    assert "driver 570.172.8 vs 580.95.05 on 4 of 5 GPU nodes of its driver pool" in skew.summary, (
        skew.summary
    )
    assert "driver: 580.95.05 → 4 nodes, 570.172.8 → 1 node" in skew.evidence
    assert "CUDA runtime: 13.0 → 4 nodes, 12.8.0 → 1 node" in skew.evidence
    assert any("(no GFD label) on 1 node: h100-03" in e for e in skew.evidence), skew.evidence
    assert skew.evidence.count("odd nodes (driver): h100-03") == 1


def test_a_gfd_node_beside_an_odd_dra_node_is_not_the_odd_one() -> None:
    """The walk of a pod on a GFD-labelled node of the mixed fleet: the odd node is another one, so
    this node is no skew (the skew is the odd node's, said when it is walked)."""
    gfd = ["h100-01", "h100-02", "h100-04", "h100-05"]
    f = _fleet("dra-driver-mixed-other-node-16-nodes", odd=True, gfd=gfd)
    f.workload("llm", "bert-serve-0", "h100-01", ["gpu-6", "gpu-7"], created="2026-11-30T07:20:00Z")
    result = _walk(f, "llm/bert-serve-0")
    assert not _skews(result)
    [ok] = [x for x in _layer3(result) if x.code == "L3_OK"]
    # The node's own label, not the DRA spelling most of the fleet publishes.
    assert "driver: 580.95.05" in ok.evidence and "CUDA runtime: 13.0" in ok.evidence


def test_version_spellings_of_gfd_and_the_dra_driver_are_one_version() -> None:
    assert version_key("580.95.05") == version_key("580.95.5") == (580, 95, 5)
    assert version_key("13.0") == version_key("13.0.0") != version_key("13.1.0")
    assert version_key("570.172.08") != version_key("580.95.05")
    assert version_key("580.95.05-beta") == "580.95.05-beta"  # not dotted numbers: its own value


def test_the_slices_are_listed_only_when_a_gpu_node_has_no_gfd_version_label(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A GFD-labelled fleet costs no DRA read; a node without the labels makes one listing per walk."""
    from layers.facts import fleet
    from tests.layers.builders import ctx, gpu_node, pod

    def lists(labelled: int) -> list[str]:
        nodes = [gpu_node(f"h100-{i:02d}", labels=GFD_LABELS if i <= labelled else {}) for i in range(1, 17)]
        c = ctx([*nodes, pod("ml", "p", node="h100-01", requests={"nvidia.com/gpu": 1})], pod=("ml", "p"))
        calls: list[str] = []
        read = c.cluster.list_dra

        def counted(kind: Any, **kw: Any) -> list[dict[str, Any]]:
            calls.append(kind)
            return read(kind, **kw)

        monkeypatch.setattr(c.cluster, "list_dra", counted)
        fleet.fleet_spreads(c)
        fleet.node_versions(c)(c.node("h100-16"))  # driver_too_old's read of the same node: no second list
        return calls

    assert lists(16) == []
    assert lists(15).count("ResourceSlice") == 1
