"""gpu_resources parses a node's capacity/allocatable once (a pending walk asks a dozen times per
node), and never answers from a map changed since."""

from __future__ import annotations

from layers.facts import objects as o
from tests.layers.builders import gpu_node


def test_a_map_changed_in_place_is_parsed_again() -> None:
    n = gpu_node("gpu-1", 8, allocatable=7)
    assert o.gpu_resources(n, "allocatable") == {"nvidia.com/gpu": 7}
    n["status"]["allocatable"]["nvidia.com/gpu"] = "6"  # a node re-read into the same dict
    assert o.gpu_resources(n, "allocatable") == {"nvidia.com/gpu": 6}
    n["status"]["allocatable"] = {"nvidia.com/gpu": "8"}
    assert o.allocatable_gaps(n) == {}


def test_callers_get_their_own_copy() -> None:
    n = gpu_node("gpu-2", 8)
    got = o.gpu_resources(n, "capacity")
    got["nvidia.com/gpu"] = 0
    assert o.gpu_resources(n, "capacity") == {"nvidia.com/gpu": 8}
    assert o.advertised(n) == {"nvidia.com/gpu": 8}


def test_the_memo_stays_bounded() -> None:
    for i in range(o._PARSED_MAX + 5):
        o.gpu_resources({"status": {"capacity": {"nvidia.com/gpu": str(i % 9)}}}, "capacity")
    assert len(o._PARSED) <= o._PARSED_MAX
