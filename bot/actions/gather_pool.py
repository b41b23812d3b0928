"""A node-only bundle's driver-pool peers, and node objects slimmed where the fleet is large (issue 23).

A replayed layer 3 compares a node's driver, CUDA, kernel and OS with its driver pool
(layers/facts/driverpool.py: the nodes one NVIDIADriver's `spec.nodeSelector` selects, else the
nodes of its cloud node pool with its GPU product). A node's bundle without `--pod` reads no
fleet, so it reads the pool by a label selector for it, one page of PEER_PAGE nodes and no
`continue`: one request on any fleet. A pool larger than the page is cut (said in manifest.json);
the replay then compares the node with the first PEER_PAGE of its pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from layers.facts import objects as o
from layers.facts.driverpool import POOL_LABELS, PRODUCT_LABEL, selects
from layers.facts.placement import label_value
from layers.sources import Cluster, K8sObject

PEER_PAGE = 500
# Past this many nodes a bundle's node objects keep only what the layers read (slim_node): at
# 65,000 nodes the fields no layer reads (addresses, volumes, daemon endpoints) are most of a node.
SLIM_PAST = 5_000
# Every GPU node, for a node no pool label or product narrows (a pool that is "every GPU node").
GPU_NODES = "nvidia.com/gpu.present=true"
# What a slimmed node's status keeps: the layers read these and nothing else of it.
_STATUS_KEPT = ("capacity", "allocatable", "conditions", "nodeInfo")


def pool_selector(node: K8sObject, drivers: Sequence[K8sObject]) -> tuple[str, str]:
    """(label selector, what it selects) of the node's driver pool, as layers/facts/driverpool.py
    assigns it: the first NVIDIADriver that selects the node, else its node pool and GPU product."""
    driver = next((d for d in drivers if selects(d, node)), None)
    if driver is not None:
        wanted = (driver.get("spec") or {}).get("nodeSelector") or {}
        terms = [f"{k}={label_value(v)}" for k, v in sorted(wanted.items())]
        return ",".join(terms) or GPU_NODES, f"NVIDIADriver {o.name(driver)}'s nodeSelector"
    lab = o.labels(node)
    terms = [f"{k}={label_value(lab[k])}" for k in POOL_LABELS if k in lab][:1]
    if lab.get(PRODUCT_LABEL):
        terms.append(f"{PRODUCT_LABEL}={label_value(lab[PRODUCT_LABEL])}")
    if not terms:
        return GPU_NODES, "every GPU node (no node-pool or GPU product label)"
    return ",".join(terms), "its node pool and GPU product"


def one_page(cluster: Cluster, selector: str, limit: int) -> tuple[list[K8sObject], bool]:
    """The first `limit` nodes the selector matches, and whether there were more. The live client
    asks for one page; a scenario or bundle (no such read) is sliced from its small list."""
    page = getattr(cluster, "list_nodes_page", None)
    if page is not None:
        items, more = page(selector, limit)
        return list(items), bool(more)
    nodes = cluster.list_nodes(label_selector=selector)
    return nodes[:limit], len(nodes) > limit


def slim_node(node: K8sObject) -> K8sObject:
    """The node with what the layers read of it: name, labels, annotations, taints, unschedulable,
    capacity, allocatable, conditions and nodeInfo (not addresses, images, volumes, endpoints)."""
    meta = node.get("metadata") or {}
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    out: dict[str, Any] = {
        "apiVersion": node.get("apiVersion", "v1"),
        "kind": "Node",
        "metadata": {k: meta[k] for k in ("name", "labels", "annotations", "creationTimestamp") if k in meta},
    }
    kept_spec = {k: spec[k] for k in ("taints", "unschedulable") if k in spec}
    out["spec"] = kept_spec
    out["status"] = {k: status[k] for k in _STATUS_KEPT if k in status}
    return out
