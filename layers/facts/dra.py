"""Dynamic Resource Allocation, read: DeviceClasses, ResourceClaims and their templates, the pod's
claims, and whether a published device satisfies a request.

Pure readers over `resource.k8s.io` objects as the API serves them (v1; request fields outside
`exactly`, as v1beta1 writes them, are read too). A class or request selector is evaluated with real
CEL (layers/facts/devicecel.py) against the devices of layers/facts/draslices.py; an expression that
does not compile or evaluate is kept with its error, never raised (spec/findings.md, DRA).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from layers.facts import objects as o
from layers.facts.devicecel import CelError, Selector, compile_selector
from layers.facts.draslices import DRIVER, Device, DeviceTaint, as_int
from layers.facts.placement import tolerates
from layers.sources import K8sObject

# The NVIDIA DRA driver's DeviceClasses (its chart's deviceclass-*.yaml) that hand out GPUs.
GPU_CLASSES = frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"})
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
EXTENDED_PREFIX = "deviceclass.resource.kubernetes.io/"

# --- device classes and claims -----------------------------------------------------------------

Mode = Literal["ExactCount", "All"]


class Request(msgspec.Struct, frozen=True):
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
    count = as_int(body.get("count"))
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


class Allocated(msgspec.Struct, frozen=True):
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
    # status.allocation.nodeSelector: where an allocated claim's devices are, so where its pods can run.
    node_selector: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)
    # The NVIDIA driver's GpuConfig / MigDeviceConfig `sharing.strategy` (TimeSlicing, MPS), when set.
    sharing: str | None = None

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
    where = allocation.get("nodeSelector") if isinstance(allocation, Mapping) else None
    sharing = next(
        (
            str(strategy)
            for c in (spec.get("devices") or {}).get("config") or []
            if isinstance(c, Mapping)
            and isinstance(params := (c.get("opaque") or {}).get("parameters"), Mapping)
            and params.get("kind") in ("GpuConfig", "MigDeviceConfig")
            and isinstance(params.get("sharing"), Mapping)
            and (strategy := params["sharing"].get("strategy"))
        ),
        None,
    )
    return Claim(
        o.namespace(obj) or "",
        o.name(obj),
        requests_of(spec),
        allocated,
        reserved,
        domains,
        uid,
        where if isinstance(where, Mapping) else None,
        sharing,
    )


class PodClaim(msgspec.Struct, frozen=True):
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


class DeviceClass(msgspec.Struct, frozen=True):
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


class Matcher(msgspec.Struct):
    """Evaluates class and request selectors on devices, once per distinct device a selector can see.

    Errors are kept by expression: the first device an expression fails on is enough to say why.
    """

    classes: Mapping[str, DeviceClass]
    errors: dict[str, str] = msgspec.field(default_factory=dict)
    _memo: dict[tuple[str, object], bool] = msgspec.field(default_factory=dict)
    _compiled: dict[str, Selector] = msgspec.field(default_factory=dict)

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
    return tolerates(request.tolerations, taint.fields)


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
