"""Dynamic Resource Allocation, read: the GPU inventory ResourceSlices publish, and the claims on it.

Pure readers over `resource.k8s.io` objects as the API serves them (v1; the
v1beta1 `basic` device wrapper and request fields outside `exactly` are read
too, so a 1.32 cluster's objects parse). Nothing here raises on a malformed
object: what cannot be read is a `problem` line naming the object and the
field, and the rest of the inventory stands (spec/findings.md, DRA).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from layers.facts import objects as o
from layers.facts.devicecel import (
    SEMVER_TAG,
    CelError,
    DeviceFacts,
    Selector,
    Value,
    compile_selector,
    parse_quantity,
    semver_text,
)
from layers.facts.placement import tolerates
from layers.sources import K8sObject

DRIVER = "gpu.nvidia.com"
# The NVIDIA DRA driver's DeviceClasses (its chart's deviceclass-*.yaml) that hand out GPUs.
GPU_CLASSES = frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"})
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"
# The kubelet plugin's device health taints (cmd/gpu-kubelet-plugin/device_health.go).
TAINT_XID = f"{DRIVER}/xid"
TAINT_GPU_LOST = f"{DRIVER}/gpu-lost"
TAINT_UNMONITORED = f"{DRIVER}/unmonitored"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


# --- the inventory ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str
    effect: str
    time_added: str
    rule: str | None = None  # the DeviceTaintRule that adds it; None when the slice carries it

    @property
    def blocking(self) -> bool:
        return self.effect in BLOCKING_EFFECTS

    @property
    def text(self) -> str:
        """As kubectl writes a taint: `key=value:Effect`."""
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass(frozen=True)
class Device:
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


@dataclass(frozen=True)
class Inventory:
    """The current devices of driver gpu.nvidia.com: the highest complete generation of each pool."""

    devices: tuple[Device, ...]
    problems: tuple[str, ...] = ()
    slices: int = 0

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


def _int(value: Any) -> int | None:
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
    if kind == "int" and _int(value) is not None:
        return _int(value), None
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
            _int(pool.get("generation")),
            _int(pool.get("resourceSliceCount")),
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
    for s in _current_slices(ours, problems):
        spec = s.get("spec") or {}
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
    return Inventory(tuple(devices), tuple(problems), len(ours))


# --- device classes and claims -----------------------------------------------------------------

Mode = Literal["ExactCount", "All"]


@dataclass(frozen=True)
class Request:
    """One device request of a claim (a `firstAvailable` alternative is a Request too)."""

    name: str
    device_class: str
    mode: Mode = "ExactCount"
    count: int = 1
    selectors: tuple[str, ...] = ()
    admin_access: bool = False
    tolerations: tuple[Mapping[str, Any], ...] = ()
    alternatives: tuple[Request, ...] = ()

    @property
    def text(self) -> str:
        how = "all devices" if self.mode == "All" else f"count {self.count}"
        return f"request {self.name}: deviceClassName {self.device_class}, {how}"

    def options(self) -> tuple[Request, ...]:
        """What may satisfy it: itself, or the first of its alternatives that fits."""
        return self.alternatives or (self,)


def _selectors(raw: Any) -> tuple[str, ...]:
    out = []
    for s in raw if isinstance(raw, list) else []:
        expr = ((s or {}).get("cel") or {}).get("expression") if isinstance(s, Mapping) else None
        if expr is not None:
            out.append(str(expr))
    return tuple(out)


def _request(raw: Mapping[str, Any], name: str) -> Request:
    exactly = raw.get("exactly")
    body: Mapping[str, Any] = exactly if isinstance(exactly, Mapping) else raw
    mode: Mode = "All" if body.get("allocationMode") == "All" else "ExactCount"
    count = _int(body.get("count"))
    tolerations = tuple(t for t in body.get("tolerations") or [] if isinstance(t, Mapping))
    return Request(
        name=name,
        device_class=str(body.get("deviceClassName") or ""),
        mode=mode,
        count=count if count and count > 0 else 1,
        selectors=_selectors(body.get("selectors")),
        admin_access=bool(body.get("adminAccess")),
        tolerations=tolerations,
    )


def requests_of(spec: Mapping[str, Any]) -> tuple[Request, ...]:
    """The requests of a claim's spec (or a template's spec.spec)."""
    out = []
    for raw in (spec.get("devices") or {}).get("requests") or []:
        if not isinstance(raw, Mapping):
            continue
        name = str(raw.get("name") or "")
        alternatives = tuple(
            _request(sub, f"{name}/{sub.get('name')}")
            for sub in raw.get("firstAvailable") or []
            if isinstance(sub, Mapping)
        )
        base = _request(raw, name)
        if alternatives:
            base = Request(name, alternatives[0].device_class, alternatives=alternatives)
        out.append(base)
    return tuple(out)


@dataclass(frozen=True)
class Allocated:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def ref(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Claim:
    namespace: str
    name: str
    requests: tuple[Request, ...]
    allocated: tuple[Allocated, ...] | None  # None: not allocated
    reserved_for: tuple[str, ...] = ()
    domain_ids: tuple[str, ...] = ()  # ComputeDomain channel configs (opaque domainID)
    uid: str = ""  # the CDI names of its devices start with it (k8s.gpu.nvidia.com/claim=<uid>-gpu-0)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def read_claim(obj: K8sObject) -> Claim:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    allocation = status.get("allocation")
    allocated: tuple[Allocated, ...] | None = None
    if isinstance(allocation, Mapping):
        results = (allocation.get("devices") or {}).get("results") or []
        allocated = tuple(
            Allocated(
                str(r.get("request") or ""),
                str(r.get("driver") or ""),
                str(r.get("pool") or ""),
                str(r.get("device") or ""),
                bool(r.get("adminAccess")),
            )
            for r in results
            if isinstance(r, Mapping)
        )
    reserved = tuple(
        str(r.get("name"))
        for r in status.get("reservedFor") or []
        if isinstance(r, Mapping) and r.get("name")
    )
    domains = tuple(
        str(params["domainID"])
        for c in (spec.get("devices") or {}).get("config") or []
        if isinstance(c, Mapping)
        and isinstance(params := (c.get("opaque") or {}).get("parameters"), Mapping)
        and params.get("domainID")
    )
    uid = str((obj.get("metadata") or {}).get("uid") or "")
    return Claim(o.namespace(obj) or "", o.name(obj), requests_of(spec), allocated, reserved, domains, uid)


@dataclass(frozen=True)
class PodClaim:
    """One entry of a pod's spec.resourceClaims and the ResourceClaim it resolves to."""

    name: str
    claim_name: str | None  # None: generated from a template and not created yet
    template: str | None = None


