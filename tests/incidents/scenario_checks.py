"""What every incident folder (l12/, l3/, l45/) checks the same way: its files, their structure
by the bundled scenarios' rules, their names, and the findings their walk gives."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import tests.test_bundled_scenarios as bundled
from layers.findings import Finding

HERE = Path(__file__).resolve().parent


def incident_files(folder: str) -> list[Path]:
    return sorted((HERE / folder).glob("*.yaml"))


def check_structure(path: Path) -> None:
    """The bundled scenarios' structural rules (tests/test_bundled_scenarios.py), all of them."""
    bundled.test_top_level_follows_the_scenario_format(path)
    bundled.test_objects_are_consistent(path)
    bundled.test_operands_look_like_the_gpu_operators(path)
    bundled.test_logs_belong_to_real_containers(path)
    bundled.test_series_have_history_in_order(path)
    bundled.test_expectations_are_well_formed(path)


def names(files: Iterable[Path]) -> set[str]:
    return {bundled.read(p)["name"] for p in files}


def bundled_names() -> set[str]:
    return names(bundled.FILES)


def walked_findings(path: Path, code: str) -> list[Finding]:
    """The findings with this code, in every layer of a scenario's default walk."""
    result, _ = bundled.diagnose(path)
    return [f for layer in result.layers for f in layer.findings if f.code == code]
