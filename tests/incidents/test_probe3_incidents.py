"""What the probe3 incidents (tests/incidents/probe3/) must say beyond their `x-expect`: the finding
that decides names the right node, taint or Xid; no fault or warn finding names a noise node; the
daily digest over the two digest fleets lists exactly the nodes spec/interfaces.md flags, with their
numbers. The walk's codes, verdict and path are checked by test_probe_incidents.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.sources.scenario import build_sources, load_scenario
from layers.digest import collect_digest
from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.fleets import uuid_of
from tests.incidents.scenario_checks import Incidents, walked_findings

PROBE3 = Incidents("probe3")


def _walk(stem: str) -> list[Any]:
    result, _ = bundled.diagnose(PROBE3.path(stem))
    return [f for layer in result.layers for f in layer.findings]


def test_eighteen_incidents() -> None:
    assert len(PROBE3.files) >= 18, PROBE3.ids


@pytest.mark.parametrize("path", PROBE3.files, ids=PROBE3.ids)
def test_no_fault_or_warn_names_a_noise_node(path: Path) -> None:
    noise = set(bundled.read(path).get("x-noise") or [])
    result, _ = bundled.diagnose(path)
    loud = [
        (f.code, f.node)
        for layer in result.layers
        for f in layer.findings
        if f.node in noise and f.severity >= Severity.WARN
    ]
    assert not loud, loud


def test_cordoned_pool_nodes_are_named_not_the_cordon_elsewhere() -> None:
    [f] = PROBE3.findings("probe3-sched-1-30-two-cordoned-four-full-a100-32-nodes", "L1_NODES_UNSCHEDULABLE")
    assert "a100-train-01" in f.summary and "a100-train-02" in f.summary
    assert not any("h100-infer-09" in e for e in [f.summary, *f.evidence])


def test_generic_taint_message_is_read_from_the_nodes() -> None:
    found = PROBE3.findings(
        "probe3-sched-1-34-untolerated-taints-generic-dedicated-h100-27-nodes", "L1_UNTOLERATED_TAINT"
    )
    assert [f.summary for f in found if "dedicated=llm-serving:NoSchedule" in f.summary], found
    assert not [f for f in found if "nvidia.com/gpu=present" in f.summary], "the pod tolerates nvidia.com/gpu"


def test_pending_summary_says_the_port_is_taken() -> None:
    [f] = PROBE3.findings("probe3-sched-1-29-host-port-taken-free-gpus-l40s-24-nodes", "L1_POD_PENDING")
    assert "free ports" in f.summary


def test_mig_single_strategy_is_in_the_mismatch_evidence() -> None:
    [f] = PROBE3.findings("probe3-mig-single-strategy-asked-mig-1g-10gb-22-nodes", "L1_RESOURCE_MISMATCH")
    assert "nvidia.com/mig.strategy=single" in f.evidence


def test_unreachable_node_is_not_a_toleration_to_add() -> None:
    [f] = PROBE3.findings("probe3-only-candidate-unreachable-taint-h100-xl-20-nodes", "L1_UNTOLERATED_TAINT")
    assert f.node == "h100-xl-01"
    assert "add a toleration" not in f.summary, f.summary
    assert "unreachable" in f.summary and "Kubelet stopped posting node status." in " ".join(f.evidence)


def test_shared_pool_mismatch_names_the_selected_nodes_resource() -> None:
    [f] = PROBE3.findings("probe3-selects-time-sliced-pool-asks-nvidia-gpu-22-nodes", "L1_RESOURCE_MISMATCH")
    assert "the 6 GPU node(s) it selects advertise only nvidia.com/gpu.shared" in f.summary, f.summary
    assert any(e.startswith("nvidia.com/gpu.shared advertised by 6 node(s): l40s-viz-01") for e in f.evidence)


def test_exhausted_counts_the_nodes_the_pod_can_use() -> None:
    [f] = PROBE3.findings("probe3-xl-pool-one-full-one-unreachable-21-nodes", "L1_GPU_EXHAUSTED")
    assert f.summary.startswith(
        "all 1 node(s) the pod can use that advertise nvidia.com/gpu are fully allocated"
    )


def test_the_node_that_is_down_is_one_info_line() -> None:
    [f] = PROBE3.findings("probe3-xl-pool-one-full-one-unreachable-21-nodes", "L1_ELSEWHERE_IN_FLEET")
    [line] = [e for e in f.evidence if e.startswith("h100-xl-02:")]
    assert "condition Ready=Unknown (NodeStatusUnknown: Kubelet stopped posting node status.)" in line
    assert "untolerated taint node.kubernetes.io/unreachable:NoSchedule" in line


def test_admission_refusal_quotes_the_kubelet_and_the_node_now() -> None:
    stem = "probe3-kubelet-restart-outofnvidia-gpu-rejected-a100-23-nodes"
    [f] = PROBE3.findings(stem, "L1_ADMISSION_REJECTED")
    assert f.node == "a100-train-02" and "OutOfnvidia.com/gpu" in f.summary
    assert "a100-train-02 now: capacity nvidia.com/gpu=8, allocatable nvidia.com/gpu=8" in f.evidence


def test_unexpected_admission_error_is_an_admission_refusal_too() -> None:
    path = PROBE3.folder.parent / "probe" / "probe-unexpected-admission-error-lost-gpu-22-nodes.yaml"
    [f] = walked_findings(path, "L1_ADMISSION_REJECTED")
    assert f.node == "h100-infer-02" and "UnexpectedAdmissionError" in f.summary


def test_shared_gpu_refusal_says_ask_for_one() -> None:
    [f] = PROBE3.findings(
        "probe3-time-sliced-l4-asked-two-gpus-admission-refused-24-nodes", "L1_ADMISSION_REJECTED"
    )
    assert "refuses a request above 1 (maximum request size for shared resources is 1)" in f.summary, (
        f.summary
    )


def test_relabelled_stale_xid_is_history() -> None:
    found = PROBE3.findings("probe3-stale-xid48-gauge-relabelled-new-pod-h100-27-nodes", "L5_XID")
    assert found and all(f.severity == Severity.INFO for f in found), [(f.severity, f.summary) for f in found]
    assert "before the last 24 h" in found[0].summary


def test_xid95_from_renamed_labels_names_the_gpu() -> None:
    [f] = PROBE3.findings("probe3-dcgm-4-6-hostname-exported-pod-xid95-a100-25-nodes", "L5_XID")
    assert f.severity == Severity.FAULT and uuid_of("a100-train-05", 6) in f.summary, f.summary


def test_old_mark_keeps_its_xid_in_the_evidence() -> None:
    [f] = PROBE3.findings(
        "probe3-pending-8gpu-xid119-mark-five-days-old-h100-18-nodes", "L5_DEVICE_UNHEALTHY"
    )
    assert f.node == "h100-infer-04" and "Xid 119" in f.summary


def test_xid63_is_a_warning_beside_the_mark() -> None:
    [f] = PROBE3.findings("probe3-xid63-row-remapper-marked-rows-rising-a100-23-nodes", "L5_XID")
    assert f.severity == Severity.WARN and "Xid 63" in f.summary


def test_gke_skipped_xid79_is_a_fault_from_the_log() -> None:
    [f] = PROBE3.findings("probe3-gke-plugin-skipping-xid79-l4-bound-22-nodes", "L5_XID")
    assert f.severity == Severity.FAULT and "Xid 79" in f.summary
    assert any("Health checker is skipping Xid 79 error" in e for e in f.evidence), f.evidence
    assert any(e.startswith('node condition XidCriticalError=True, reason {"79":true}') for e in f.evidence)


def test_gke_marks_one_device_by_its_uuid_not_all() -> None:
    stem = "probe3-gke-plugin-xid48-device-nvidia5-and-unknown-device-a100-20-nodes"
    [f] = PROBE3.findings(stem, "L5_DEVICE_UNHEALTHY")
    node = f.node or ""
    assert uuid_of(node, 5) in f.summary and "marked 1 device unhealthy" in f.summary, f.summary
    assert "all devices" not in f.summary


# --- the daily digest (spec/interfaces.md `digest --format json`) -----------------------------

# node -> (reasons, capacity, allocatable, (correctable, uncorrectable) rows in 24 h, xids_24h, cordoned)
DIGESTS: dict[str, dict[str, tuple[list[str], int, int, tuple[int, int], list[int], bool]]] = {
    "probe3-digest-34-nodes-gaps-rows-remap-stale-xid-healthy-target": {
        "a100-train-03": (["ALLOCATABLE_BELOW_CAPACITY"], 8, 7, (0, 0), [79], False),
        "a100-train-07": (["ALLOCATABLE_BELOW_CAPACITY"], 8, 7, (0, 0), [48], True),
        "a100-train-05": (["ALLOCATABLE_BELOW_CAPACITY"], 32, 31, (0, 0), [], False),
        "h100-infer-05": (["REMAPPED_ROWS_RISING"], 8, 8, (9, 1), [], False),
        "h100-infer-08": (["ROW_REMAP_FAILURE"], 8, 8, (0, 0), [], False),
        "l40s-viz-05": (["REMAPPED_ROWS_RISING"], 4, 4, (0, 2), [], False),
        "l40s-viz-02": (["ALLOCATABLE_BELOW_CAPACITY"], 4, 3, (0, 0), [79], False),
        # A GPU node that is not Ready is flagged too (spec/interfaces.md, NODE_NOT_READY).
        "h100-infer-12": (["NODE_NOT_READY"], 8, 8, (0, 0), [], False),
    },
    "probe3-digest-26-nodes-exporter-podname-shared-mig-rows-gated-target": {
        "h100-infer-03": (["REMAPPED_ROWS_RISING"], 8, 8, (3, 0), [], False),
        "a100-train-02": (["REMAPPED_ROWS_RISING"], 32, 32, (2, 0), [], False),
        "a100-train-08": (["REMAPPED_ROWS_RISING"], 8, 8, (4, 0), [], False),
        "l40s-viz-06": (["ALLOCATABLE_BELOW_CAPACITY"], 4, 3, (0, 0), [94], False),
        "a100-train-06": (["ALLOCATABLE_BELOW_CAPACITY"], 8, 7, (0, 0), [48], False),
    },
}


@pytest.mark.parametrize("stem", sorted(DIGESTS))
def test_digest_lists_exactly_the_flagged_nodes(stem: str) -> None:
    cluster, telemetry = build_sources(load_scenario(PROBE3.path(stem)))
    got = json.loads(json.dumps(collect_digest(cluster, telemetry).to_dict()))
    nodes = [f["node"] for f in got["flagged"]]
    assert len(nodes) == len(set(nodes)), nodes
    table = {
        f["node"]: (
            f["reasons"],
            f["capacity"],
            f["allocatable"],
            (f["remapped_rows_24h"]["correctable"], f["remapped_rows_24h"]["uncorrectable"]),
            f["xids_24h"],
            f["cordoned"],
        )
        for f in got["flagged"]
    }
    assert table == DIGESTS[stem]


def test_digest_notes_a_gpu_node_that_is_not_ready() -> None:
    stem = "probe3-digest-34-nodes-gaps-rows-remap-stale-xid-healthy-target"
    cluster, telemetry = build_sources(load_scenario(PROBE3.path(stem)))
    digest = collect_digest(cluster, telemetry)
    [row] = [f for f in digest.flagged if f.node == "h100-infer-12"]
    assert row.reasons == ("NODE_NOT_READY",)
    assert any(
        n.startswith("1 GPU node(s) not Ready") and n.endswith(": h100-infer-12") for n in digest.notes
    ), digest.notes
