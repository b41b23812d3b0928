"""The bundled DRA scenarios: the evidence a person acts on (the walks themselves are checked with
every bundled scenario in test_bundled_scenarios.py), and the digest of a DRA cluster."""

from __future__ import annotations

from typing import Any

from bot.sources.scenario import build_sources, load_scenario
from layers.digest import collect_digest
from layers.walk import walk
from tests.test_bundled_scenarios import SCENARIO_DIR, diagnose


def findings(name: str, code: str, all_layers: bool = False) -> list[Any]:
    result, _ = diagnose(SCENARIO_DIR / f"{name}.yaml", all_layers)
    return [f for layer in result.layers for f in layer.findings if f.code == code]


def in_evidence(finding: Any, text: str) -> bool:
    """Some evidence line holds `text`."""
    return any(text in e for e in finding.evidence)


def opens_evidence(finding: Any, prefix: str) -> bool:
    """Some evidence line starts with `prefix`."""
    return any(e.startswith(prefix) for e in finding.evidence)


def test_xid79_taint_is_the_xid_with_the_plugins_line() -> None:
    [tainted] = findings("dra-xid79-device-tainted", "L1_DRA_DEVICE_TAINTED")
    assert tainted.node == "dgx-h100-03" and tainted.next == 5
    assert (
        "gpu-5 (GPU-" in tainted.evidence[0]
        and "taint gpu.nvidia.com/xid=79:NoSchedule" in tainted.evidence[0]
    )
    [held] = findings("dra-xid79-device-tainted", "L1_DRA_DEVICES_EXHAUSTED")
    assert any(
        e.startswith("dgx-h100-03: 8 matching, 1 tainted, 7 taken by ml/eval-harness-") for e in held.evidence
    )
    [xid] = findings("dra-xid79-device-tainted", "L5_XID")
    assert xid.severity.label == "fault" and xid.node == "dgx-h100-03"
    assert in_evidence(xid, "Received xid health event for device GPU-")
    assert opens_evidence(xid, "[ResourceSlice dgx-h100-03-gpu.nvidia.com-")


def test_selector_evidence_shows_what_nodes_publish() -> None:
    [f] = findings("dra-selector-80gb-on-a100-40gb", "L1_DRA_SELECTOR_UNSATISFIED")
    assert "selector: device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0" in f.evidence
    assert "published memory='40Gi' on 32 device(s) of 4 node(s)" in f.evidence
    assert "a100-40g-01: 0 of 8 GPU(s) match" in " ".join(f.evidence)


def test_class_missing_quotes_the_scheduler() -> None:
    [f] = findings("dra-deviceclass-missing", "L1_DRA_DEVICECLASS_MISSING")
    assert f.summary.startswith("DeviceClass gpu.nvidia.com does not exist")
    assert in_evidence(f, "request gpu: device class gpu.nvidia.com does not exist")
    assert opens_evidence(f, "DeviceClasses present: compute-domain-daemon.nvidia.com")


def test_compute_domain_names_the_daemon_that_has_not_joined() -> None:
    [f] = findings("dra-compute-domain-imex-not-ready", "L2_COMPUTE_DOMAIN_NOT_READY")
    assert "3 of 4 IMEX daemons ready" in f.summary
    assert "not ready: gb200-rack1-node4" in f.evidence
    assert in_evidence(f, "on gb200-rack1-node4: container compute-domain-daemon: CrashLoopBackOff")
    assert in_evidence(f, "current node not ready in ComputeDomain")


def test_mixed_fleet_extended_resource_pod_ignores_the_dra_pools() -> None:
    result, _ = diagnose(SCENARIO_DIR / "dra-mixed-fleet-healthy-dra-pod.yaml")
    # The same fleet, the device-plugin pods' view: a pending nvidia.com/gpu pod.
    sc = load_scenario(SCENARIO_DIR / "dra-mixed-fleet-healthy-dra-pod.yaml")
    cluster, telemetry = build_sources(sc)
    other = walk(cluster, telemetry, "ml", "bert-finetune-0")
    codes = [f.code for f in other.layers[0].findings]
    assert codes == ["L1_POD_PENDING", "L1_GPU_EXHAUSTED"]
    [exhausted] = other.layers[0].findings[1:]
    assert all(e.startswith("h100-dp-0") for e in exhausted.evidence)  # DRA nodes are not counted
    assert result.verdict is None


def test_digest_counts_a_dra_node_published_against_untainted() -> None:
    sc = load_scenario(SCENARIO_DIR / "dra-xid79-device-tainted.yaml")
    cluster, telemetry = build_sources(sc)
    digest = collect_digest(cluster, telemetry)
    [flagged] = digest.flagged
    assert flagged.node == "dgx-h100-03" and flagged.reasons == ("ALLOCATABLE_BELOW_CAPACITY",)
    assert (flagged.capacity, flagged.allocatable, flagged.xids_24h) == (8, 7, (79,))
    assert [r.to_dict() for r in flagged.resources] == [
        {"resource": "gpu.nvidia.com", "capacity": 8, "allocatable": 7}
    ]
    assert digest.gpu_nodes == 4 and not any("advertise no GPU resource" in n for n in digest.notes)
