"""What every incident folder (l12/, l3/, l45/) checks the same way: its files, their structure
by the bundled scenarios' rules, their names, and the findings their walk gives."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

import tests.test_bundled_scenarios as bundled
from layers.findings import Finding

HERE = Path(__file__).resolve().parent
# The incident folders whose names every new folder's must differ from (with the bundled scenarios').
INCIDENT_FOLDERS = ("l12", "l3", "l45", "blackbox/l12", "blackbox/l3", "blackbox/l45")


def incident_files(folder: str) -> list[Path]:
    return sorted((HERE / folder).glob("*.yaml"))


class Incidents:
    """One incident folder: its files, their ids for parametrize, and the findings of one's walk."""

    def __init__(self, folder: str) -> None:
        self.folder = HERE / folder
        self.files = incident_files(folder)
        self.ids = [p.stem for p in self.files]

    def path(self, stem: str) -> Path:
        return self.folder / f"{stem}.yaml"

    def findings(self, stem: str, code: str) -> list[Finding]:
        return walked_findings(self.path(stem), code)


def check_structure(path: Path) -> None:
    """The bundled scenarios' structural rules (tests/test_bundled_scenarios.py), all of them."""
    bundled.test_top_level_follows_the_scenario_format(path)
    bundled.test_objects_are_consistent(path)
    bundled.test_operands_look_like_the_gpu_operators(path)
    bundled.test_logs_belong_to_real_containers(path)
    bundled.test_series_have_history_in_order(path)
    bundled.test_expectations_are_well_formed(path)


def check_flattened_structure(path: Path, folder: Path) -> None:
    """check_structure on a copy in `folder` with pasted `kind: List` objects' items laid flat:
    the bundled rules know single objects only."""
    data = bundled.read(path)
    flat: list[dict[str, Any]] = []
    for obj in data["objects"]:
        flat += obj["items"] if obj.get("kind") == "List" else [obj]
    data["objects"] = flat
    copy = folder / path.name
    copy.write_text(yaml.dump(data, Dumper=_SAFE_DUMPER, sort_keys=False), encoding="utf-8")
    check_structure(copy)


_SAFE_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def names(files: Iterable[Path]) -> set[str]:
    return {_name(p, p.stat().st_mtime_ns) for p in files}


@functools.cache
def _name(path: Path, mtime_ns: int) -> str:
    """A file's scenario name, read once a run: every folder compares its names with all the others'."""
    name: str = bundled.read(path)["name"]
    return name


def bundled_names() -> set[str]:
    return names(bundled.FILES)


def names_elsewhere(*folders: str) -> set[str]:
    """The bundled scenarios' names and those of the incident folders given."""
    out = bundled_names()
    for folder in folders:
        out |= names(incident_files(folder))
    return out


def walked_findings(path: Path, code: str) -> list[Finding]:
    """The findings with this code, in every layer of a scenario's default walk."""
    result, _ = bundled.diagnose(path)
    return [f for layer in result.layers for f in layer.findings if f.code == code]
