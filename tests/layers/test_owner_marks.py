"""Every mark of OWNERS puts a node in its owner's flow, whatever else the node carries: the one-pass
look for marks (owners._may_be_held, which spares a 65,000-node walk matching mark by mark) must
never hide one, including marks added to the table later."""

from __future__ import annotations

from typing import Any

import pytest

from layers.facts import owners as ow
from tests.layers.builders import gpu_node


def _value(mark: ow.Mark) -> str:
    if mark.value_prefix:
        return mark.value_prefix + "Reboot"
    return mark.values[0] if mark.values else "in-flow"


def _marked(mark: ow.Mark) -> dict[str, Any]:
    node = gpu_node("gpu-1", 8)
    key = mark.key[:-1] + "driver" if mark.key.endswith("*") else mark.key
    meta = node["metadata"]
    if mark.where == "label":
        meta.setdefault("labels", {})[key] = _value(mark)
    elif mark.where == "annotation":
        meta.setdefault("annotations", {})[key] = _value(mark)
    elif mark.where == "taint":
        value = _value(mark) if mark.values else "1"
        node["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": "NoSchedule"})
    else:
        node["status"].setdefault("conditions", []).append({"type": key, "status": mark.status})
    return node


MARKS = [(spec, mark) for spec in ow.OWNERS for mark in spec.marks]


@pytest.mark.parametrize(("spec", "mark"), MARKS, ids=[f"{s.name}:{m.where}:{m.key}" for s, m in MARKS])
def test_each_mark_puts_the_node_in_its_owners_flow(spec: ow.OwnerSpec, mark: ow.Mark) -> None:
    held = ow.owners_of(_marked(mark))
    assert [h.owner for h in held] == [spec.name]


def test_a_node_without_marks_is_held_by_no_one() -> None:
    node = gpu_node("gpu-2", 8)
    node["metadata"].setdefault("labels", {})["nvidia.com/gpu.deploy.driver"] = "true"  # a prefix, no flow
    node["status"].setdefault("conditions", []).append({"type": "XidCriticalError", "status": "False"})
    assert ow.owners_of(node) == []
    assert ow.owners_of(gpu_node("gpu-3", 8)) == []
