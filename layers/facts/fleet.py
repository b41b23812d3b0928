"""The fleet's versions and their majority (layer 3, and the digest).

Which driver, CUDA runtime, kernel and OS image each GPU node runs (GFD labels, on a
DRA node without them its published device attributes, and status.nodeInfo), how those
values are spread over each driver pool (layers/facts/driverpool.py), and which nodes
differ from their pool's majority.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import cached_property

import msgspec

from layers.facts import drareads, draslices, owners
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.driverpool import DriverPools, driver_pools
from layers.facts.fold import MAX_LISTED, shown
from layers.facts.logs import LogReads
from layers.findings import Finding, finding
from layers.sources import K8sObject, SourceError

UPGRADE_STATE = owners.UPGRADE_STATE  # the owners' mark; only upgrade-failed is a finding
GFD = "GFD labels"
DRA_SLICE = "DRA ResourceSlice"


def _joined(lab: dict[str, str], prefix: str, parts: tuple[str, ...]) -> str | None:
    """`major.minor[.rev]` from split labels; None without a major."""
    values = [(lab.get(f"{prefix}.{p}") or "").strip() for p in parts]
    if not values[0]:
        return None
    return ".".join(v for v in values if v)


def driver_version(node: K8sObject) -> str | None:
    """GFD's driver version: `.full`, else its split labels, else the deprecated cuda.driver.* of older GFD."""
    lab = o.labels(node)
    full = (lab.get("nvidia.com/cuda.driver-version.full") or "").strip()
    return (
        full
        or _joined(lab, "nvidia.com/cuda.driver-version", ("major", "minor", "revision"))
        or _joined(lab, "nvidia.com/cuda.driver", ("major", "minor", "rev"))
    )


def runtime_version(node: K8sObject) -> str | None:
    """GFD's CUDA runtime version: `.full`, else its split labels, else the deprecated cuda.runtime.*."""
    lab = o.labels(node)
    full = (lab.get("nvidia.com/cuda.runtime-version.full") or "").strip()
    return (
        full
        or _joined(lab, "nvidia.com/cuda.runtime-version", ("major", "minor"))
        or _joined(lab, "nvidia.com/cuda.runtime", ("major", "minor"))
    )


# (driver, CUDA version the driver supports, where they were read) for one node object.
Versions = Callable[[K8sObject | None], tuple[str | None, str | None, str]]


def node_versions(ctx: WalkContext) -> Versions:
    """GFD's labels; on a DRA node without them (GPUCluster runs no GFD) the DRA driver's published
    device attributes `driverVersion` / `cudaDriverVersion`. The slices are read once per walk, and
    only when some node has no GFD version label."""

    def dra_versions(node: str) -> tuple[str | None, str | None]:
        try:
            devices = drareads.inventory(ctx).on(node)
        except SourceError:
            return None, None  # the DRA layer says why the slices cannot be read
        # Every device of a node runs the same driver; a device without the attribute says nothing.
        driver = next((v for d in devices if (v := d.attribute("driverVersion"))), None)
        cuda = next((v for d in devices if (v := d.attribute("cudaDriverVersion"))), None)
        return driver, cuda

    def versions(node: K8sObject | None) -> tuple[str | None, str | None, str]:
        if node is None:
            return None, None, ""
        driver, cuda = driver_version(node), runtime_version(node)
        if driver or cuda:
            return driver, cuda, GFD
        driver, cuda = dra_versions(o.name(node))
        return driver, cuda, DRA_SLICE if driver or cuda else ""

    return versions


def version_key(value: str) -> Hashable:
    """One key for the spellings of a version: GFD's `580.95.05` and `13.0` are the DRA driver's
    semver `580.95.5` and `13.0.0`. A value that is not dotted numbers is its own key."""
    parts = value.strip().split(".")
    if not all(p.isdigit() for p in parts):
        return value
    numbers = [int(p) for p in parts]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def kernel_version(node: K8sObject) -> str | None:
    return str(o.node_info(node).get("kernelVersion") or "").strip() or None


def os_image(node: K8sObject) -> str | None:
    return str(o.node_info(node).get("osImage") or "").strip() or None