def pod_claims(pod: K8sObject) -> list[PodClaim]:
    statuses = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
        if isinstance(s, Mapping)
    }
    out = []
    for rc in (pod.get("spec") or {}).get("resourceClaims") or []:
        if not isinstance(rc, Mapping) or not rc.get("name"):
            continue
        name = str(rc["name"])
        if rc.get("resourceClaimName"):
            out.append(PodClaim(name, str(rc["resourceClaimName"])))
        elif rc.get("resourceClaimTemplateName"):
            generated = statuses.get(name)
            out.append(
                PodClaim(name, str(generated) if generated else None, str(rc["resourceClaimTemplateName"]))
            )
    return out


def extended_dra_requests(pod: K8sObject) -> dict[str, int]:
    """DeviceClass -> count for `deviceclass.resource.kubernetes.io/<class>` extended resources."""
    out: dict[str, int] = {}
    for c in [*o.containers(pod), *o.containers(pod, init=True)]:
        res = c.get("resources") or {}
        for k, v in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            if str(k).startswith(EXTENDED_PREFIX):
                cls = str(k)[len(EXTENDED_PREFIX) :]
                out[cls] = max(out.get(cls, 0), int(o.quantity(v)))
    return out


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    extended_resource: str | None = None

    @property
    def names_gpu_driver(self) -> bool:
        """A GPU class: one of the driver's own, or any class whose selectors name driver gpu.nvidia.com."""
        return self.name in GPU_CLASSES or any(
            f"'{DRIVER}'" in s or f'"{DRIVER}"' in s for s in self.selectors
        )


