"""Small pure readers over Kubernetes objects in their JSON (dict) form."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal, InvalidOperation
from typing import Any

from layers.sources import K8sObject

GPU_RESOURCE = "nvidia.com/gpu"
SHARED_RESOURCE = "nvidia.com/gpu.shared"
MIG_PREFIX = "nvidia.com/mig-"

# NFD's PCI vendor labels for NVIDIA (vendor 10de); the operator keys
# nvidia.com/gpu.present off the same three.
NFD_NVIDIA_LABELS = (
    "feature.node.kubernetes.io/pci-10de.present",
    "feature.node.kubernetes.io/pci-0302_10de.present",
    "feature.node.kubernetes.io/pci-0300_10de.present",
)


def name(obj: K8sObject) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


def namespace(obj: K8sObject) -> str | None:
    ns = obj.get("metadata", {}).get("namespace")
    return str(ns) if ns else None


def labels(obj: K8sObject) -> dict[str, str]:
    return obj.get("metadata", {}).get("labels") or {}


def annotations_of(obj: K8sObject) -> dict[str, str]:
    return obj.get("metadata", {}).get("annotations") or {}


def is_gpu_resource(resource: str) -> bool:
    return resource in (GPU_RESOURCE, SHARED_RESOURCE) or resource.startswith(MIG_PREFIX)


_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity ("8", "500m", "16Gi") as a number; 0 when unreadable."""
    m = _QTY.match(str(value).strip())
    if not m:
        return Decimal(0)
    try:
        number = Decimal(m.group(1))
    except InvalidOperation:
        return Decimal(0)
    suffix = m.group(2)
    if suffix and suffix not in _SUFFIX:
        return Decimal(0)
    return number * Decimal(_SUFFIX[suffix]) if suffix else number


# Parsed GPU resources of the capacity/allocatable maps one walk (or digest) reads, by the map's
# id, for as long as it runs (`parsed_once`): a pending pod's walk asks about each of 65,000 nodes'
# maps a dozen times (GPU node, candidates, gaps, placement, DRA), and parsing once per walk is most
# of layer 1's time saved. The memo is the walk's own (a context variable, so threads and nested
# walks keep theirs) and holds each map (its id is not reused while the memo lives); it is dropped
# with the walk, so a long-running bot pins no fleet's maps. Within a walk the nodes are read-only
# data (the layers are pure), so a hit is the same map, not a copy compared.
GpuMemo = dict[int, tuple[Any, dict[str, int], dict[str, int]]]
_MEMO: ContextVar[GpuMemo | None] = ContextVar("gpu_resources_memo", default=None)


@contextmanager
def parsed_once(memo: GpuMemo) -> Iterator[None]:
    """Within the block, each capacity/allocatable map is parsed once into `memo` (layers/walk.py)."""
    token = _MEMO.set(memo)
    try:
        yield
    finally:
        _MEMO.reset(token)


def _units(value: Any) -> int:
    """A GPU resource's quantity as an integer: the plain digits every device plugin writes read
    directly, anything else ("1k", "500m") as a Kubernetes quantity."""
    if type(value) is str and value.isascii() and value.isdigit():
        return int(value)
    return int(quantity(value))


def _parsed(node: K8sObject, field: str) -> tuple[dict[str, int], dict[str, int]]:
    """(every GPU resource of the map, those above 0): shared, never to be changed by a caller."""
    raw = (node.get("status") or {}).get(field) or {}
    if not raw:
        return _NONE, _NONE
    memo = _MEMO.get()
    if memo is not None:
        hit = memo.get(id(raw))
        if hit is not None and hit[0] is raw:
            return hit[1], hit[2]
    parsed = {k: _units(v) for k, v in raw.items() if k.startswith("nvidia.com/") and is_gpu_resource(k)}
    # Usually every resource is above 0: one dict serves both (30 MB less memo at 65,000 nodes).
    positive = parsed if all(v > 0 for v in parsed.values()) else {k: v for k, v in parsed.items() if v > 0}
    if memo is not None:
        memo[id(raw)] = (raw, parsed, positive)
    return parsed, positive


_NONE: dict[str, int] = {}


