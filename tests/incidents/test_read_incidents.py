"""Layer 5's reads on real-world text (tests/incidents/reads/*.yaml, built by reads/build.py):
a time-sliced node counts GPUs, not replicas (issue 9 item 7), in the walk and the digest; the device
plugin's log is read by time and size, not by its last 500 lines (item 8), offline and through the
fake API server with the real kubernetes client, and a log past the byte cap is coverage, not OK."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, load_scenario
from handlers.digest import digest_table
from layers.digest import collect_digest
from layers.facts.context import Settings
from layers.findings import Finding, Severity
from layers.walk import walk
from tests import test_bundled_scenarios as bundled
from tests.fakes.kube_api import serve
from tests.incidents.scenario_checks import (
    check_structure,
    incident_files,
    walked_findings,
)

FILES = incident_files("reads")
HERE = Path(__file__).resolve().parent / "reads"


def by_name(stem: str) -> Path:
    return HERE / f"{stem}.yaml"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_the_bundled_scenarios() -> None:
    # A scenario's name is its file's stem (checked above and for the bundled ones).
    assert not {p.stem for p in FILES} & {p.stem for p in bundled.FILES}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


SLICED = by_name("time-sliced-l4-replica-ids-one-gpu-lost")


def test_time_sliced_gap_is_one_gpu_of_four_replicas() -> None:
    [gap] = walked_findings(SLICED, "L5_ALLOCATABLE_BELOW_CAPACITY")
    assert gap.node == "l4-nb-01" and gap.severity == Severity.FAULT
    assert "1 GPU (4 replicas) reported unhealthy" in gap.summary, gap.summary
    assert "4 GPUs" not in gap.summary
    assert "time-sliced: 4 replicas per GPU, so 4 replica(s) = 1 GPU(s) of 4" in gap.evidence


def test_the_plugin_marking_four_replica_ids_is_one_gpu() -> None:
    [mark] = walked_findings(SLICED, "L5_DEVICE_UNHEALTHY")
    assert "marked 1 GPU (4 replicas) unhealthy after Xid 79" in mark.summary, mark.summary
    assert "4 devices" not in mark.summary and "::" not in mark.summary
    # One evidence line for the GPU, naming its replicas, not one per replica.
    [line] = [e for e in mark.evidence if e.startswith("GPU-")]
    assert "(replicas ::0, ::1, ::2, ::3): Xid 79" in line
    [xid] = walked_findings(SLICED, "L5_XID")
    where = xid.summary.split("(")[1].split(")")[0]
    assert where.startswith("GPU-") and "::" not in where and "," not in where, xid.summary


def test_the_digest_counts_the_sliced_node_as_three_of_four_gpus() -> None:
    cluster, telemetry = build_sources(load_scenario(SLICED))
    digest = collect_digest(cluster, telemetry)
    [sliced] = [f for f in digest.flagged if f.node == "l4-nb-01"]
    assert (sliced.capacity, sliced.allocatable) == (4, 3)
    assert "nvidia.com/gpu 16/12 replicas = 3 of 4 GPUs" in digest_table(digest)


# --- the plugin's log by time and size (issue 9 item 8) ---------------------------------------

BURIED = by_name("unhealthy-mark-buried-under-xid13-chatter")
SICK = "h100-train-02"


def _walk(cluster: Any, telemetry: Any, settings: Settings | None = None) -> Any:
    return walk(cluster, telemetry, "research", "llm-pretrain-0", settings=settings)


def _layer5(result: Any) -> list[Finding]:
    return [f for r in result.layers if r.layer == 5 for f in r.findings]


def _plugin_pod(cluster: Any) -> str:
    pods = cluster.list_pods("gpu-operator", field_selector=f"spec.nodeName={SICK}")
    [name] = [p["metadata"]["name"] for p in pods if p["metadata"]["name"].startswith("nvidia-device-plugin")]
    return str(name)


def test_the_incident_buries_the_mark_past_the_last_500_lines() -> None:
    # The point of the incident: a tail of 500 lines, what layer 5 read before, has no mark.
    cluster, _ = build_sources(load_scenario(BURIED))
    tail = cluster.pod_log("gpu-operator", _plugin_pod(cluster), "nvidia-device-plugin", tail_lines=500)
    assert "Skipping event" in tail and "Xid=119" not in tail and "marked unhealthy" not in tail
    whole = cluster.pod_log("gpu-operator", _plugin_pod(cluster), "nvidia-device-plugin", tail_lines=None)
    assert whole.count("Skipping event") > 500 // 2 and "Xid=119" in whole


def _says_the_buried_xid(result: Any) -> None:
    found = _layer5(result)
    [mark] = [f for f in found if f.code == "L5_DEVICE_UNHEALTHY"]
    assert "Xid 119" in mark.summary and mark.node == SICK
    [x119] = [f for f in found if f.code == "L5_XID" and f.summary.startswith("Xid 119")]
    assert x119.severity == Severity.FAULT
    assert (
        result.verdict is not None and result.verdict.code == "L5_XID" and "Xid 119" in result.verdict.summary
    )


def test_offline_the_mark_is_found_under_the_chatter() -> None:
    _says_the_buried_xid(_walk(*build_sources(load_scenario(BURIED))))


def test_through_the_api_server_the_log_is_read_by_size_not_by_tail() -> None:
    snapshot, telemetry = build_sources(load_scenario(BURIED))
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
        try:
            _says_the_buried_xid(_walk(kube, telemetry))
        finally:
            kube.close()
        reads = [r.query for r in api.requests if r.path.endswith(f"/{_plugin_pod(snapshot)}/log")]
    current = [q for q in reads if "previous" not in q]
    assert current and all("tailLines" not in q for q in current), reads
    assert current[0]["limitBytes"] == str(Settings().log_window_bytes) and "sinceSeconds" not in current[0]


SMALL = Settings(log_window_bytes=64 << 10)


def _says_it_read_only_part(result: Any) -> None:
    found = _layer5(result)
    [part] = [f for f in found if f.code == "L5_UNKNOWN" and "read only in part" in f.summary]
    assert part.node == SICK and part.severity == Severity.UNKNOWN
    assert any("the last 24 h past their first 65536 bytes" in e for e in part.evidence), part.evidence
    assert not [f for f in found if f.code == "L5_OK"]
    # What was read still counts: the mark sits in the log's first 64 KiB.
    assert [f for f in found if f.code == "L5_DEVICE_UNHEALTHY"]


def test_offline_a_log_past_the_cap_is_coverage_not_ok() -> None:
    _says_it_read_only_part(_walk(*build_sources(load_scenario(BURIED)), SMALL))


def test_through_the_api_server_a_log_past_the_cap_is_coverage_not_ok() -> None:
    snapshot, telemetry = build_sources(load_scenario(BURIED))
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
        try:
            _says_it_read_only_part(_walk(kube, telemetry, SMALL))
        finally:
            kube.close()
        reads = [r.query for r in api.requests if r.path.endswith(f"/{_plugin_pod(snapshot)}/log")]
    # The cap cut the read from the start, so the last 24 h were read again.
    assert any(q.get("sinceSeconds") == str(24 * 3600) and "previous" not in q for q in reads), reads
