"""The DRA inventory (layers/facts/draslices.py): what a cluster's ResourceSlices publish, read around bad input."""

from __future__ import annotations

from layers.facts.devicecel import SEMVER_TAG
from layers.facts.draslices import build_inventory


def test_bad_slices_are_problems_and_the_rest_stands() -> None:
    def slice_(
        name: str, node: str, devices: object, generation: object = 1, count: object = 1
    ) -> dict[str, object]:
        pool = {"name": node, "generation": generation, "resourceSliceCount": count}
        spec = {"driver": "gpu.nvidia.com", "nodeName": node, "pool": pool, "devices": devices}
        return {"kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}

    good = {
        "name": "gpu-0",
        "attributes": {
            "type": {"string": "gpu"},
            "index": {"int": 0},
            "driverVersion": {"version": "580.65.6"},
        },
        "capacity": {"memory": {"value": "81559Mi"}},
    }
    bad = {
        "name": "gpu-1",
        "attributes": {
            "type": {"string": "gpu", "int": 1},  # two kinds at once
            "driverVersion": {"version": "580.65.06"},  # not SemVer 2.0
            "index": {"int": "one"},
        },
        "capacity": {"memory": {"value": "eighty"}},
    }
    inv = build_inventory(
        [
            slice_("a", "n1", [good, bad, "junk", {"attributes": {}}]),
            slice_("b", "n2", 5),
            slice_("c", "n3", [good], generation="two"),
            slice_("d", "n4", [good], count=2),
            slice_("e", "n5", [good], generation=-1),
        ]
    )
    assert [(d.node, d.name) for d in inv.devices] == [("n1", "gpu-0"), ("n1", "gpu-1")]
    [gpu0, gpu1] = inv.devices
    assert gpu0.facts.attributes == {"type": "gpu", "index": 0, "driverVersion": (SEMVER_TAG, "580.65.6")}
    assert gpu1.facts.attributes == {} and gpu1.facts.capacity == {}  # what could not be read is missing
    text = "\n".join(inv.problems)
    for expected in (
        "device gpu-1: attribute type: expected exactly one of string/int/bool/version",
        "device gpu-1: attribute driverVersion: version '580.65.06' is not a semantic version",
        "device gpu-1: attribute index: int value 'one' is not an integer",
        "device gpu-1: capacity memory: 'eighty' is not a quantity",
        "ResourceSlice a: a device entry is not a mapping; ignored",
        "ResourceSlice a: a device without a name is ignored",
        "ResourceSlice b: spec.devices is not a list (int); ignored",
        "ResourceSlice c: spec.pool.generation 'two' is not a non-negative integer; the slice is ignored",
        "pool n4: generation 1 has 1 of 2 ResourceSlices; the pool is incomplete and publishes nothing",
        "ResourceSlice e: spec.pool.generation -1 is not a non-negative integer",
    ):
        assert expected in text, expected
