"""Layer 5's reads on real-world text (tests/incidents/reads/*.yaml, built by reads/build.py):
a time-sliced node counts GPUs, not replicas (issue 9 item 7), in the walk and the digest."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sources.scenario import build_sources, load_scenario
from handlers.digest import digest_table
from layers.digest import collect_digest
from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_structure,
    incident_files,
    names,
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
    assert not names(FILES) & bundled_names()


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
