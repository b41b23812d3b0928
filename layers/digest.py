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

from collections.abc import Iterable, Mapping, Sequence

import msgspec.structs

from layers.digest_model import (
    ALLOCATABLE_BELOW_CAPACITY,
    REASONS,
    REMAPPED_ROWS_RISING,
    ROW_REMAP_FAILURE,
    Digest,
    FlaggedNode,
    ResourceCount,
    row_count,
)
from layers.digest_reads import PLUGIN_LOG_NODES, dra_inventory, with_plugin_xids
from layers.facts import draslices
from layers.facts import objects as o
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
from layers.owner_digest import owner_facts, vanished_cordons
from layers.sources import Cluster, K8sObject, SourceError, Telemetry, TelemetryError

# The digest's data and its reads past the nodes and the fleet's signals live beside it
# (layers/digest_model.py, layers/digest_reads.py); their names stay importable from here.
__all__ = [
    "ALLOCATABLE_BELOW_CAPACITY",
    "EXPORTER_SELECTORS",
    "PLUGIN_LOG_NODES",
    "REASONS",
    "REMAPPED_ROWS_RISING",
    "ROW_REMAP_FAILURE",
    "Digest",
    "FlaggedNode",
    "ResourceCount",
    "build_digest",
    "collect_digest",
    "dra_inventory",
    "row_count",
    "with_plugin_xids",
]

# dcgm-exporter pods, by the operator's `app` label and the standalone chart's name label.
EXPORTER_SELECTORS = ("app=nvidia-dcgm-exporter", "app.kubernetes.io/name=dcgm-exporter")


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
    # Counted for the flagged nodes only: the rest of a 65,000-node fleet is not shown.
    resources = (_resources(node) if node is not None else ()) + published
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
        gpus.extend(msgspec.structs.replace(g, node=node) for g in h.gpus)
    return {node: NodeHealth(node, tuple(gpus)) for node, gpus in sorted(merged.items())}


def collect_digest(
    cluster: Cluster, telemetry: Telemetry, *, operator_namespace: str | None = None
) -> Digest:
    """List the nodes once, read the fleet's signals, and build the digest.

    A failed node list raises SourceError (there is no digest without nodes);
    unreadable telemetry leaves the capacity checks standing and says why.
    """
    # Each node's GPU resources parsed once for the digest, however many checks ask.
    with o.parsed_once({}):
        return _collect(cluster, telemetry, operator_namespace)


def _collect(cluster: Cluster, telemetry: Telemetry, operator_namespace: str | None) -> Digest:
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
