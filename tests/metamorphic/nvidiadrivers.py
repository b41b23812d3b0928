"""Renaming or reordering NVIDIADriver resources never changes a diagnosis (issue 26, "a driver
pool's verdict depends on a name"): the driver pod's owner decides a node's pool, and where
NVIDIADriver selectors overlap that is evidence, not a tie-break by name or list order.

A rename is made as the API would show it: the resource's name and every ownerReference that
names it (its DaemonSets') change together."""

from __future__ import annotations

import copy
from typing import Any

from tests.metamorphic.mutations_base import Scenario, _kind, _meta, _objects

KIND = "NVIDIADriver"


def has_nvidiadrivers(s: Scenario) -> bool:
    return bool(_kind(s, KIND))


def _renamed(s: Scenario, names: dict[str, str]) -> Scenario:
    out = copy.deepcopy(s)
    for driver in _kind(out, KIND):
        meta = _meta(driver)
        meta["name"] = names.get(str(meta.get("name")), meta.get("name"))
    for obj in _objects(out) + [i for o in _kind(out, "List") for i in o.get("items") or []]:
        for ref in _meta(obj).get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("kind") == KIND and ref.get("name") in names:
                ref["name"] = names[ref["name"]]
    return out


def nvidiadriver_default_renamed(s: Scenario) -> Scenario:
    """`default` becomes `zz-default` (no `default`: the first by name gets the `zz-` prefix), so the
    catch-all sorts last instead of first."""
    names = sorted(str(_meta(d).get("name")) for d in _kind(s, KIND))
    if not names:
        return copy.deepcopy(s)
    first = "default" if "default" in names else names[0]
    return _renamed(s, {first: f"zz-{first}"})


def nvidiadriver_names_reversed(s: Scenario) -> Scenario:
    """Every NVIDIADriver renamed so that their order by name is reversed."""
    names = sorted(str(_meta(d).get("name")) for d in _kind(s, KIND))
    return _renamed(s, {n: f"{chr(ord('z') - i)}-{n}" for i, n in enumerate(names)})


def nvidiadriver_order_reversed(s: Scenario) -> Scenario:
    """The NVIDIADriver resources listed in the reverse order, everything else where it was."""
    out = copy.deepcopy(s)
    objects: list[Any] = out.get("objects") or []
    at = [i for i, o in enumerate(objects) if isinstance(o, dict) and o.get("kind") == KIND]
    for i, obj in zip(at, [objects[i] for i in reversed(at)], strict=True):
        objects[i] = obj
    return out


MUTATIONS = {
    "nvidiadriver_default_renamed": nvidiadriver_default_renamed,
    "nvidiadriver_names_reversed": nvidiadriver_names_reversed,
    "nvidiadriver_order_reversed": nvidiadriver_order_reversed,
}