class Spread(msgspec.Struct, frozen=True, dict=True):  # dict: for its cached_property
    """How one attribute is spread over the GPU nodes that have it."""

    what: str
    counts: tuple[tuple[str, int], ...]  # value → nodes, most common first
    by_node: dict[str, str]
    dra_read: frozenset[str] = frozenset()  # nodes whose value is a DRA device attribute, not a label
    read_as: Mapping[str, str] = msgspec.field(
        default_factory=dict
    )  # a node's own spelling, where by_node's differs
    pool: str = ""  # the driver pool it was computed over ("" : every GPU node)

    def value(self, node: str) -> str | None:
        """The node's value as the node itself writes it."""
        return self.read_as.get(node) or self.by_node.get(node)

    @property
    def majority(self) -> str | None:
        """The most common value; None on a tie for first place (the fleet is split)."""
        if not self.counts or (len(self.counts) > 1 and self.counts[0][1] == self.counts[1][1]):
            return None
        return self.counts[0][0]

    def odd(self, node: str) -> bool:
        """The node's value differs from the majority (or the fleet is split and it has company)."""
        value = self.by_node.get(node)
        if value is None or len(self.counts) < 2:
            return False
        return value != self.majority

    def table(self) -> str:
        return f"{self.what}: " + ", ".join(f"{v} → {n} node{'s' if n != 1 else ''}" for v, n in self.counts)

    def describe(self, node: str) -> str:
        m = self.majority
        base = f"{self.what} {self.value(node)}"
        where = f"GPU nodes of its driver pool ({self.pool})" if self.pool else "GPU nodes"
        if m is None:
            return f"{base} ({where} are split with no majority: {self.table().split(': ', 1)[1]})"
        return f"{base} vs {m} on {dict(self.counts)[m]} of {len(self.by_node)} {where}"

    @cached_property
    def odd_nodes(self) -> list[str]:
        m = self.majority
        return [n for n, v in self.by_node.items() if v != m]


def spread(
    nodes: list[K8sObject],
    what: str,
    read: Callable[[K8sObject], str | None],
    same: Callable[[str], Hashable] = str,
    dra_read: frozenset[str] = frozenset(),
    pool: str = "",
) -> Spread:
    """How the values `read` gives are spread over these nodes (nodes without one are left out).
    Values with the same `same` key are one value, counted under the spelling most of its nodes
    write (`value` keeps each node's own)."""
    raw: dict[str, str] = {}
    for n in nodes:
        value = read(n)
        if value:
            raw[o.name(n)] = value
    spellings: dict[Hashable, Counter[str]] = {}
    for value in raw.values():
        spellings.setdefault(same(value), Counter())[value] += 1
    written = {key: c.most_common(1)[0][0] for key, c in spellings.items()}
    by_node = {n: written[same(v)] for n, v in raw.items()}
    return Spread(
        what,
        tuple(Counter(by_node.values()).most_common()),
        by_node,
        frozenset(n for n in dra_read if n in raw),
        {n: v for n, v in raw.items() if v != by_node[n]},
        pool,
    )


def skew(
    code: str,
    spreads: list[Spread],
    examined: list[str],
    command: str,
    advice: str,
    notes: Sequence[str] = (),
) -> list[Finding]:
    """One finding per examined node whose values differ from its pool's majority in any of `spreads`."""
    out: list[Finding] = []
    for node in examined:
        odd = [s for s in spreads if s.odd(node)]
        if odd:
            dra = sorted({n for s in odd for n in s.dra_read})
            pool = odd[0].pool
            where = [f"driver pool: {pool} ({len(odd[0].by_node)} GPU nodes report it)"] if pool else []
            out.append(
                finding(
                    code,
                    f"{node} runs " + " and ".join(s.describe(node) for s in odd) + f": {advice}",
                    evidence=where
                    + [*notes]
                    + [s.table() for s in odd]
                    + [f"odd nodes ({s.what}): {shown(s.odd_nodes)}" for s in odd]
                    + (
                        [
                            f"read from the DRA driver's device attributes driverVersion / cudaDriverVersion "
                            f"(no GFD label) on {len(dra)} node{'s' if len(dra) != 1 else ''}: {shown(dra)}"
                        ]
                        if dra
                        else []
                    ),
                    commands=[command]
                    + (
                        [
                            f"kubectl get resourceslices --field-selector spec.driver={draslices.DRIVER},"
                            f"spec.nodeName={node} -o yaml"
                        ]
                        if node in dra
                        else []
                    ),
                    node=node,
                )
            )
    return out


def skews(spreads: list[Spread], examined: list[str], notes: Sequence[str] = ()) -> list[Finding]:
    """L3's skew findings from the (driver, runtime, kernel, OS image) spreads."""
    driver, runtime, kernel, image = spreads
    return skew(
        "L3_DRIVER_VERSION_SKEW",
        [driver, runtime],
        examined,
        "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full",
        "upgrade or roll back this node's driver so its driver pool matches",
        notes,
    ) + skew(
        "L3_KERNEL_SKEW",
        [kernel, image],
        examined,
        "kubectl get nodes -o wide",
        "check that the driver image fits this kernel/OS (a kernel update needs a matching driver build)",
        notes,
    )


def pool_skews(ctx: WalkContext, examined: list[str]) -> list[Finding]:
    """The skews of each examined node against its own driver pool (a pool of one has none)."""
    pools = driver_pools(ctx)
    out: list[Finding] = []
    for node in examined:
        out += skews(pool_spreads(ctx, node), [node], pools.notes_of(node))
    return out


def overlap_notes(ctx: WalkContext, examined: Sequence[str]) -> list[str]:
    """The examined nodes' NVIDIADriver overlaps (evidence of L3_OK, as of a skew)."""
    pools = driver_pools(ctx)
    return [n for node in examined for n in pools.notes_of(node) if n not in pools.notes]


