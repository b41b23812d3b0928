"""Dynamic Resource Allocation, read: the GPU inventory the NVIDIA DRA driver publishes as ResourceSlices.

Pure readers over `resource.k8s.io` ResourceSlices and DeviceTaintRules as the API serves them (v1;
the v1beta1 `basic` device wrapper is read too, so a 1.32 cluster's objects parse): per pool the
highest complete generation, each device's attributes and capacity as CEL sees them, and its taints
(the slice's own and those DeviceTaintRules add). Nothing here raises on a malformed object: what
cannot be read is a `problem` line naming the object and the field, and the rest of the inventory
stands (spec/findings.md, DRA). The claims on it are layers/facts/dra.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

import msgspec

from layers.facts import objects as o
from layers.facts.devicecel import SEMVER_TAG, DeviceFacts, Value, parse_quantity, semver_text
from layers.facts.placement import BLOCKING_EFFECTS, taint_text
from layers.sources import K8sObject

DRIVER = "gpu.nvidia.com"
# The kubelet plugin's device health taints (cmd/gpu-kubelet-plugin/device_health.go).
TAINT_XID = f"{DRIVER}/xid"
TAINT_GPU_LOST = f"{DRIVER}/gpu-lost"
TAINT_UNMONITORED = f"{DRIVER}/unmonitored"


class DeviceTaint(msgspec.Struct, frozen=True):
    key: str
    value: str
    effect: str
    time_added: str
    rule: str | None = None  # the DeviceTaintRule that adds it; None when the slice carries it

    @property
    def blocking(self) -> bool:
        return self.effect in BLOCKING_EFFECTS

    @property
    def fields(self) -> dict[str, str]:
        """As a node taint is written: device taints follow the node rules (layers/facts/placement.py)."""
        return {"key": self.key, "value": self.value, "effect": self.effect}

    @property
    def text(self) -> str:
        """As kubectl writes a taint: `key=value:Effect`."""
        return taint_text(self.fields)


class Device(msgspec.Struct, frozen=True):
    slice: str
    pool: str
    node: str | None  # None: a device not local to one node (allNodes / nodeSelector)
    name: str
    facts: DeviceFacts
    taints: tuple[DeviceTaint, ...] = ()

    @property
    def ref(self) -> tuple[str, str, str]:
        """How an allocation result names it: (driver, pool, device)."""
        return (self.facts.driver, self.pool, self.name)

    def attribute(self, name: str) -> str:
        value = self.facts.attributes.get(name)
        if isinstance(value, tuple):
            return value[1]
        return "" if value is None else str(value)

    @property
    def label(self) -> str:
        """`gpu-3 (GPU-5f1c…, NVIDIA H100 80GB HBM3)`, for evidence."""
        extra = [x for x in (self.attribute("uuid"), self.attribute("productName")) if x]
        return f"{self.name} ({', '.join(extra)})" if extra else self.name

    @property
    def blocking_taints(self) -> tuple[DeviceTaint, ...]:
        return tuple(t for t in self.taints if t.blocking)


class Inventory(msgspec.Struct, frozen=True, dict=True):  # dict: for its cached_property
    """The current devices of driver gpu.nvidia.com: the highest complete generation of each pool."""

    devices: tuple[Device, ...]
    problems: tuple[str, ...] = ()
    slices: int = 0
    # Nodes whose current slices list no device: the plugin runs and publishes, but found no GPU.
    empty: frozenset[str] = frozenset()

    @cached_property
    def by_node(self) -> Mapping[str, tuple[Device, ...]]:
        out: dict[str, list[Device]] = defaultdict(list)
        for d in self.devices:
            if d.node:
                out[d.node].append(d)
        return {n: tuple(ds) for n, ds in out.items()}

    def on(self, node: str) -> tuple[Device, ...]:
        return self.by_node.get(node, ())

    @cached_property
    def nodes_with_slices(self) -> frozenset[str]:
        return frozenset(self.by_node)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def _attribute(raw: Any) -> tuple[Value | None, str | None]:
    """A DeviceAttribute (exactly one of string, int, bool, version) as a selector value, or why not."""
    if not isinstance(raw, Mapping):
        return None, f"expected one of string/int/bool/version, got {raw!r}"
    if len(raw) == 1:
        ((kind, value),) = raw.items()
        if kind == "string" and isinstance(value, str):  # most attributes: the fast path
            return value, None
    kinds = [k for k in ("string", "int", "bool", "version") if k in raw]
    if len(kinds) != 1:
        return None, f"expected exactly one of string/int/bool/version, got {sorted(raw)}"
    kind, value = kinds[0], raw[kinds[0]]
    if kind == "string" and isinstance(value, str):
        return value, None
    if kind == "int" and as_int(value) is not None:
        return as_int(value), None
    if kind == "bool" and isinstance(value, bool):
        return value, None
    if kind == "version" and isinstance(value, str):
        try:
            return (SEMVER_TAG, semver_text(value)), None
        except ValueError:
            return None, f"version {value!r} is not a semantic version"
    what = {"string": "a string", "int": "an integer", "bool": "a boolean", "version": "a string"}[kind]
    return None, f"{kind} value {value!r} is not {what}"


def _device(
    raw: dict[str, Any],
    where: str,
    problems: list[str],
    quantities: dict[str, bool],
    seen: dict[tuple[str, Any], tuple[Value | None, str | None]],
) -> tuple[str, DeviceFacts, list[Any]] | None:
    """One device's name, selector facts and raw taints. Hot (every device of the fleet): the common
    string attribute and a capacity seen before skip the general checks."""
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{where}: a device without a name is ignored")
        return None
    basic = raw.get("basic")
    body: dict[str, Any] = basic if isinstance(basic, dict) else raw  # v1beta1 wraps it
    attributes: dict[str, Value] = {}
    raw_attributes = body.get("attributes")
    for key, value in (raw_attributes if isinstance(raw_attributes, dict) else {}).items():
        if type(value) is dict and len(value) == 1:
            ((kind, one),) = value.items()
            if kind == "string" and type(one) is str:
                attributes[key] = one
                continue
            if type(one) in (str, int, bool):  # versions and numbers repeat across a fleet: parse once
                memo = seen.get((kind, one))
                if memo is None:
                    memo = seen[(kind, one)] = _attribute(value)
                parsed, why = memo
            else:
                parsed, why = _attribute(value)
        else:
            parsed, why = _attribute(value)
        if why:
            problems.append(f"{where} device {name}: attribute {key}: {why}; selectors see it as missing")
        else:
            assert parsed is not None
            attributes[str(key)] = parsed
    capacity: dict[str, str] = {}
    raw_capacity = body.get("capacity")
    for key, value in (raw_capacity if isinstance(raw_capacity, dict) else {}).items():
        text = str(value.get("value") if isinstance(value, dict) else value)
        valid = quantities.get(text)
        if valid is None:
            try:
                parse_quantity(text)
                valid = True
            except ValueError:
                valid = False
            quantities[text] = valid
        if valid:
            capacity[str(key)] = text
        else:
            problems.append(f"{where} device {name}: capacity {key}: {text!r} is not a quantity")
    facts = DeviceFacts(DRIVER, attributes, capacity, bool(body.get("allowMultipleAllocations")))
    taints = body.get("taints")
    return name, facts, taints if isinstance(taints, list) else []


def _taint(raw: Any, rule: str | None = None) -> DeviceTaint | None:
    if not isinstance(raw, Mapping) or not raw.get("key"):
        return None
    return DeviceTaint(
        key=str(raw["key"]),
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or "None"),
        time_added=str(raw.get("timeAdded") or ""),
        rule=rule,
    )


def _current_slices(slices: Iterable[K8sObject], problems: list[str]) -> list[K8sObject]:
    """Per pool, the slices of its highest complete generation (the scheduler's view of a pool)."""
    pools: dict[str, dict[int, list[K8sObject]]] = defaultdict(lambda: defaultdict(list))
    wanted: dict[tuple[str, int], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        pname, gen, count = (
            pool.get("name"),
            as_int(pool.get("generation")),
            as_int(pool.get("resourceSliceCount")),
        )
        if not isinstance(pname, str) or not pname:
            problems.append(f"ResourceSlice {o.name(s)}: spec.pool.name is missing; the slice is ignored")
            continue
        if gen is None or gen < 0:
            problems.append(
                f"ResourceSlice {o.name(s)}: spec.pool.generation {pool.get('generation')!r} is not a "
                "non-negative integer; the slice is ignored"
            )
            continue
        pools[pname][gen].append(s)
        wanted[(pname, gen)] = count if count and count > 0 else 1
    current: list[K8sObject] = []
    for pname, gens in sorted(pools.items()):
        complete = [g for g, ss in gens.items() if len(ss) >= wanted[(pname, g)]]
        newest = max(gens)
        if not complete:
            problems.append(
                f"pool {pname}: generation {newest} has {len(gens[newest])} of "
                f"{wanted[(pname, newest)]} ResourceSlices; the pool is incomplete and publishes nothing"
            )
            continue
        best = max(complete)
        if best != newest:
            problems.append(
                f"pool {pname}: generation {newest} is still being published; using generation {best}"
            )
        current += gens[best]
    return current


def _rule_matches(selector: Mapping[str, Any], device: Device) -> bool:
    for key, have in (("driver", device.facts.driver), ("pool", device.pool), ("device", device.name)):
        if selector.get(key) and selector.get(key) != have:
            return False
    return True


def build_inventory(slices: Iterable[K8sObject], taint_rules: Iterable[K8sObject] = ()) -> Inventory:
    """The inventory of driver gpu.nvidia.com from its ResourceSlices and the cluster's DeviceTaintRules."""
    problems: list[str] = []
    quantities: dict[str, bool] = {}  # capacity text -> valid: a fleet repeats a few values
    seen: dict[tuple[str, Any], tuple[Value | None, str | None]] = {}  # typed attribute -> parsed
    ours = [s for s in slices if (s.get("spec") or {}).get("driver") == DRIVER]
    devices: list[Device] = []
    publishing: set[str] = set()
    for s in _current_slices(ours, problems):
        spec = s.get("spec") or {}
        if spec.get("nodeName"):
            publishing.add(str(spec["nodeName"]))
        pool = str((spec.get("pool") or {}).get("name"))
        where = f"ResourceSlice {o.name(s)}"
        raw_devices = spec.get("devices")
        if raw_devices is not None and not isinstance(raw_devices, list):
            problems.append(f"{where}: spec.devices is not a list ({type(raw_devices).__name__}); ignored")
        for raw in raw_devices if isinstance(raw_devices, list) else []:
            if not isinstance(raw, dict):
                problems.append(f"{where}: a device entry is not a mapping; ignored")
                continue
            parsed = _device(raw, where, problems, quantities, seen)
            if parsed is None:
                continue
            name, facts, taints = parsed
            node = raw.get("nodeName") or spec.get("nodeName")
            own = tuple(t for t in (_taint(x) for x in taints) if t)
            devices.append(Device(o.name(s), pool, str(node) if node else None, name, facts, own))
    rules = [r for r in taint_rules if isinstance((r.get("spec") or {}).get("taint"), Mapping)]
    if rules:
        tainted: list[Device] = []
        for d in devices:
            extra = [
                t
                for r in rules
                if _rule_matches((r.get("spec") or {}).get("deviceSelector") or {}, d)
                and (t := _taint(r["spec"]["taint"], o.name(r)))
            ]
            tainted.append(
                Device(d.slice, d.pool, d.node, d.name, d.facts, d.taints + tuple(extra)) if extra else d
            )
        devices = tainted
    empty = frozenset(publishing - {d.node for d in devices})
    return Inventory(tuple(devices), tuple(problems), len(ours), empty)
