"""The daily digest's fleet checks: which GPU nodes need a person today.

A node is flagged when allocatable is below capacity for any GPU resource
(nvidia.com/gpu, nvidia.com/mig-*, nvidia.com/gpu.shared), when its correctable
or uncorrectable remapped rows rose over the last 24 h, or when a row remap
failed (spec/interfaces.md, `digest --format json`). Flat remapped rows are
history, not news: they are not flagged. Each node appears once, with every
reason it has.

The read is one node list and the light fleet read of layers/facts/gpufacts.py
(five Telemetry calls for the whole fleet). dcgm-exporter pods are listed only
when some series name a host that is no node (exporters without NODE_NAME
label series with their own pod name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from layers.facts import draslices
from layers.facts import objects as o
from layers.facts.context import Settings, WalkContext
from layers.facts.draslices import Inventory
from layers.facts.fold import shown
from layers.facts.gpufacts import (
    CORRECTABLE_ROWS,
    UNCORRECTABLE_ROWS,
    GpuFacts,
    NodeHealth,
    read_fleet_health,
)
from layers.facts.hosts import HostMap, host_map
from layers.facts.pluginlog import read_plugin_log
from layers.findings import Target
from layers.owner_digest import OWNER_REASONS, OwnerFacts, owner_facts, vanished_cordons
from layers.sources import Cluster, K8sObject, SourceError, Telemetry, TelemetryError

ALLOCATABLE_BELOW_CAPACITY = "ALLOCATABLE_BELOW_CAPACITY"
REMAPPED_ROWS_RISING = "REMAPPED_ROWS_RISING"
ROW_REMAP_FAILURE = "ROW_REMAP_FAILURE"
REASONS = (ALLOCATABLE_BELOW_CAPACITY, REMAPPED_ROWS_RISING, ROW_REMAP_FAILURE)
# Worst first when the list is long: a failed remap means RMA, a lost GPU costs capacity now.
_WEIGHT = {ROW_REMAP_FAILURE: 4, ALLOCATABLE_BELOW_CAPACITY: 2, REMAPPED_ROWS_RISING: 1}
# An owner gave up (a person must act) outranks all; agents' faults and NotReady are a lost node.
_WEIGHT.update(dict(zip(OWNER_REASONS, (5, 3, 3), strict=True)))

# Device plugin logs read per digest: only nodes with a capacity gap, whose lost GPUs the plugin's
# Xid lines explain (DCGM cannot report 79, 119, 120); bounded so a bad day stays one quick read.
PLUGIN_LOG_NODES = 50

# dcgm-exporter pods, by the operator's `app` label and the standalone chart's name label.
EXPORTER_SELECTORS = ("app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter")


@dataclass(frozen=True)
class ResourceCount:
    resource: str
    capacity: int
    allocatable: int
    replicas: int = 1  # units per GPU on a time-sliced node (capacity and allocatable count replicas)

    @property
    def gpu_capacity(self) -> int:
        return -(-self.capacity // self.replicas)

    @property
    def gpu_allocatable(self) -> int:
        """GPUs left: a GPU marked unhealthy takes all its replicas, so a partial one is lost."""
        lost = self.capacity - self.allocatable
        return self.gpu_capacity - (-(-lost // self.replicas) if lost > 0 else 0)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "resource": self.resource,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
        }
        if self.replicas > 1:
            out["replicas_per_gpu"] = self.replicas
        return out


@dataclass(frozen=True)
class FlaggedNode:
    node: str
    capacity: int  # GPUs (and MIG instances) the node advertises; time-sliced replicas counted as GPUs
    allocatable: int
    reasons: tuple[str, ...]
    correctable_rows_24h: int = 0
    uncorrectable_rows_24h: int = 0
    xids_24h: tuple[int, ...] = ()
    cordoned: bool = False
    row_remap_failure: bool = False
    resources: tuple[ResourceCount, ...] = ()
    gpus: tuple[str, ...] = ()  # the GPUs whose rows rose or whose remap failed, as a person names them
    owners: OwnerFacts = field(
        default_factory=OwnerFacts
    )  # the node's owner and state (layers/owner_digest.py)

    @property
    def gaps(self) -> tuple[ResourceCount, ...]:
        return tuple(r for r in self.resources if r.allocatable < r.capacity)

    @property
    def weight(self) -> tuple[int, int]:
        # Reasons added beside the three (the ledger's, layers/digest_ledger.py) weigh as a capacity gap.
        return max(_WEIGHT.get(r, 2) for r in self.reasons), sum(_WEIGHT.get(r, 2) for r in self.reasons)

    def to_dict(self) -> dict[str, object]:
        return {
            "node": self.node,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "reasons": list(self.reasons),
            "remapped_rows_24h": {
                "correctable": self.correctable_rows_24h,
                "uncorrectable": self.uncorrectable_rows_24h,
            },
            "xids_24h": list(self.xids_24h),
            "cordoned": self.cordoned,
            "row_remap_failure": self.row_remap_failure,
            "resources": [r.to_dict() for r in self.resources],
            "gpus": list(self.gpus),
            "owner": self.owners.owner.to_dict() if self.owners.owner else None,
            "owner_reason": self.owners.needs_person,
            "health_conditions": list(self.owners.conditions),
        }


@dataclass(frozen=True)
class Digest:
    generated_at: float  # unix seconds
    gpu_nodes: int
    flagged: tuple[FlaggedNode, ...]
    metrics_source: str = ""
    metrics_error: str | None = None  # why remapped rows and Xids could not be read
    notes: tuple[str, ...] = ()
    rows_read: bool = True  # False: remapped rows were not readable, their zeros mean "unknown"
    hostmap: HostMap = field(default_factory=HostMap, compare=False, repr=False)
    offenders: tuple[Any, ...] = ()  # the ledger's rules met (layers/digest_ledger.py Offender)

    @property
    def generated_iso(self) -> str:
        return datetime.fromtimestamp(self.generated_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def to_dict(self) -> dict[str, object]:
        return {
            "generated_at": self.generated_iso,
            "gpu_nodes": self.gpu_nodes,
            "flagged": [f.to_dict() for f in self.flagged],
            "metrics": {"source": self.metrics_source, "error": self.metrics_error},
            "notes": list(self.notes),
            "offenders": [x.to_dict() for x in self.offenders],
        }


def row_count(value: float) -> int:
    """Remapped rows as a whole number: `increase` extrapolates (6.0027 for 6), but any rise is at least 1."""
    return 0 if value <= 0 else max(1, round(value))


def _resources(node: K8sObject) -> tuple[ResourceCount, ...]:
    cap = o.gpu_resources(node, "capacity")
    alloc = o.gpu_resources(node, "allocatable")
    names = sorted(r for r in set(cap) | set(alloc) if cap.get(r, 0) > 0 or alloc.get(r, 0) > 0)
    return tuple(ResourceCount(r, cap.get(r, 0), alloc.get(r, 0), o.replicas_per_gpu(node, r)) for r in names)


def _dra_resources(
    name: str, inventory: Inventory | None
) -> tuple[tuple[ResourceCount, ...], tuple[int, ...]]:
    """A DRA node's GPUs as the digest counts them: published against untainted (NoSchedule/NoExecute),
    under the driver's name; and the Xids its device taints carry."""
    devices = inventory.on(name) if inventory is not None else ()
    if not devices:
        return (), ()
    usable = sum(1 for d in devices if not d.blocking_taints)
    xids = {
        int(t.value) for d in devices for t in d.taints if t.key == draslices.TAINT_XID and t.value.isdigit()
    }
    return (ResourceCount(draslices.DRIVER, len(devices), usable),), tuple(sorted(xids))


