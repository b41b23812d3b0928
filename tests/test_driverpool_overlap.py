"""Driver pools where NVIDIADriver selectors overlap (layers/facts/driverpool.py `assign`): the driver
pod's owner decides, then the driver pods of the overlap, then the narrowest selector, then a pool
of the overlap itself — and none of it depends on the resources' names or their order."""

from __future__ import annotations

from typing import Any

import pytest

from layers.facts.driverpool import DriverPools, assign


def node(name: str, group: str) -> dict[str, Any]:
    labels = {"nvidia.com/gpu.deploy.driver": "true", "group": group, "nvidia.com/gpu.product": "NVIDIA-H100"}
    return {"metadata": {"name": name, "labels": labels}}


def driver(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"nodeSelector": selector}}


NODES = [node(f"h-{i}", "h100") for i in range(4)] + [node(f"a-{i}", "a100") for i in range(4)]
CATCH_ALL = {"nvidia.com/gpu.deploy.driver": "true"}
H100 = {"group": "h100"}


def partition(pools: DriverPools) -> set[frozenset[str]]:
    return {frozenset(ms) for ms in pools.members_of.values()}


@pytest.mark.parametrize("names", [("default", "h100"), ("zz-default", "h100"), ("b", "a")])
def test_the_owner_decides_whatever_the_names(names: tuple[str, str]) -> None:
    catch_all, specific = names
    for drivers in (
        [driver(catch_all, CATCH_ALL), driver(specific, H100)],
        [driver(specific, H100), driver(catch_all, CATCH_ALL)],
    ):
        # h-0 and h-1 run the specific one's driver pods; h-2 runs the catch-all's; h-3 has none.
        owners = {"h-0": specific, "h-1": specific, "h-2": catch_all, "a-0": catch_all}
        pools = assign(NODES, drivers, owners)
        assert pools.members_of[pools.of("h-0")] == ("h-0", "h-1", "h-3")  # h-3: where the overlap's pods go
        assert pools.of("h-2") == pools.of("a-1") and pools.of("h-2") != pools.of("h-0")
        assert pools.overlaps["h-3"] == tuple(sorted(names)) and "a-1" not in pools.overlaps
        assert "by the driver pods where the same selectors overlap (2 owned by" in pools.notes_of("h-3")[-1]
        assert "by its driver pod's owner" in pools.notes_of("h-2")[-1]


def test_without_driver_pods_the_narrowest_selector_then_the_overlap_itself() -> None:
    narrow = assign(NODES, [driver("default", CATCH_ALL), driver("zz-h100", H100)], {})
    renamed = assign(NODES, [driver("zz-default", CATCH_ALL), driver("h100", H100)], {})
    assert (
        partition(narrow)
        == partition(renamed)
        == {
            frozenset({"h-0", "h-1", "h-2", "h-3"}),
            frozenset({"a-0", "a-1", "a-2", "a-3"}),
        }
    )
    assert "the narrowest selector (4 GPU node(s)" in narrow.notes_of("h-0")[-1]
    # Two selectors as narrow: a pool of their own, named by both, not one picked by name.
    twins = assign(NODES, [driver("x", H100), driver("y", H100)], {})
    assert (
        twins.of("h-0") is not None and twins.of("h-0").label == "NVIDIADrivers x + y (overlapping selectors)"
    )
    assert twins.members_of[twins.of("h-0")] == ("h-0", "h-1", "h-2", "h-3")
