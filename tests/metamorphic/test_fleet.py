"""Metamorphic cases (tests/metamorphic/harness.py): cpu_workloads, healthy_pool_other_driver, sick_nodes_elsewhere must not change any diagnosis."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.metamorphic.harness import cases, check_invariant
from tests.metamorphic.mutations import INVARIANT

MUTATIONS = ["cpu_workloads", "healthy_pool_other_driver", "sick_nodes_elsewhere"]


@pytest.mark.parametrize(("path", "mutation"), cases(MUTATIONS))
def test_the_diagnosis_stays(path: Path, mutation: str) -> None:
    check_invariant(path, INVARIANT[mutation], mutation)