def _flag(
    node: K8sObject | None, name: str, health: NodeHealth | None, inventory: Inventory | None = None
) -> FlaggedNode | None:
    reasons: list[str] = []
    published, taint_xids = _dra_resources(name, inventory)
    resources = (_resources(node) if node is not None else ()) + published
    if (node is not None and o.allocatable_gaps(node)) or any(r.allocatable < r.capacity for r in published):
        reasons.append(ALLOCATABLE_BELOW_CAPACITY)
    if health is not None and health.rows_rising:
        reasons.append(REMAPPED_ROWS_RISING)
    if health is not None and health.row_remap_failure:
        reasons.append(ROW_REMAP_FAILURE)
    owners = owner_facts(node, node is not None and (o.is_gpu_node(node) or bool(published)))
    reasons += owners.reasons
    if not reasons:
        return None
    gpus: tuple[str, ...] = ()
    if health is not None:
        gpus = tuple(g.label for g in health.gpus if g.rows_rising or (g.row_remap_failure or 0) > 0)
    return FlaggedNode(
        node=name,
        capacity=sum(r.gpu_capacity for r in resources),
        allocatable=sum(r.gpu_allocatable for r in resources),
        reasons=tuple(reasons),
        correctable_rows_24h=row_count(health.correctable_rows_24h) if health else 0,
        uncorrectable_rows_24h=row_count(health.uncorrectable_rows_24h) if health else 0,
        xids_24h=tuple(sorted({*(health.xids_24h if health else ()), *taint_xids})),
        cordoned=node is not None and o.is_unschedulable(node),
        row_remap_failure=health is not None and health.row_remap_failure,
        resources=resources,
        gpus=gpus,
        owners=owners,
    )


