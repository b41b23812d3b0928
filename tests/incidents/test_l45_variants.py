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

DIR = Path(__file__).resolve().parent / "l45"
FILES = sorted(DIR.glob("*.yaml"))
IDS = [p.stem for p in FILES]


def test_at_least_four_incidents() -> None:
    assert len(FILES) >= 4, FILES


def test_names_do_not_clash_with_bundled_scenarios() -> None:
    mine = {bundled.read(p)["name"] for p in FILES}
    theirs = {bundled.read(p)["name"] for p in bundled.FILES}
    assert len(mine) == len(FILES) and not mine & theirs


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_structure(path: Path) -> None:
    bundled.test_top_level_follows_the_scenario_format(path)
    bundled.test_objects_are_consistent(path)
    bundled.test_operands_look_like_the_gpu_operators(path)
    bundled.test_logs_belong_to_real_containers(path)
    bundled.test_series_have_history_in_order(path)
    bundled.test_expectations_are_well_formed(path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def _evidence(path: Path, code: str) -> list[str]:
    result, _ = bundled.diagnose(path)
    return [e for layer in result.layers for f in layer.findings if f.code == code for e in f.evidence]


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
