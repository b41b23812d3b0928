"""Black-box incidents for layers 4-5 (tests/incidents/blackbox/l45/*.yaml), written from the spec
before reading the layer code: pasted `kind: List` dumps, `kubectl logs --timestamps` plugin logs,
dcgm-exporter 3.x / 4.x / 4.8.3 (lowercase hostname) / no-NODE_NAME expositions, MPS sharing,
vLLM found by its command, Xids only in the plugin log or only in DCGM's count window.
The walk must give `x-expect`; three fleets are also checked against the digest JSON spec."""

from __future__ import annotations

from pathlib import Path

import pytest

from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_flattened_structure,
    incident_files,
    names,
    walked_findings,
)

FILES = incident_files("blackbox/l45")
IDS = [p.stem for p in FILES]
HERE = Path(__file__).resolve().parent / "blackbox" / "l45"


def by_name(stem: str) -> Path:
    return HERE / f"{stem}.yaml"


def test_at_least_eight_incidents() -> None:
    assert len(FILES) >= 8, FILES


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path, tmp_path: Path) -> None:
    check_flattened_structure(path, tmp_path)


def test_names_differ_from_the_bundled_scenarios() -> None:
    assert not names(FILES) & bundled_names()


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def test_xid79_is_named_from_the_timestamped_plugin_log_only() -> None:
    path = by_name("l40s-xid79-plugin-only-nvidia-system")
    [x] = walked_findings(path, "L5_XID")
    assert x.severity == Severity.FAULT and x.node == "gpu-l40s-03" and "Xid 79" in x.summary
    assert any(
        e.endswith(
            "XidCriticalError: Xid=79 on Device="
            + x.summary.split("(")[1].split(")")[0]
            + "; marking device as unhealthy."
        )
        for e in x.evidence
    ), x.evidence
    assert any("-n nvidia-system" in c for c in x.commands)


def test_ignored_xids_are_warnings_and_eventdata_zero_is_no_xid() -> None:
    xids = walked_findings(by_name("xid31-xid45-skipped-by-plugin-lowercase-hostname"), "L5_XID")
    assert {f.summary.split()[1] for f in xids} == {"31", "45"}
    assert all(f.severity == Severity.WARN for f in xids)
    assert not any("Xid 0 " in f.summary for f in xids)


def test_xid154_from_the_count_window_history_is_info() -> None:
    [x] = walked_findings(by_name("xid154-dcgm-count-only-plugin-restarted"), "L5_XID")
    assert x.severity == Severity.INFO and "154" in x.summary and "recovery action" in x.summary
    # The previous plugin instance's Xid 94 is four days old: not in the last 24 h.
    assert "94" not in x.summary and not any("Xid=94" in e for e in x.evidence)


def test_xid_without_catalog_action_is_a_warning_beside_the_fault() -> None:
    xids = {
        f.summary.split()[1]: f
        for f in walked_findings(by_name("xid95-and-xid168-two-gpus-out-pending-8gpu-job"), "L5_XID")
    }
    assert xids["95"].severity == Severity.FAULT and xids["168"].severity == Severity.WARN


def test_row_remap_failure_maps_exporter_pod_hostname_to_its_node() -> None:
    [f] = walked_findings(by_name("row-remap-failed-flat-rows-exporter-podname"), "L5_ROW_REMAP_FAILURE")
    assert f.node == "a100-node-12" and f.summary.startswith("GPU 5 ")


def test_only_slowdown_reasons_count_as_clock_events() -> None:
    [f] = walked_findings(by_name("correctable-rows-rising-power-brake-h100-nvl"), "L5_CLOCK_EVENTS")
    text = " ".join((f.summary, *f.evidence))
    assert "hw_power_brake" in text and "hw_slowdown" in text
    assert "sw_power_cap" not in text and "gpu_idle" not in text


def test_oomkilled_names_the_sidecar_and_its_limit() -> None:
    [f] = walked_findings(by_name("oomkilled-tokenizer-sidecar-gpu-idle"), "L4_OOMKILLED")
    assert "tokenizer-prep" in f.summary and "4Gi" in " ".join(f.evidence)


def test_mps_sharing_names_the_other_pod() -> None:
    [f] = walked_findings(by_name("pytorch-oom-mps-shared-a100-40gb"), "L4_TIME_SLICING")
    assert any("research/notebook-akim-0" in e for e in f.evidence)


# --- digest over three fleets (spec/interfaces.md `digest --format json`) -----------------------

DIGESTS = {
    "l40s-xid79-plugin-only-nvidia-system": {
        "gpu-l40s-03": (["ALLOCATABLE_BELOW_CAPACITY"], 4, 3, (0, 0), [79]),
        "gpu-l40s-04": (["REMAPPED_ROWS_RISING"], 4, 4, (4, 0), []),
    },
    "row-remap-failed-flat-rows-exporter-podname": {
        "a100-node-12": (["ROW_REMAP_FAILURE"], 8, 8, (0, 0), []),
        "a100-node-13": (["ALLOCATABLE_BELOW_CAPACITY"], 8, 6, (0, 0), []),
    },
    "xid95-and-xid168-two-gpus-out-pending-8gpu-job": {
        "h100-r4-n09": (["ALLOCATABLE_BELOW_CAPACITY"], 8, 6, (0, 0), [95, 168]),
    },
}


@pytest.mark.parametrize("stem", sorted(DIGESTS))
def test_digest_json_follows_the_spec(stem: str) -> None:
    import json

    from bot.sources.scenario import build_sources, load_scenario
    from layers.digest import collect_digest

    cluster, tel = build_sources(load_scenario(by_name(stem)))
    got = json.loads(json.dumps(collect_digest(cluster, tel).to_dict()))
    assert {"generated_at", "gpu_nodes", "flagged"} <= set(got)
    nodes = [f["node"] for f in got["flagged"]]
    assert len(nodes) == len(set(nodes))
    table = {
        f["node"]: (
            f["reasons"],
            f["capacity"],
            f["allocatable"],
            (f["remapped_rows_24h"]["correctable"], f["remapped_rows_24h"]["uncorrectable"]),
            f["xids_24h"],
        )
        for f in got["flagged"]
    }
    assert table == DIGESTS[stem]
