"""A node-only bundle's driver-pool peers, and node objects slimmed where the fleet is large (issue 23).

A replayed layer 3 compares a node's driver, CUDA, kernel and OS with its driver pool
(layers/facts/driverpool.py: the nodes one NVIDIADriver's `spec.nodeSelector` selects, else the
nodes of its cloud node pool with its GPU product). A node's bundle without `--pod` reads no
fleet, so it reads the pool by a label selector for it, one page of PEER_PAGE nodes and no
`continue`: one request on any fleet. A pool larger than the page is cut (said in manifest.json);
the replay then compares the node with the first PEER_PAGE of its pool.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from bot.actions.detector import scrub
from bot.actions.redact import mask_messages, mask_object
from layers import remedy as rm
from layers.facts import objects as o
from layers.facts.driverpool import POOL_LABELS, PRODUCT_LABEL, selects
from layers.facts.placement import label_value
from layers.sources import Cluster, K8sObject


class Collector(Protocol):
    """What these reads use of bot/actions/gather.py's Collector (which imports this module)."""

    cluster: Cluster
    manifest: rm.Manifest
    large: bool
    objects: dict[tuple[str, str, str, str], K8sObject]
    compact: set[tuple[str, str, str, str]]

    def read(self, what: str, fn: Callable[[], Any], default: Any) -> Any: ...

    def keep(self, objs: Sequence[K8sObject]) -> list[K8sObject]: ...

    def known(self, cleans: Sequence[K8sObject]) -> None: ...

    def free(self, text: str) -> str: ...


PEER_PAGE = 500
# Past this many nodes a bundle's node objects keep only what the layers read (slim_node): at
# 65,000 nodes the fields no layer reads (addresses, volumes, daemon endpoints) are most of a node.
SLIM_PAST = 5_000
# Past SLIM_PAST, the readable gpu_nodes.* files describe this many nodes (scenario.yaml holds all).
TEXT_NODES = 500
# Every GPU node, for a node no pool label or product narrows (a pool that is "every GPU node").
GPU_NODES = "nvidia.com/gpu.present=true"
# What a slimmed node's status keeps: the layers read these and nothing else of it.
_STATUS_KEPT = ("capacity", "allocatable", "conditions", "nodeInfo")


def pool_selectors(node: K8sObject, drivers: Sequence[K8sObject]) -> list[tuple[str, str]]:
    """(label selector, what it selects) of the node's driver pool as layers/facts/driverpool.py
    assigns it: each NVIDIADriver that selects the node (where several overlap, every one of them:
    which pool is the node's is decided from what the bundle holds, never by their names), else its
    node pool and GPU product."""
    matching = sorted((d for d in drivers if selects(d, node)), key=o.name)
    if matching:
        out: list[tuple[str, str]] = []
        for driver in matching:
            wanted = (driver.get("spec") or {}).get("nodeSelector") or {}
            terms = [f"{k}={label_value(v)}" for k, v in sorted(wanted.items())]
            out.append((",".join(terms) or GPU_NODES, f"NVIDIADriver {o.name(driver)}'s nodeSelector"))
        return out
    return [pool_selector_of_node(node)]


def pool_selector_of_node(node: K8sObject) -> tuple[str, str]:
    """The selector of a node no NVIDIADriver selects: its node pool and GPU product."""
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


