"""Driver pools (spec/findings.md, layer 3: driver pools): the nodes a version is compared with.

Real fleets run several driver branches on purpose, one NVIDIADriver resource per pool (H100 on
570, A100 on 550, an OS per pool). A node's *driver pool* is the set of nodes its NVIDIADriver
selects: the one that owns the node's driver pod (pod -> DaemonSet -> NVIDIADriver), else the one
whose `spec.nodeSelector` matches the node. Where several selectors match a node (a catch-all
`default` beside a specific one: the GPU Operator expects them not to overlap), the overlap is
evidence said in layer 3's findings, never settled by the resources' names or order: the driver
pod's owner decides; a node without one goes where the driver pods of the other nodes those same
selectors overlap on go (the operator deploys only one of them there), and without any such pod
to the selector that selects the fewest GPU nodes (the specific one); where two are as narrow, to
a pool of its own for the nodes exactly those selectors overlap on. Without NVIDIADriver resources (or for a node none of
them selects) it is the nodes sharing its cloud node pool label and its GPU product. Every
comparison across nodes (driver, CUDA, kernel and OS skews, on GFD labels or DRA attributes) is
made inside one pool; a pool of one node has nothing to differ from.
"""

from __future__ import annotations

import functools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from layers.facts import drareads
from layers.facts import objects as o
from layers.facts.context import WalkContext, component
from layers.facts.placement import label_value
from layers.sources import K8sObject, SourceError

# The labels cloud and autoscaler node pools carry, in the order a node's pool is read from.
POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "karpenter.sh/nodepool",
    "kubernetes.azure.com/agentpool",
    "node.kubernetes.io/instance-type",
)
PRODUCT_LABEL = "nvidia.com/gpu.product"
NVIDIADRIVER = "NVIDIADriver"


class Pool(msgspec.Struct, frozen=True):
    """One driver pool: how it was found, said so a person can find it again."""

    key: tuple[str, ...]
    # "NVIDIADriver a100-535", "node pool eks.amazonaws.com/nodegroup=a100 · NVIDIA-A100-SXM4-80GB"
    label: str
    # A node of unknown GPU product is compared with a wider set (its node pool, or every GPU node)
    # that overlaps the real pools: not a pool of its own in the L3_OK table.
    wide: bool = False


