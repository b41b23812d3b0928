"""Metamorphic cases (tests/metamorphic/harness.py): reorder_objects, reorder_series must not change any diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metamorphic.harness import cases, check_invariant
from tests.metamorphic.mutations import INVARIANT

MUTATIONS = ["reorder_objects", "reorder_series"]


@pytest.mark.parametrize(("path", "mutation"), cases(MUTATIONS))
def test_the_diagnosis_stays(path: Path, mutation: str) -> None:
    check_invariant(path, INVARIANT[mutation], mutation)