def upgrade_failed(node: str, node_obj: K8sObject | None, events: Sequence[str] = ()) -> list[Finding]:
    """L3_DRIVER_UPGRADE_FAILED when the operator's upgrade controller labelled the node upgrade-failed.

    `events` are the node's upgrade event lines: they say why (a drain blocked by a PodDisruptionBudget,
    a driver pod that never came up), which the label alone does not.
    """
    state = o.labels(node_obj or {}).get(UPGRADE_STATE, "")
    if state.strip().lower() != "upgrade-failed":
        return []
    return [
        finding(
            "L3_DRIVER_UPGRADE_FAILED",
            f"The operator's driver upgrade failed on {node}: fix what stopped it (the driver pod's error or a "
            f"blocked drain, see the node's events), then relabel the node {UPGRADE_STATE}=upgrade-required "
            "to retry",
            evidence=[f"{UPGRADE_STATE}={state}", *events],
            commands=[
                f"kubectl get nodes -l {UPGRADE_STATE}=upgrade-failed",
                f"kubectl get events -A --field-selector involvedObject.kind=Node,involvedObject.name={node}",
                f"kubectl label node {node} {UPGRADE_STATE}=upgrade-required --overwrite",
            ],
            node=node,
        )
    ]


def upgrade_event_lines(events: Sequence[K8sObject]) -> list[str]:
    """A node's events about the driver upgrade (the controller's GPUDriverUpgrade, drain failures)."""
    out: list[str] = []
    for ev in events:
        msg = " ".join(str(ev.get("message") or "").split())
        reason = str(ev.get("reason") or "")
        if "upgrade" in reason.lower() or "drain" in msg.lower() or "upgrade" in msg.lower():
            out.append(f"event {reason}: {msg}")
    return list(dict.fromkeys(out))[:MAX_LISTED]


def upgrade_events(reads: LogReads, node: str, node_obj: K8sObject | None) -> list[str]:
    """The node's driver-upgrade events, read only for an upgrade-failed node: they say why it failed."""
    if not upgrade_failed(node, node_obj):
        return []
    try:
        return upgrade_event_lines(reads.ctx.events("Node", None, node))
    except SourceError as err:
        reads.refused(f"events of node {node}", err, node)
        return []


def _fleet_versions(ctx: WalkContext) -> dict[str, tuple[str | None, str | None, str]]:
    """Every GPU node's (driver, CUDA, source), read once per walk."""

    def compute() -> dict[str, tuple[str | None, str | None, str]]:
        versions = node_versions(ctx)
        return {o.name(n): versions(n) for n in ctx.gpu_nodes()}

    return ctx.cached("l3_fleet_versions", compute)


def _spreads_over(ctx: WalkContext, nodes: list[K8sObject], pool: str) -> list[Spread]:
    read = _fleet_versions(ctx)
    dra = frozenset(o.name(n) for n in nodes if read[o.name(n)][2] == DRA_SLICE)
    return [
        spread(nodes, "driver", lambda n: read[o.name(n)][0], version_key, dra, pool),
        spread(nodes, "CUDA runtime", lambda n: read[o.name(n)][1], version_key, dra, pool),
        spread(nodes, "kernel", kernel_version, pool=pool),
        spread(nodes, "OS image", os_image, pool=pool),
    ]


def pool_spreads(ctx: WalkContext, node: str) -> list[Spread]:
    """The (driver, CUDA runtime, kernel, OS image) spreads over the node's driver pool, once per pool."""
    pools = driver_pools(ctx)
    pool = pools.of(node)

    def compute() -> list[Spread]:
        members = set(pools.members(node))  # once per pool: a pending pod examines 5,000 nodes
        nodes = [n for n in ctx.gpu_nodes() if o.name(n) in members]
        return _spreads_over(ctx, nodes, pool.label if pool else "")

    return ctx.cached(("l3_pool_spread", pool.key if pool else node), compute)


def fleet_spreads(ctx: WalkContext) -> list[Spread]:
    """The GPU nodes' (driver, CUDA runtime, kernel, OS image) spreads over the whole fleet, once per walk."""
    return ctx.cached("l3_fleet_spread", lambda: _spreads_over(ctx, ctx.gpu_nodes(), ""))


def pools_table(ctx: WalkContext) -> str | None:
    """`driver pools: <pool>: driver 550.x (8 nodes); <pool>: driver 535.y (6 nodes)` when the GPU
    nodes form more than one pool (L3_OK evidence: different pools, different branches, no finding)."""
    pools: DriverPools = driver_pools(ctx)
    if len(pools.pools) < 2:
        return None
    read = _fleet_versions(ctx)
    parts: list[str] = []
    for pool in pools.pools:
        members = pools.members_of[pool]
        versions = Counter(v for n in members if (v := read[n][0]))
        shown_versions = ", ".join(f"{v} ({c})" for v, c in versions.most_common()) or "not reported"
        plural = "s" if len(members) != 1 else ""
        parts.append(f"{pool.label}: driver {shown_versions} of {len(members)} node{plural}")
    return "driver pools: " + "; ".join(parts)