class DriverPools(msgspec.Struct, frozen=True):
    """Every GPU node's pool, and the reads that could not be made (said beside a skew)."""

    by_node: Mapping[str, Pool]
    notes: tuple[str, ...] = ()
    members_of: Mapping[Pool, tuple[str, ...]] = msgspec.field(default_factory=dict)
    # node -> every NVIDIADriver whose nodeSelector selects it, where more than one does (sorted)
    overlaps: Mapping[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    how: Mapping[str, str] = msgspec.field(default_factory=dict)  # overlapping node -> what decided its pool

    def of(self, node: str) -> Pool | None:
        return self.by_node.get(node)

    def notes_of(self, node: str) -> tuple[str, ...]:
        """The reads that could not be made, and the node's NVIDIADriver overlap when it has one."""
        both = self.overlaps.get(node)
        if not both:
            return self.notes
        pool = self.of(node)
        said = (
            f"NVIDIADriver node selectors overlap on {node}: {', '.join(both)} all select it (the GPU Operator "
            f"expects them not to); its driver pool is {pool.label if pool else 'none'}, "
            f"by {self.how.get(node, 'its driver pod')}"
        )
        return (*self.notes, said)

    def members(self, node: str) -> tuple[str, ...]:
        """The node's pool in node order (the node itself included); a node of no pool is alone."""
        pool = self.of(node)
        return self.members_of.get(pool, (node,)) if pool is not None else (node,)

    @property
    def pools(self) -> list[Pool]:
        return [p for p in self.members_of if not p.wide]


def product(node: K8sObject, dra_product: str | None = None) -> str:
    """The node's GPU product as GFD writes it (`NVIDIA-H100-80GB-HBM3`); the DRA driver's
    `productName` attribute (`NVIDIA H100 80GB HBM3`) on a node GFD does not label."""
    value = label_value(o.labels(node).get(PRODUCT_LABEL)) or dra_product or ""
    return "-".join(value.split())


def _pool_label(node: K8sObject) -> tuple[str, str] | None:
    lab = o.labels(node)
    return next(((k, label_value(lab[k]) or "") for k in POOL_LABELS if k in lab), None)


def cloud_pool(node: K8sObject, dra_product: str | None = None) -> Pool:
    """The node's cloud node pool (the first of POOL_LABELS it carries) and GPU product. A node whose
    product nobody reports (a new node whose driver failed: GFD never ran) is compared with its
    whole node pool, or without one with every GPU node: its product cannot split it off."""
    where = _pool_label(node)
    gpu = product(node, dra_product)
    if where and gpu:
        return Pool(("cloud", *where, gpu), f"node pool {where[0]}={where[1]} · {gpu}")
    if gpu:
        return Pool(("cloud", "", "", gpu), f"GPU product {gpu}")
    if where:
        return Pool(
            ("wide", *where), f"node pool {where[0]}={where[1]} (its GPU product is not labelled)", True
        )
    return Pool(("wide",), "no node-pool or GPU product label", True)


def selects(driver: K8sObject, node: K8sObject) -> bool:
    """The NVIDIADriver's `spec.nodeSelector` (equality on labels) matches the node; an empty one
    selects every GPU node."""
    wanted = ((driver.get("spec") or {}).get("nodeSelector") or {}).items()
    lab = o.labels(node)
    return all(label_value(lab.get(str(k))) == label_value(v) for k, v in wanted)


def owner_name(obj: K8sObject, kind: str) -> str | None:
    return next(
        (
            str(r.get("name"))
            for r in (obj.get("metadata") or {}).get("ownerReferences") or []
            if r.get("kind") == kind
        ),
        None,
    )


def assign(
    nodes: Sequence[K8sObject],
    drivers: Sequence[K8sObject],
    owner_of: Mapping[str, str],
    dra_products: Mapping[str, str] | None = None,
    notes: Iterable[str] = (),
) -> DriverPools:
    """Sort GPU nodes into pools. `owner_of`: node -> the NVIDIADriver owning its driver pod. Nothing
    here depends on the NVIDIADrivers' names or order (tests/metamorphic/test_nvidiadriver_names.py)."""
    names = {o.name(d) for d in drivers}
    by_name = {o.name(n): n for n in nodes}
    selected = {o.name(n): sorted(o.name(d) for d in drivers if selects(d, n)) for n in nodes}
    width = Counter(d for ds in selected.values() for d in ds)  # GPU nodes each selector selects
    # Where selectors overlap, which of them own the driver pods there: node sets by the same selectors.
    deployed: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for name, matching in selected.items():
        if len(matching) > 1 and owner_of.get(name) in matching:
            deployed[tuple(matching)][owner_of[name]] += 1
    by_node: dict[str, Pool] = {}
    overlaps: dict[str, tuple[str, ...]] = {}
    how: dict[str, str] = {}
    for node in nodes:
        name = o.name(node)
        matching = selected[name]
        owner = owner_of.get(name)
        if owner not in names:
            owner, why = _overlap_owner(matching, deployed.get(tuple(matching)), width)
        else:
            why = "its driver pod's owner"
        if len(matching) > 1:
            overlaps[name], how[name] = tuple(matching), why
        by_node[name] = _driver_pool(owner) if owner else cloud_pool(node, (dra_products or {}).get(name))
    members: dict[Pool, list[str]] = defaultdict(list)
    for name, pool in by_node.items():
        if not pool.wide:
            members[pool].append(name)
    # A node of unknown product: its node pool's nodes whatever their product, NVIDIADriver pools
    # aside; alone there (a new node joined with labels the others lack), every such GPU node.
    # Resolved once per node-pool label: a fleet GFD never labelled has thousands of them.
    outside = [o.name(n) for n in nodes if by_node[o.name(n)].key[0] != NVIDIADRIVER]
    resolved: dict[tuple[str, ...], Pool] = {}
    for node in nodes:
        name = o.name(node)
        pool = by_node[name]
        if not pool.wide:
            continue
        if pool.key not in resolved:
            same = [n for n in outside if len(pool.key) > 1 and _pool_label(by_name[n]) == pool.key[1:]]
            wide = pool if len(same) > 1 else Pool(("wide",), f"every GPU node ({pool.label})", True)
            resolved[pool.key] = wide
            members.setdefault(wide, same if len(same) > 1 else outside)
        by_node[name] = resolved[pool.key]
    return DriverPools(by_node, tuple(notes), {p: tuple(ns) for p, ns in members.items()}, overlaps, how)


def _driver_pool(owner: str) -> Pool:
    """The pool of one NVIDIADriver, or (`a + b`) of the nodes exactly those overlap on."""
    if " + " in owner:
        return Pool((NVIDIADRIVER, *owner.split(" + ")), f"{NVIDIADRIVER}s {owner} (overlapping selectors)")
    return Pool((NVIDIADRIVER, owner), f"{NVIDIADRIVER} {owner}")


def _overlap_owner(
    matching: Sequence[str], deployed: Counter[str] | None, width: Mapping[str, int]
) -> tuple[str | None, str]:
    """(the NVIDIADriver whose pool a node without a driver pod of theirs joins, and why) — by what
    the cluster shows, never by name: its one selector; of several, the one owning the driver pods
    where the same selectors overlap; else the narrowest; several as narrow, `a + b`."""
    if len(matching) <= 1:
        return (matching[0] if matching else None), "its one selector"
    if deployed:
        top = max(deployed.values())
        owners = sorted(d for d, c in deployed.items() if c == top)
        if len(owners) == 1:
            return owners[0], f"the driver pods where the same selectors overlap ({top} owned by {owners[0]})"
    narrowest = min(width[d] for d in matching)
    best = sorted(d for d in matching if width[d] == narrowest)
    if len(best) == 1:
        return best[
            0
        ], f"the narrowest selector ({narrowest} GPU node(s); no driver pod of theirs found on it)"
    return " + ".join(best), "none of them: as narrow and no driver pod of theirs found on it"


def _driver_owners(ctx: WalkContext, notes: list[str]) -> dict[str, str]:
    """node -> NVIDIADriver owning its driver pod (through the pod's DaemonSet)."""
    try:
        drivers = [p for p in ctx.operator_pods() if component(p) == "driver" and o.pod_node(p)]
    except SourceError as err:
        notes.append(f"driver pods not read ({err}): pools by NVIDIADriver nodeSelector")
        return {}
    owners: dict[str, str] = {}
    sets: dict[str, dict[str, str]] = {}
    for pod in drivers:
        ds, ns = owner_name(pod, "DaemonSet"), str(o.namespace(pod) or "")
        if ds is None:
            continue
        if ns not in sets:
            try:
                listed = ctx.cached(("daemonsets", ns), functools.partial(ctx.cluster.list_daemonsets, ns))
            except SourceError as err:
                notes.append(f"DaemonSets of {ns} not read ({err}): pools by NVIDIADriver nodeSelector")
                listed = []
            sets[ns] = {o.name(d): owner for d in listed if (owner := owner_name(d, NVIDIADRIVER))}
        if ds in sets[ns]:
            owners[str(o.pod_node(pod))] = sets[ns][ds]
    return owners


def _dra_products(ctx: WalkContext, nodes: Sequence[K8sObject]) -> dict[str, str]:
    """The DRA driver's productName for GPU nodes GFD does not label (GPUCluster runs no GFD)."""
    bare = [o.name(n) for n in nodes if not o.labels(n).get(PRODUCT_LABEL)]
    if not bare:
        return {}
    try:
        inventory = drareads.inventory(ctx)
    except SourceError:
        return {}  # the DRA layer says why the slices cannot be read
    out: dict[str, str] = {}
    for name in bare:
        value = next((v for d in inventory.on(name) if (v := d.attribute("productName"))), None)
        if value:
            out[name] = value
    return out


def driver_pools(ctx: WalkContext) -> DriverPools:
    """The GPU nodes' driver pools, once per walk."""

    def compute() -> DriverPools:
        nodes = ctx.gpu_nodes()
        notes: list[str] = []
        try:
            drivers: list[Any] = ctx.custom("nvidia.com", "v1alpha1", "nvidiadrivers")
        except SourceError as err:
            notes.append(f"NVIDIADriver resources not read ({err}): pools by node pool and GPU product")
            drivers = []
        owners = _driver_owners(ctx, notes) if drivers else {}
        return assign(nodes, drivers, owners, _dra_products(ctx, nodes), notes)

    return ctx.cached("driver_pools", compute)