class NodeMasker:
    """mask_object of slimmed nodes, fast on a fleet: a fleet's nodes repeat their label values,
    quantities and nodeInfo, so each distinct part is masked once (by mask_object itself, on an
    object holding that part alone) and each distinct string scrubbed once. The same dicts as
    `mask_object(slim_node(node))` (tests/test_bundle_slim.py), at 65,000 nodes a few seconds, not a minute."""

    def __init__(self) -> None:
        self._parts: dict[str, Any] = {}
        self._plain: dict[str, bool] = {}  # key -> a value under it is scrubbed as it is (no secret key)
        self._scrubbed: dict[str, str] = {}

    def _part(self, where: str, value: Any) -> Any:
        key = where + json.dumps(value, sort_keys=True)
        if key not in self._parts:
            holder: dict[str, Any] = {"kind": "Node"}
            if where in ("labels", "annotations"):
                holder["metadata"] = {where: value}
                self._parts[key] = mask_object(holder)["metadata"][where]
            else:
                holder[where] = value
                self._parts[key] = mask_object(holder)[where]
        return self._parts[key]

    def _string(self, key: str, value: str) -> str:
        if key not in self._plain:
            probe = "gpubot-probe-value"
            self._plain[key] = mask_object({"kind": "Node", "metadata": {"labels": {key: probe}}})[
                "metadata"
            ]["labels"][key] == scrub(probe)
        if not self._plain[key]:
            return str(self._part("labels", {key: value})[key])
        if value not in self._scrubbed:
            self._scrubbed[value] = scrub(value)
        return self._scrubbed[value]

    def mask(self, node: K8sObject) -> K8sObject:
        slim = slim_node(node)
        meta = slim["metadata"]
        out: dict[str, Any] = {"apiVersion": slim["apiVersion"], "kind": "Node", "metadata": {}}
        for k, v in meta.items():
            if k == "labels" and isinstance(v, dict):
                out["metadata"][k] = {
                    lk: self._string(lk, lv) if isinstance(lv, str) else self._part(k, {lk: lv})[lk]
                    for lk, lv in v.items()
                }
            elif k == "annotations" and isinstance(v, dict):
                out["metadata"][k] = {ak: self._part(k, {ak: av})[ak] for ak, av in v.items()}
            elif isinstance(v, str):
                out["metadata"][k] = self._string(k, v)
            else:
                out["metadata"][k] = self._part("metadata", {k: v})[k]
        out["spec"] = self._part("spec", slim["spec"])
        out["status"] = {k: self._part("status", {k: v})[k] for k, v in slim["status"].items()}
        return out


def pool_peers(c: Collector, nodes: list[K8sObject], drivers: list[K8sObject]) -> list[K8sObject]:
    """The node's driver-pool peers (bot/actions/gather_pool.py), slimmed: one page of them, so
    a replayed layer 3 compares the node within its pool as the live walk does."""
    if not nodes:
        return []
    peers: list[K8sObject] = []
    seen = {o.name(nodes[0])}
    for selector, what in pool_selectors(nodes[0], drivers):
        page, more = c.read(
            f"nodes -l {selector}", functools.partial(one_page, c.cluster, selector, PEER_PAGE), ([], False)
        )
        mine = [slim_node(n) for n in page if o.name(n) not in seen]
        seen.update(o.name(n) for n in mine)
        peers += c.keep(mine)
        why = f"a node's bundle holds its own node and its driver pool's ({what}: -l {selector}, "
        why += f"{len(mine)} other node(s), slimmed), no other: collect with --pod NAMESPACE/POD "
        c.manifest.skipped.append(
            {"what": "the other nodes", "why": why + "for a walk that weighs the fleet"}
        )
        if more:
            c.manifest.cut.append(
                {
                    "file": "scenario.yaml",
                    "reason": f"driver pool page (-l {selector})",
                    "kept_nodes": len(page),
                }
            )
    return peers


def keep_slim(c: Collector, nodes: Sequence[K8sObject]) -> list[K8sObject]:
    """A large fleet's nodes, slimmed to what the layers read and masked (gather_pool.NodeMasker)."""
    masker, out = NodeMasker(), []
    cleans = [masker.mask(node) for node in nodes]
    c.known(cleans)
    for clean in cleans:
        mask_messages(clean, c.free)
        key = ("Node", str(clean.get("apiVersion")), "", o.name(clean))
        c.objects[key] = clean
        c.compact.add(key)
        out.append(clean)
    c.manifest.skipped.append(
        {
            "what": "node fields no layer reads",
            "why": f"past {SLIM_PAST:,} nodes ({len(out):,} here) a node keeps its name, labels, "
            "annotations, taints, unschedulable, capacity, allocatable, conditions and nodeInfo "
            "(docs/scale.md)",
        }
    )
    return out


def text_nodes(c: Collector, scoped: list[K8sObject]) -> list[K8sObject]:
    """The nodes the readable gpu_nodes.* files describe: past SLIM_PAST, the first TEXT_NODES
    (kubectl-like tables of 65,000 nodes nobody reads, each description a scan of the pods);
    scenario.yaml holds every node."""
    if not c.large or len(scoped) <= TEXT_NODES:
        return scoped
    for file in ("gpu_nodes.labels", "gpu_nodes.status", "gpu_nodes.events", "gpu_nodes.descr"):
        c.manifest.cut.append(
            {"file": file, "reason": "large fleet", "kept_nodes": TEXT_NODES, "nodes": len(scoped)}
        )
    return scoped[:TEXT_NODES]