def build_digest(
    nodes: Sequence[K8sObject],
    fleet_health: Mapping[str, NodeHealth] | None,
    now: float,
    *,
    metrics_source: str = "",
    metrics_error: str | None = None,
    notes: Iterable[str] = (),
    hostmap: HostMap | None = None,
    remap_series_present: bool | None = None,
    inventory: Inventory | None = None,
) -> Digest:
    """The digest from the node objects, the fleet's 24 h hardware signals (None: unreadable) and
    the GPUs DRA nodes publish (None: no DRA read)."""
    health = dict(fleet_health or {})
    by_name = {o.name(n): n for n in nodes}
    flagged: list[FlaggedNode] = []
    for name, node in by_name.items():
        f = _flag(node, name, health.get(name), inventory)
        if f is not None:
            flagged.append(f)
    # A gpubot cordon that vanished is news first: the node took pods again without anyone saying so.
    all_notes = [*vanished_cordons(nodes), *notes]
    strays = sorted(h for h in health if h not in by_name)
    sick_strays = [h for h in strays if health[h].rows_rising or health[h].row_remap_failure]
    if sick_strays:
        all_notes.append(
            f"remapped rows rising or a row remap failed on host label(s) {shown(sick_strays)}"
            + " that match no node or dcgm-exporter pod: check the exporter's NODE_NAME"
        )
    # Health holds only sick GPUs; whether the exporter is scraped at all is
    # asked separately (None: infer it from the health read alone).
    present = bool(health) if remap_series_present is None else remap_series_present
    if fleet_health is not None and not present and any(o.is_gpu_node(n) for n in nodes):
        all_notes.append(
            f"no remapped-row series in {metrics_source or 'the metrics source'}: "
            "is dcgm-exporter scraped, with DCGM_FI_DEV_*_REMAPPED_ROWS enabled?"
        )
    via_dra = inventory.nodes_with_slices if inventory is not None else frozenset()
    silent = sorted(
        o.name(n) for n in nodes if o.is_gpu_node(n) and not o.advertised(n) and o.name(n) not in via_dra
    )
    if silent:
        # Not one of the digest's three reasons, but no GPU node should go unmentioned.
        all_notes.append(
            f"{len(silent)} GPU node(s) advertise no GPU resource (device plugin not registered): {shown(silent)}; "
            "`gpubot why` on a pod there walks layers 1-2"
        )
    down = sorted(o.name(n) for n in nodes if (o.is_gpu_node(n) or o.name(n) in via_dra) and _not_ready(n))
    if down:
        # Not one of the three reasons either: a node that stopped reporting keeps its last capacity
        # and allocatable, so a GPU node that hung (Xid 79 can take the machine) would look healthy.
        all_notes.append(
            f"{len(down)} GPU node(s) not Ready (their capacity and allocatable are the last the kubelet "
            f"posted): {shown(down)}"
        )
    flagged.sort(key=lambda f: (-f.weight[0], -f.weight[1], f.node))
    return Digest(
        generated_at=now,
        gpu_nodes=sum(1 for n in nodes if o.is_gpu_node(n) or o.name(n) in via_dra),
        flagged=tuple(flagged),
        metrics_source=metrics_source,
        metrics_error=metrics_error,
        notes=tuple(all_notes),
        hostmap=hostmap or HostMap(nodes=frozenset(by_name)),
        rows_read=fleet_health is not None and present,
    )


def _not_ready(node: K8sObject) -> bool:
    """The node's Ready condition says False or Unknown (a node without one is not judged)."""
    ready = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"]
    return bool(ready) and ready[0].get("status") != "True"


def _exporter_pods(cluster: Cluster, namespace: str | None) -> list[K8sObject]:
    seen: dict[tuple[str | None, str], K8sObject] = {}
    for selector in EXPORTER_SELECTORS:
        for pod in cluster.list_pods(namespace=namespace, label_selector=selector):
            seen[(o.namespace(pod), o.name(pod))] = pod
    return list(seen.values())


def _remap(health: Mapping[str, NodeHealth], hostmap: HostMap) -> dict[str, NodeHealth]:
    """Re-key health read under host labels to nodes, merging a node's GPUs seen under both spellings."""
    merged: dict[str, list[GpuFacts]] = {}
    for host, h in health.items():
        node = hostmap.exporters.get(host, host)
        gpus = merged.setdefault(node, [])
        gpus.extend(dataclasses.replace(g, node=node) for g in h.gpus)
    return {node: NodeHealth(node, tuple(gpus)) for node, gpus in sorted(merged.items())}


