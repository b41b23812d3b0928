"""Black-box layer 2-4 probe incidents (tests/incidents/probe2/*.yaml, made by its build.py).

Production-shaped fleets (12-40 nodes, several pools, sick nodes elsewhere) around real-world variants
of outside text: older device-plugin log formats, kube-scheduler messages of other releases, kubelet
admission failures, DCGM labels of newer exporters. Each file's `x-expect` comes from spec/findings.md;
the default walk must give it. Loaded once with libyaml, as the other large-fleet runners do.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from layers.findings import Finding
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_structure,
    incident_files,
    names,
    walked_findings,
)

FILES = incident_files("probe2")
IDS = [p.stem for p in FILES]


@functools.cache
def _parsed(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)


def data(path: Path) -> dict[str, Any]:
    got = copy.deepcopy(_parsed(path))
    assert isinstance(got, dict), f"{path.name}: not a mapping"
    return got


@pytest.fixture
def fast_read(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(bundled, "read", data)
    yield


def test_at_least_five_incidents() -> None:
    assert len(FILES) >= 5, FILES


@pytest.mark.usefixtures("fast_read")
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


@pytest.mark.usefixtures("fast_read")
def test_names_differ_from_every_other_scenario() -> None:
    assert not names(FILES) & bundled_names()


@pytest.mark.usefixtures("fast_read")
@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def _findings(stem: str, code: str) -> list[Finding]:
    return walked_findings(Path(__file__).resolve().parent / "probe2" / f"{stem}.yaml", code)


def test_validator_evidence_names_the_stage_and_its_log() -> None:
    [f] = _findings("probe2-v24-9-validator-cuda-validation-exclusive-process-22-nodes", "L2_VALIDATOR_STUCK")
    assert "cuda-validation" in f.summary
    assert any("is/are busy or unavailable" in e for e in f.evidence), f.evidence


def test_kernel_unresolved_line_is_the_build_evidence() -> None:
    [f] = _findings("probe2-v23-9-driver-ctr-kernel-unresolved-a100-19-nodes", "L3_DRIVER_BUILD_FAILED")
    assert f.node == "a100-train-02"
    assert "Could not resolve Linux kernel version" in f.evidence


def test_nouveau_is_named_as_the_cause() -> None:
    [f] = _findings("probe2-v25-3-driver-nouveau-module-fail-l40s-17-nodes", "L3_DRIVER_BUILD_FAILED")
    assert "nouveau" in f.summary


def test_skew_table_names_the_odd_node_only() -> None:
    [f] = _findings("probe2-driver-kernel-skew-cuda-insufficient-h100-20-nodes", "L3_DRIVER_VERSION_SKEW")
    assert "odd nodes (driver): h100-infer-07" in f.evidence, f.evidence


def test_oomkilled_names_the_memory_limit() -> None:
    [f] = _findings("probe2-oomkilled-cgroup-dataloader-a100-18-nodes", "L4_OOMKILLED")
    assert "memory limit of main: 64Gi" in f.evidence


def test_time_slicing_names_the_other_pod_on_the_gpu() -> None:
    [f] = _findings("probe2-vllm-preemptions-time-sliced-l40s-shared-16-nodes", "L4_TIME_SLICING")
    assert any("notebooks/jupyter-bob-0" in e for e in f.evidence), f.evidence