def gpu_resources(node: K8sObject, field: str) -> dict[str, int]:
    """GPU resources of a node's status.capacity or status.allocatable, as integers."""
    return dict(_parsed(node, field)[0])


def advertised(node: K8sObject) -> dict[str, int]:
    """GPU resources the node advertises: in capacity with a quantity above 0."""
    return dict(_parsed(node, "capacity")[1])


def advertises(node: K8sObject) -> bool:
    """The node advertises some GPU resource (`advertised` is not empty), without a copy."""
    return bool(_parsed(node, "capacity")[1])


def allocatable_gaps(node: K8sObject) -> dict[str, tuple[int, int]]:
    """resource -> (capacity, allocatable) where capacity > allocatable."""
    cap = _parsed(node, "capacity")[0]
    if not cap:
        return {}
    alloc = _parsed(node, "allocatable")[0]
    if alloc == cap:
        return {}  # a healthy node (most of a fleet): one comparison, no pass over its resources
    return {r: (c, alloc.get(r, 0)) for r, c in cap.items() if c > alloc.get(r, 0)}


def replicas_per_gpu(node: K8sObject, resource: str = GPU_RESOURCE) -> int:
    """How many units of `resource` one physical GPU (or MIG instance) counts for on this node.

    Time-slicing and MPS advertise each GPU `replicas` times, so capacity and allocatable count
    replicas (spec: layer 5, time-sliced nodes). GFD says so in `nvidia.com/gpu.replicas`
    (`nvidia.com/mig-<profile>.replicas` for a MIG resource); where only the sharing labels say it
    (`nvidia.com/gpu.sharing-strategy`, a `-SHARED` product) it is capacity over the GPU count.
    1 when the GPUs are not shared. The one place every layer and the digest ask.
    """
    lab = labels(node)
    prefix = resource if resource.startswith(MIG_PREFIX) else "nvidia.com/gpu"
    replicas = int(quantity(lab.get(f"{prefix}.replicas", "")))
    if replicas > 1:
        return replicas
    strategy = str(lab.get("nvidia.com/gpu.sharing-strategy", "")).strip().lower()
    shared = strategy in ("time-slicing", "mps") or str(
        lab.get("nvidia.com/gpu.product", "")
    ).upper().endswith("-SHARED")
    count = int(quantity(lab.get(f"{prefix}.count", "")))
    cap = gpu_resources(node, "capacity").get(resource, 0)
    if shared and count > 0 and cap > count and cap % count == 0:
        return cap // count
    return 1