def collect_digest(
    cluster: Cluster, telemetry: Telemetry, *, operator_namespace: str | None = None
) -> Digest:
    """List the nodes once, read the fleet's signals, and build the digest.

    A failed node list raises SourceError (there is no digest without nodes);
    unreadable telemetry leaves the capacity checks standing and says why.
    """
    nodes = cluster.list_nodes()
    names = [o.name(n) for n in nodes]
    hostmap = host_map(names, [])
    notes: list[str] = []
    error: str | None = None
    health: dict[str, NodeHealth] | None = None
    try:
        health = read_fleet_health(telemetry, hostmap, None)
    except TelemetryError as err:
        error = (
            f"remapped rows and Xids could not be read from {telemetry.source}: {err} "
            "(check PROMETHEUS_URL and that Prometheus answers); only capacity gaps are listed"
        )
    present: bool | None = None
    if health == {}:
        try:
            present = telemetry.count(f"{CORRECTABLE_ROWS}|{UNCORRECTABLE_ROWS}") > 0
        except TelemetryError as err:
            notes.append(f"could not tell whether remapped-row series exist: {err}")
    known = set(names)
    if health and any(h not in known for h in health):
        try:
            hostmap = host_map(names, _exporter_pods(cluster, operator_namespace))
            health = _remap(health, hostmap)
        except SourceError as err:
            notes.append(
                "some series name a host that is no node (an exporter pod name?) and the "
                f"dcgm-exporter pods could not be listed to map them: {err}"
            )
    digest = build_digest(
        nodes,
        health,
        telemetry.now(),
        metrics_source=telemetry.source,
        metrics_error=error,
        notes=notes,
        hostmap=hostmap,
        remap_series_present=present,
        inventory=dra_inventory(cluster, notes),
    )
    return with_plugin_xids(digest, cluster, telemetry, operator_namespace)


def dra_inventory(cluster: Cluster, notes: list[str]) -> Inventory | None:
    """The GPUs DRA nodes publish, with their taints (one slice list, one DeviceTaintRule list);
    a refusal is a note naming the rule, a cluster without DRA an empty inventory."""
    try:
        slices = cluster.list_dra("ResourceSlice", field_selector=f"spec.driver={draslices.DRIVER}")
    except SourceError as err:
        notes.append(f"DRA ResourceSlices not read, so GPUs tainted by the DRA driver are not counted: {err}")
        return None
    try:
        rules = cluster.list_dra("DeviceTaintRule") if slices else []
    except SourceError as err:
        notes.append(f"DeviceTaintRules not read (taints they add are not counted): {err}")
        rules = []
    inventory = draslices.build_inventory(slices, rules)
    if inventory.problems:
        notes.append(
            f"{len(inventory.problems)} part(s) of the DRA inventory unreadable: {inventory.problems[0]}"
        )
    return inventory


def with_plugin_xids(
    digest: Digest, cluster: Cluster, telemetry: Telemetry, operator_namespace: str | None
) -> Digest:
    """Add the Xids of the last 24 h in the device plugin's log to nodes with a capacity gap.

    DCGM cannot report every Xid (79, 119, 120): the plugin's log is the other witness
    (spec/findings.md, layer 5), and the one that names why a GPU left allocatable.
    """
    gaps = [f for f in digest.flagged if ALLOCATABLE_BELOW_CAPACITY in f.reasons]
    if not gaps:
        return digest
    ctx = WalkContext(cluster, telemetry, Target(None, None), None, Settings(operator_namespace))
    extra: dict[str, tuple[int, ...]] = {}
    unread: list[str] = []
    partial: list[str] = []  # read, but a byte cap left part of the last 24 h out
    for f in gaps[:PLUGIN_LOG_NODES]:
        try:
            if not ctx.operator_pods_on(f.node, "device-plugin"):
                continue  # no plugin pod (another device plugin, or none): nothing to read, not an error
        except SourceError:
            unread.append(f.node)
            continue
        log, problems = read_plugin_log(ctx, f.node)
        if log is None or not log.read or len(problems) > bool(log.gaps):
            unread.append(f.node)
        elif log.gaps:
            partial.append(f.node)
        if log is not None and log.xids:
            extra[f.node] = tuple(sorted(set(f.xids_24h) | set(log.xids)))
    notes = list(digest.notes)
    missing = "Xids DCGM cannot report (79, 119, 120) may be missing from xids_24h"
    notes += [f"device plugin log not read on {shown(unread)}: {missing}"] if unread else []
    if partial:
        notes.append(
            f"device plugin log read only in part on {shown(partial)} (past the byte cap): {missing}"
        )
    if len(gaps) > PLUGIN_LOG_NODES:
        notes.append(
            f"device plugin logs read on the first {PLUGIN_LOG_NODES} of {len(gaps)} nodes with a capacity gap"
        )
    flagged = tuple(
        dataclasses.replace(f, xids_24h=extra[f.node]) if f.node in extra else f for f in digest.flagged
    )
    return dataclasses.replace(digest, flagged=flagged, notes=tuple(notes))
