"""An in-memory cluster: the objects and logs of a scenario or a bundle.

It implements layers.sources.Cluster (and ClusterWriter, so a cordon can be
tried against a scenario). The fake API server in the tests serves from this
same store, so the product and the fake agree on every selector.
"""

from __future__ import annotations

import copy
import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from bot.sources.listing import EVERYTHING, ListReads, Selection
from bot.sources.selectors import node_named, parse_field_selector, parse_label_selector
from layers.facts.logsigs import line_time
from layers.sources import K8sObject, SourceError

# Custom resources the layers read, by plural, as (group, kind).
CUSTOM_KINDS: dict[str, tuple[str, str]] = {
    "clusterpolicies": ("nvidia.com", "ClusterPolicy"),
    "nvidiadrivers": ("nvidia.com", "NVIDIADriver"),
    "gpuclusters": ("nvidia.com", "GPUCluster"),
    "computedomains": ("resource.nvidia.com", "ComputeDomain"),
    # Kueue's Workloads (namespaced; listed across namespaces): a gated pod's quota condition.
    "workloads": ("kueue.x-k8s.io", "Workload"),
    # The kubelet's topology manager policy behind a TopologyAffinityError (layers/admission.py).
    "noderesourcetopologies": ("topology.node.k8s.io", "NodeResourceTopology"),
}


def api_group(obj: Mapping[str, Any]) -> str:
    api_version = str(obj.get("apiVersion") or "v1")
    return api_version.split("/")[0] if "/" in api_version else ""


def log_key(namespace: str, pod: str, container: str, previous: bool = False) -> str:
    return f"{namespace}/{pod}/{container}" + ("#previous" if previous else "")


def lines_since(text: str, start: float, now: float) -> str:
    """The lines printed at or after `start`. The runtime stamps every line; a snapshot has only the
    lines' own timestamps (klog, RFC 3339, Go log): a line without one was printed with the dated line
    before it (a multi-line message), leading undated lines with the first dated one, and a log with
    no dated line at all is kept whole (nothing says when it was printed)."""
    lines = text.splitlines(keepends=True)
    stamps = [line_time(ln, now) for ln in lines]
    first = next((t for t in stamps if t is not None), None)
    if first is None:
        return text
    kept: list[str] = []
    at = first
    for line, ts in zip(lines, stamps, strict=True):
        at = ts if ts is not None else at
        if at >= start:
            kept.append(line)
    return "".join(kept)


