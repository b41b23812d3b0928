"""What the probe6 incidents (tests/incidents/probe6/) must say beyond their `x-expect`: the deciding
finding names the right node and numbers; no fault or warn finding names a noise node; the digest over
the digest fleet lists exactly the nodes spec/interfaces.md flags. The walk's codes, verdict and path
are checked by test_probe_incidents.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.sources.scenario import build_sources, load_scenario
from layers.digest import collect_digest
from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import Incidents

PROBE6 = Incidents("probe6")


def test_seven_incidents() -> None:
    assert len(PROBE6.files) >= 7, PROBE6.ids


@pytest.mark.parametrize("path", PROBE6.files, ids=PROBE6.ids)
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


def test_sidecar_gpu_counts_on_top_of_the_main_container() -> None:
    [f] = PROBE6.findings(
        "probe6-sidecar-gpu-plus-main-limits-only-l40s-exhausted-20-nodes", "L1_GPU_EXHAUSTED"
    )
    text = " ".join([f.summary, *f.evidence])
    assert "5" in f.summary and "nvidia.com/gpu" in f.summary, f.summary
    assert "l40s-viz-01" in text and "a100-train" not in text, text


def test_zero_quantity_is_not_advertising() -> None:
    [f] = PROBE6.findings(
        "probe6-capacity-gpu-zero-plugin-running-a100-candidate-22-nodes", "L1_GPU_NODE_NOT_ADVERTISING"
    )
    assert f.node == "a100-train-04"
    assert "never registered" not in f.summary and "nvidia.com/gpu=0" in f.summary, f.summary
    assert "status.capacity[nvidia.com/gpu]=0, status.allocatable[nvidia.com/gpu]=0" in f.evidence, f.evidence


def test_affinity_candidate_is_the_h100_with_the_gap() -> None:
    stem = "probe6-affinity-notin-a100-gt-memory-preferred-a100-h100-gap-24-nodes"
    [f] = PROBE6.findings(stem, "L1_ALLOCATABLE_BELOW_CAPACITY")
    assert f.node == "h100-infer-04"
    [u] = PROBE6.findings(stem, "L5_DEVICE_UNHEALTHY")
    assert u.node == "h100-infer-04" and any("Xid 94" in e or "Xid=94" in e for e in u.evidence), u.evidence


def test_xid31_burst_is_a_warning_pointing_at_the_workload() -> None:
    [f] = PROBE6.findings("probe6-dcgm-4-xid31-burst-count-skipped-by-plugin-h100-bound-23-nodes", "L5_XID")
    assert f.severity == Severity.WARN and f.node == "h100-infer-02"
    assert "Xid 31" in f.summary, f.summary


# --- the daily digest (spec/interfaces.md `digest --format json`) -----------------------------

# node -> (reasons, capacity, allocatable, (correctable, uncorrectable) rows in 24 h, xids_24h, cordoned)
DIGEST = {
    "l40s-viz-03": (["ALLOCATABLE_BELOW_CAPACITY"], 4, 3, (0, 0), [79], False),
    "a100-train-04": (["ALLOCATABLE_BELOW_CAPACITY"], 56, 55, (0, 0), [], False),
    "a100-train-07": (["REMAPPED_ROWS_RISING"], 8, 8, (0, 2), [], False),
}


def test_digest_lists_exactly_the_flagged_nodes() -> None:
    stem = "probe6-digest-27-nodes-time-sliced-mig-single-reset-dips-healthy-target"
    cluster, telemetry = build_sources(load_scenario(PROBE6.path(stem)))
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
    assert table == DIGEST
