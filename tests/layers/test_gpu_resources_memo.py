"""gpu_resources parses a node's capacity/allocatable once per walk (a pending walk asks a dozen
times per node, on fleets of 65,000), never answers from a map changed since, and keeps nothing
once the walk is over."""

from __future__ import annotations

import pytest

from layers.facts import objects as o
from tests.layers.builders import gpu_node


def test_a_map_changed_in_place_is_parsed_again() -> None:
    n = gpu_node("gpu-1", 8, allocatable=7)
    with o.parsed_once({}):
        assert o.gpu_resources(n, "allocatable") == {"nvidia.com/gpu": 7}
    n["status"]["allocatable"]["nvidia.com/gpu"] = "6"  # a node re-read into the same dict
    assert o.gpu_resources(n, "allocatable") == {"nvidia.com/gpu": 6}
    with o.parsed_once({}):
        assert o.gpu_resources(n, "allocatable") == {"nvidia.com/gpu": 6}
    n["status"]["allocatable"] = {"nvidia.com/gpu": "8"}
    assert o.allocatable_gaps(n) == {}


def test_callers_get_their_own_copy() -> None:
    n = gpu_node("gpu-2", 8)
    with o.parsed_once({}):
        got = o.gpu_resources(n, "capacity")
        got["nvidia.com/gpu"] = 0
        assert o.gpu_resources(n, "capacity") == {"nvidia.com/gpu": 8}
        adv = o.advertised(n)
        adv.clear()
        assert o.advertised(n) == {"nvidia.com/gpu": 8}


def test_every_map_of_a_large_fleet_is_parsed_once_per_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    # 30,000 nodes: more maps than the bounded memo before held (20,000), which cleared itself and
    # parsed a 65,000-node fleet's maps again on every question of a pending walk.
    nodes = [{"status": {"capacity": {"cpu": "96", "nvidia.com/gpu": str(i % 9)}}} for i in range(30_000)]
    parses = 0
    real = o.is_gpu_resource

    def counted(resource: str) -> bool:
        nonlocal parses
        parses += 1
        return real(resource)

    monkeypatch.setattr(o, "is_gpu_resource", counted)
    memo: o.GpuMemo = {}
    with o.parsed_once(memo):
        for _ in range(3):
            assert [o.advertised(n).get("nvidia.com/gpu", 0) for n in nodes] == [i % 9 for i in range(30_000)]
    assert parses == len(nodes)
    assert len(memo) == len(nodes)


def test_nothing_is_kept_after_the_walk() -> None:
    n = gpu_node("gpu-3", 8, allocatable=6)
    memo: o.GpuMemo = {}
    with o.parsed_once(memo):
        assert o.allocatable_gaps(n) == {"nvidia.com/gpu": (8, 6)}
    assert len(memo) == 2
    memo.clear()
    assert o.allocatable_gaps(n) == {"nvidia.com/gpu": (8, 6)}  # outside a walk: parsed, not kept
    assert memo == {}


def test_quantities_beyond_plain_digits() -> None:
    n = {
        "status": {
            "capacity": {"nvidia.com/gpu": "2k", "nvidia.com/mig-1g.10gb": 7, "nvidia.com/gpu.shared": "٣"}
        }
    }
    # "٣" is a digit to str.isdigit but no Kubernetes quantity: 0, as before.
    assert o.gpu_resources(n, "capacity") == {
        "nvidia.com/gpu": 2000,
        "nvidia.com/mig-1g.10gb": 7,
        "nvidia.com/gpu.shared": 0,
    }