def _storage_key(obj: K8sObject) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """JSON merge patch (RFC 7386); equals a strategic merge for the map fields a cordon touches."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value


class SnapshotCluster(ListReads):
    """Objects by kind, indexed for the reads the layers make."""

    def __init__(
        self,
        objects: Iterable[K8sObject],
        logs: Mapping[str, str] | None = None,
        source: str = "scenario",
        now: float | None = None,
    ) -> None:
        self._source = source
        self.now = now  # the snapshot's instant: what `since_seconds` counts back from
        self._by_kind: dict[tuple[str, str], list[K8sObject]] = defaultdict(list)
        self._named: dict[tuple[str, str, str, str], K8sObject] = {}
        self._events_by_object: dict[tuple[str, str, str], list[K8sObject]] = defaultdict(list)
        self._lock = threading.Lock()
        self._unsorted: set[tuple[str, str]] = set()
        self._pods_by_node: dict[str, list[K8sObject]] | None = None
        self._resource_version = 1
        for obj in objects:
            self.add(obj)
        self.logs: dict[str, str] = dict(logs or {})

    # --- building --------------------------------------------------------------

    def add(self, obj: K8sObject) -> None:
        kind = str(obj.get("kind") or "")
        group = api_group(obj)
        meta = obj.setdefault("metadata", {})
        meta.setdefault("resourceVersion", str(self._resource_version))
        self._by_kind[(group, kind)].append(obj)
        self._unsorted.add((group, kind))
        if kind == "Pod" and group == "":
            self._pods_by_node = None
        self._named[(group, kind, meta.get("namespace") or "", meta.get("name") or "")] = obj
        if kind == "Event" and group == "":
            inv = obj.get("involvedObject") or {}
            key = (str(inv.get("namespace") or ""), str(inv.get("kind") or ""), str(inv.get("name") or ""))
            self._events_by_object[key].append(obj)

    def remove(self, group: str, kind: str, namespace: str, name: str) -> K8sObject | None:
        """Take an object out (a deleted Job and its pods, in the fake API); None when absent."""
        with self._lock:
            obj = self._named.pop((group, kind, namespace, name), None)
            if obj is not None:
                self._by_kind[(group, kind)] = [o for o in self._by_kind[(group, kind)] if o is not obj]
                if kind == "Pod" and group == "":
                    self._pods_by_node = None
            return obj

    def _kind(self, group: str, kind: str) -> list[K8sObject]:
        """A kind's objects in the API server's list order: by "namespace/name", as etcd keys sort."""
        if (group, kind) in self._unsorted:
            with self._lock:  # bot workers read concurrently: sort once, under the lock
                if (group, kind) in self._unsorted:
                    self._by_kind[(group, kind)].sort(key=_storage_key)
                    self._unsorted.discard((group, kind))
        return self._by_kind.get((group, kind), [])

    def stored(self, group: str, kind: str, node: str | None = None) -> list[K8sObject]:
        """A kind's objects as stored (for the fake API server); a node's pods when `node` is given."""
        if node is not None and (group, kind) == ("", "Pod"):
            return self._pods_on(node)
        return self._kind(group, kind)

    def named(self, group: str, kind: str, namespace: str, name: str) -> K8sObject | None:
        return self._named.get((group, kind, namespace, name))

    def _pods_on(self, node: str) -> list[K8sObject]:
        """The pods bound to a node, in list order: walks read pods node by node."""
        by_node = self._pods_by_node
        if by_node is None:
            pods = self._kind("", "Pod")
            with self._lock:
                by_node = defaultdict(list)
                for p in pods:
                    by_node[str((p.get("spec") or {}).get("nodeName") or "")].append(p)
                self._pods_by_node = by_node
        return by_node.get(node, [])

    @property
    def objects(self) -> list[K8sObject]:
        return [o for objs in self._by_kind.values() for o in objs]

    # --- Cluster ---------------------------------------------------------------

    @property
    def source(self) -> str:
        return self._source

    def _select(self, group: str, kind: str, where: Selection = EVERYTHING) -> list[K8sObject]:
        namespace, label_selector, field_selector = where.namespace, where.labels, where.fields
        match_labels = parse_label_selector(label_selector)
        match_fields = parse_field_selector(field_selector)
        out = []
        node = node_named(field_selector) if (group, kind) == ("", "Pod") else None
        for obj in self._kind(group, kind) if node is None else self._pods_on(node):
            meta = obj.get("metadata", {})
            if namespace is not None and meta.get("namespace") != namespace:
                continue
            if not match_labels(meta.get("labels") or {}):
                continue
            if field_selector and not match_fields(obj):
                continue
            out.append(obj)
        return out

    def _get(self, group: str, kind: str, namespace: str, name: str, resource: str) -> K8sObject:
        obj = self._named.get((group, kind, namespace, name))
        if obj is None:
            where = f" in namespace {namespace}" if namespace else ""
            raise SourceError(
                "not_found",
                f'{resource} "{name}" not found{where}',
                resource=resource,
                namespace=namespace or None,
            )
        return obj

    def get_pod(self, namespace: str, name: str) -> K8sObject:
        return self._get("", "Pod", namespace, name, "pods")

    def get_node(self, name: str) -> K8sObject:
        return self._get("", "Node", "", name, "nodes")

    def get_configmap(self, namespace: str, name: str) -> K8sObject:
        return self._get("", "ConfigMap", namespace, name, "configmaps")

    def get_persistent_volume_claim(self, namespace: str, name: str) -> K8sObject:
        return self._get("", "PersistentVolumeClaim", namespace, name, "persistentvolumeclaims")

    def get_persistent_volume(self, name: str) -> K8sObject:
        return self._get("", "PersistentVolume", "", name, "persistentvolumes")

    def list_events(
        self, namespace: str | None, kind: str | None = None, name: str | None = None
    ) -> list[K8sObject]:
        if name is not None:
            # Events of a cluster-scoped object (a Node) live in "default" but
            # name no namespace in involvedObject.
            key_ns = namespace if kind != "Node" else ""
            events = list(self._events_by_object.get((key_ns or "", kind or "", name), ()))
            if kind is None:
                events = [
                    e
                    for (ns, _k, n), evs in self._events_by_object.items()
                    if ns == (namespace or "") and n == name
                    for e in evs
                ]
            return sorted(events, key=_storage_key)
        return self._select("", "Event", Selection(namespace))

    def list_custom(self, group: str, version: str, plural: str) -> list[K8sObject]:
        g, kind = CUSTOM_KINDS.get(plural, (group, plural))
        return self._select(g, kind)

    def pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        previous: bool = False,
        tail_lines: int | None = 500,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
    ) -> str:
        text = self.logs.get(log_key(namespace, pod, container, previous))
        if text is None:
            what = "previous terminated container" if previous else "container"
            raise SourceError(
                "not_found",
                f'{what} "{container}" in pod "{pod}" has no log',
                resource="pods/log",
                namespace=namespace,
            )
        if since_seconds is not None and self.now is not None:
            text = lines_since(text, self.now - since_seconds, self.now)
        if tail_lines is not None and tail_lines >= 0:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-tail_lines:]) if tail_lines else ""
        if limit_bytes is not None and limit_bytes >= 0:
            raw = text.encode("utf-8")
            if len(raw) > limit_bytes:
                # As the wire would: mid-line, mid-character.
                text = raw[:limit_bytes].decode("utf-8", "replace")
        return text

    # --- ClusterWriter -----------------------------------------------------------

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> K8sObject:
        with self._lock:
            node = self.get_node(name)
            merge_patch(node, patch)
            self._resource_version += 1
            node["metadata"]["resourceVersion"] = str(self._resource_version + 1000)
            return node