def gpus_of(node: K8sObject, resource: str, units: int) -> int:
    """Replicas as GPUs: a GPU marked unhealthy takes all its replicas, so a part counts as one."""
    replicas = replicas_per_gpu(node, resource)
    return -(-units // replicas) if units > 0 else 0


def counts_mig_devices(node: K8sObject, resource: str) -> bool:
    """The resource's units are MIG devices, not GPUs: a mixed-strategy `nvidia.com/mig-<P>`, or
    `nvidia.com/gpu` under the single strategy on a node whose GPUs are split (GFD's product
    `…-MIG-<profile>`)."""
    if resource.startswith(MIG_PREFIX):
        return True
    lab = labels(node)
    return (
        resource == GPU_RESOURCE
        and str(lab.get("nvidia.com/mig.strategy", "")).strip().lower() == "single"
        and "-MIG-" in str(lab.get("nvidia.com/gpu.product", ""))
    )


def sliced_note(node: K8sObject, resource: str, cap: int, alloc: int) -> str | None:
    """The evidence line that turns a time-sliced node's replica counts into GPUs; None when not shared."""
    replicas = replicas_per_gpu(node, resource)
    if replicas <= 1:
        return None
    return (
        f"time-sliced: {replicas} replicas per GPU, so {cap - alloc} replica(s) = "
        f"{gpus_of(node, resource, cap - alloc)} GPU(s) of {gpus_of(node, resource, cap)}"
    )


def node_replicas(node: K8sObject) -> int:
    """Replicas per GPU across the node's advertised resources (1 when nothing is shared)."""
    return max((replicas_per_gpu(node, r) for r in advertised(node)), default=1)


# Time-slicing and MPS advertise each GPU `replicas` times with device IDs `<uuid>::<replica>`
# (k8s-device-plugin's AnnotatedID); the plugin's log names those IDs.
_REPLICA_SUFFIX = re.compile(r"::\d+$")


def physical_device(device_id: str) -> str:
    """The GPU (or MIG instance) behind a device plugin device ID: `GPU-…::2` is `GPU-…`."""
    return _REPLICA_SUFFIX.sub("", device_id)


def has_nvidia_labels(node: K8sObject) -> bool:
    return any(k.startswith("nvidia.com/") for k in labels(node))


def is_gpu_node(node: K8sObject) -> bool:
    """Advertises a GPU resource, or is labelled as a GPU node (spec: Terms)."""
    if advertises(node):
        return True
    lab = labels(node)
    if lab.get("nvidia.com/gpu.present") == "true" or "nvidia.com/gpu.count" in lab:
        return True
    return any(lab.get(k) == "true" for k in NFD_NVIDIA_LABELS)


def is_unschedulable(node: K8sObject) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


def node_info(node: K8sObject) -> dict[str, str]:
    return (node.get("status") or {}).get("nodeInfo") or {}


def node_ready(node: K8sObject) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


# --- pods ----------------------------------------------------------------------


def pod_node(pod: K8sObject) -> str | None:
    return (pod.get("spec") or {}).get("nodeName") or None


def scheduling_gates(pod: K8sObject) -> list[str]:
    """The names in spec.schedulingGates: while any is there the scheduler does not try the pod."""
    return [str(g.get("name") or "?") for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def pod_phase(pod: K8sObject) -> str:
    return str((pod.get("status") or {}).get("phase") or "Unknown")


def containers(pod: K8sObject, init: bool = False) -> list[dict[str, Any]]:
    key = "initContainers" if init else "containers"
    return list((pod.get("spec") or {}).get(key) or [])


def container_statuses(pod: K8sObject, init: bool = False) -> list[dict[str, Any]]:
    key = "initContainerStatuses" if init else "containerStatuses"
    return list((pod.get("status") or {}).get(key) or [])


def pod_ready(pod: K8sObject) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_requests(pod: K8sObject) -> dict[str, int]:
    """GPU resources a pod asks for, as the scheduler counts them (KEP-753): the containers' sum plus
    every sidecar (an init container with `restartPolicy: Always`, which keeps running), or the
    largest init container with the sidecars started before it, whichever is more; plus
    `spec.overhead`. Limits count where requests are absent, as for extended resources."""
    total = _gpu_sum(containers(pod))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in containers(pod, init=True):
        own = _gpu_sum([c])
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
            running = sidecars
        else:
            running = _add(sidecars, own)
        init_peak = _merge(init_peak, running, max)
    need = _merge(_add(total, sidecars), init_peak, max)
    overhead = {k: int(quantity(v)) for k, v in ((pod.get("spec") or {}).get("overhead") or {}).items()}
    return _add(need, {k: v for k, v in overhead.items() if is_gpu_resource(k)})


def _gpu_sum(items: list[dict[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in items:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for k, v in merged.items():
            if is_gpu_resource(k):
                total[k] = total.get(k, 0) + int(quantity(v))
    return total


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return _merge(a, b, lambda x, y: x + y)


def _merge(a: dict[str, int], b: dict[str, int], how: Callable[[int, int], int]) -> dict[str, int]:
    """Per resource, in the order the pod names them (evidence lines stay stable)."""
    return {k: how(a.get(k, 0), b.get(k, 0)) for k in dict.fromkeys([*a, *b])}


def waiting_reason(status: dict[str, Any]) -> str | None:
    waiting = (status.get("state") or {}).get("waiting")
    return str(waiting.get("reason")) if waiting and waiting.get("reason") else None


def iter_all_statuses(pod: K8sObject) -> Iterator[tuple[bool, dict[str, Any]]]:
    """(is_init, status) for every init and app container status."""
    for s in container_statuses(pod, init=True):
        yield True, s
    for s in container_statuses(pod):
        yield False, s


def is_terminating_or_done(pod: K8sObject) -> bool:
    return bool(pod.get("metadata", {}).get("deletionTimestamp")) or pod_phase(pod) in (
        "Succeeded",
        "Failed",
    )
