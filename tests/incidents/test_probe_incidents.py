"""Black-box probe incidents: tests/incidents/probe/ (layers 1 and 5) and tests/incidents/probe2/
(layers 2-4), each folder's *.yaml made by its build.py.

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

PROBE, PROBE2 = incident_files("probe"), incident_files("probe2")
FILES = (
    PROBE + PROBE2 + incident_files("probe3") + incident_files("probe4") + incident_files("probe6")
)  # probe4: test_probe4_incidents.py
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


def test_at_least_eight_and_five_incidents() -> None:
    assert len(PROBE) >= 8 and len(PROBE2) >= 5, FILES


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
    folder = stem.partition("-")[0]  # "probe" or "probe2", as the file names begin
    return walked_findings(Path(__file__).resolve().parent / folder / f"{stem}.yaml", code)


def test_old_plugin_line_is_the_unhealthy_evidence() -> None:
    [f] = _findings("probe-old-plugin-will-go-unhealthy-xid48-20-nodes", "L5_DEVICE_UNHEALTHY")
    assert f.node == "a100-train-03"
    assert any("the device will go unhealthy" in e and "Xid 48" in e for e in f.evidence), f.evidence


def test_uuid_unknown_marks_all_devices() -> None:
    [f] = _findings("probe-plugin-uuid-unknown-marks-all-devices-23-nodes", "L5_DEVICE_UNHEALTHY")
    assert any(e.startswith("all devices:") and "marking all devices as unhealthy" in e for e in f.evidence)


def test_mig_device_is_named_by_its_uuid() -> None:
    [f] = _findings("probe-mig-1g-10gb-device-marked-unhealthy-mixed-19-nodes", "L5_DEVICE_UNHEALTHY")
    assert "MIG-4e1a9c02-77d5-5b8e-9a11-3f0c2d8e6b71" in f.summary


def test_ignored_xid_list_is_no_xid() -> None:
    assert not _findings("probe-plugin-ignoring-xids-startup-line-healthy-28-nodes", "L5_XID")


# --- layers 2-4 (probe2) ---


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
