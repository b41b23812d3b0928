"""Positive controls of the metamorphic suite: changes that must change the diagnosis (else the
comparison could pass on a walk that reads nothing). A control that has nothing to act on (the target
is not bound, its node is already short of a GPU) is skipped for that scenario."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metamorphic.harness import CORPUS, baseline, case_id, cases, data, signature
from tests.metamorphic.mutations import CONTROLS, INVARIANT


@pytest.mark.parametrize(("path", "mutation"), cases(CONTROLS))
def test_a_change_that_matters_changes_the_diagnosis(path: Path, mutation: str) -> None:
    changed = CONTROLS[mutation](data(path))
    if changed is None:
        pytest.skip(f"{mutation} has nothing to act on in {path.stem}")
    assert signature(changed, f"{path}#{mutation}") != baseline(path)


def test_the_corpus_is_whole() -> None:
    ids = [case_id(p) for p in CORPUS]
    assert len(ids) == len(set(ids)) >= 200  # 45 bundled scenarios and the test incidents
    assert len(INVARIANT) >= 6


def test_the_controls_act_on_much_of_the_corpus() -> None:
    acted = {m: sum(c(data(p)) is not None for p in CORPUS) for m, c in CONTROLS.items()}
    assert acted["xid79_on_target_node"] >= 60 and acted["xid79_taint_on_target_dra_device"] >= 5, acted