def read_classes(objs: Iterable[K8sObject]) -> dict[str, DeviceClass]:
    out = {}
    for obj in objs:
        spec = obj.get("spec") or {}
        ext = spec.get("extendedResourceName")
        out[o.name(obj)] = DeviceClass(
            o.name(obj), _selectors(spec.get("selectors")), str(ext) if ext else None
        )
    return out


def is_gpu_class(name: str, classes: Mapping[str, DeviceClass]) -> bool:
    cls = classes.get(name)
    return name in GPU_CLASSES or (cls is not None and cls.names_gpu_driver)


# --- matching ----------------------------------------------------------------------------------


@dataclass
class Matcher:
    """Evaluates class and request selectors on devices, once per distinct device a selector can see.

    Errors are kept by expression: the first device an expression fails on is enough to say why.
    """

    classes: Mapping[str, DeviceClass]
    errors: dict[str, str] = field(default_factory=dict)
    _memo: dict[tuple[str, object], bool] = field(default_factory=dict)
    _compiled: dict[str, Selector] = field(default_factory=dict)

    def selector(self, expression: str, device: Device) -> bool:
        sel = self._compiled.get(expression)
        if sel is None:
            if expression in self.errors:
                return False
            try:
                sel = self._compiled[expression] = compile_selector(expression)
            except CelError as err:
                self.errors[expression] = str(err)
                return False
        elif expression in self.errors:
            return False
        key = sel.key(device.facts)
        if key is not None and (expression, key) in self._memo:
            return self._memo[(expression, key)]
        try:
            result = sel.matches(device.facts)
        except CelError as err:
            self.errors.setdefault(
                expression, f"{err} (device {device.name} in ResourceSlice {device.slice})"
            )
            return False
        if key is not None:
            self._memo[(expression, key)] = result
        return result

    def in_class(self, class_name: str, device: Device) -> bool:
        cls = self.classes.get(class_name)
        if cls is None:
            return False
        return all(self.selector(e, device) for e in cls.selectors)

    def fits(self, request: Request, device: Device) -> bool:
        """Class and request selectors, ignoring allocation and taints."""
        return self.in_class(request.device_class, device) and all(
            self.selector(e, device) for e in request.selectors
        )


def tolerated(request: Request, taint: DeviceTaint) -> bool:
    """A request's tolerations against a device taint (the node rule: key, operator, value, effect)."""
    return tolerates(request.tolerations, {"key": taint.key, "value": taint.value, "effect": taint.effect})


def claims_holding(claims: Iterable[K8sObject]) -> dict[tuple[str, str, str], str]:
    """Device ref -> the claim that holds it, from ResourceClaim objects; adminAccess results hold
    nothing (the scheduler does not count them either). Only the allocation is read: every claim
    of the cluster passes here."""
    held: dict[tuple[str, str, str], str] = {}
    for c in claims:
        allocation = (c.get("status") or {}).get("allocation")
        if not isinstance(allocation, Mapping):
            continue
        key = f"{o.namespace(c) or ''}/{o.name(c)}"
        for r in (allocation.get("devices") or {}).get("results") or ():
            if isinstance(r, Mapping) and not r.get("adminAccess"):
                held.setdefault(
                    (str(r.get("driver") or ""), str(r.get("pool") or ""), str(r.get("device") or "")), key
                )
    return held
