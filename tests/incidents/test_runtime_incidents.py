"""Incidents about what the runtime and the logs say (tests/incidents/runtime/*.yaml).

Production-shaped fleets (several pools, operator versions, sick nodes that are not the target's)
built from real-world text: the NVIDIA runtime hook's and CDI's refusals as containerd and CRI-O
wrap them, DCGM's last-Xid gauge that never resets, the standalone device plugins' labels,
time-sliced nodes, chatty plugin logs. Scenario in, expected codes/next/verdict out (`x-expect`);
a few tests pin the evidence a person needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    bundled_names,
    check_structure,
    incident_files,
    names,
    walked_findings,
)

HERE = Path(__file__).resolve().parent / "runtime"
FILES = incident_files("runtime")
IDS = [p.stem for p in FILES]


def findings(stem: str, code: str) -> list[Any]:
    return walked_findings(HERE / f"{stem}.yaml", code)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_every_other_incident() -> None:
    others = bundled_names()
    for folder in ("l12", "l3", "l45", "blackbox/l12", "blackbox/l3", "blackbox/l45"):
        others |= names(incident_files(folder))
    assert not names(FILES) & others


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def digest_of(stem: str) -> dict[str, Any]:
    from bot.scenario import build_sources, load_scenario
    from layers.digest import collect_digest

    cluster, tel = build_sources(load_scenario(HERE / f"{stem}.yaml"))
    return {f["node"]: f for f in json.loads(json.dumps(collect_digest(cluster, tel).to_dict()))["flagged"]}


# --- item 6: DCGM's last-Xid gauge never resets -------------------------------------------------


def test_weeks_old_last_xid_is_history_in_the_walk_and_left_out_of_the_digest() -> None:
    stem = "last-xid48-gauge-weeks-old-h100-pool"
    [old] = findings(stem, "L5_XID")
    assert old.severity == Severity.INFO and old.node == "h100-07"
    assert old.summary.startswith("last Xid 48 on h100-07") and "before the last 24 h" in old.summary
    flagged = digest_of(stem)
    assert "h100-07" not in flagged  # nothing else is wrong with it
    assert flagged["l40s-02"]["xids_24h"] == [79]  # a gauge that changed today is news
    # one GPU short since an Xid 79 three days ago, another GPU holding the old 48: neither is of the last 24 h
    assert flagged["h100-03"]["reasons"] == ["ALLOCATABLE_BELOW_CAPACITY"]
    assert flagged["h100-03"]["xids_24h"] == []
