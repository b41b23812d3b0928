"""Metamorphic cases (tests/metamorphic/harness.py): renaming or reordering NVIDIADriver resources
(tests/metamorphic/nvidiadrivers.py) must not change any diagnosis, over every incident that has
NVIDIADriver resources; among them the overlap of a catch-all `default` and a specific one, where
renaming `default` to `zz-default` used to flip L3_DRIVER_VERSION_SKEW to L3_OK."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metamorphic.harness import CORPUS, case_id, cases, check_invariant, data, signature
from tests.metamorphic.nvidiadrivers import MUTATIONS, has_nvidiadrivers, nvidiadriver_default_renamed

WITH_DRIVERS = {p for p in CORPUS if has_nvidiadrivers(data(p))}
OVERLAP = "pools:pools-nvidiadriver-default-overlaps-h100-pin"


def test_the_corpus_has_nvidiadriver_incidents() -> None:
    ids = {case_id(p) for p in WITH_DRIVERS}
    assert len(ids) >= 5 and OVERLAP in ids, sorted(ids)


@pytest.mark.parametrize(
    ("path", "mutation"), [c for c in cases(list(MUTATIONS)) if c.values[0] in WITH_DRIVERS]
)
def test_the_diagnosis_stays(path: Path, mutation: str) -> None:
    check_invariant(path, MUTATIONS[mutation], mutation)


def test_the_overlap_stays_a_skew_under_either_name() -> None:
    path = next(p for p in WITH_DRIVERS if case_id(p) == OVERLAP)
    for scenario in (data(path), nvidiadriver_default_renamed(data(path))):
        verdict, layers = signature(scenario, str(path))
        assert verdict == "L3_DRIVER_VERSION_SKEW" and (3, "warn", ("L3_DRIVER_VERSION_SKEW",)) in layers
