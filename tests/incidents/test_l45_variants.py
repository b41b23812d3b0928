"""Incidents for layers 4-5 in formats the bundled scenarios do not use, walked end to end.

Each file under l45/ is a complete scenario (spec/scenario.md) with `x-expect`, checked like the
bundled ones: structure first (same rules as tests/test_bundled_scenarios.py), then the walk's
layers, verdict, expected and absent codes. The formats differ from bot/scenarios on purpose:
OpenShift and older operator namespaces, `kubectl logs --timestamps` and must-gather `--prefix`
lines, pre-rename exporter metrics, exported_* and kubernetes_* pod labels, vLLM V1 engines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_structure,
    incident_files,
    names,
    walked_findings,
)

FILES = incident_files("l45")
IDS = [p.stem for p in FILES]


def test_at_least_four_incidents() -> None:
    assert len(FILES) >= 4, FILES


def test_names_do_not_clash_with_bundled_scenarios() -> None:
    mine = names(FILES)
    theirs = bundled_names()
    assert len(mine) == len(FILES) and not mine & theirs


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_structure(path: Path) -> None:
    check_structure(path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def _evidence(path: Path, code: str) -> list[str]:
    return [e for f in walked_findings(path, code) for e in f.evidence]


def test_timestamped_plugin_line_is_the_evidence() -> None:
    [path] = [p for p in FILES if p.stem == "xid94-openshift-kubectl-timestamps"]
    evidence = _evidence(path, "L5_DEVICE_UNHEALTHY")
    assert any(
        "XidCriticalError: Xid=94 on Device=GPU-3b6ec030-5adc-1847-e155-79f635584b4e" in e for e in evidence
    )


def test_time_slicing_names_the_notebook_sharing_the_gpu() -> None:
    [path] = [p for p in FILES if p.stem == "jax-oom-time-sliced-exported-labels"]
    assert any("research/jupyter-ana-0" in e for e in _evidence(path, "L4_TIME_SLICING"))
    assert any("RESOURCE_EXHAUSTED: Out of memory" in e for e in _evidence(path, "L4_GPU_OOM_IN_LOGS"))
