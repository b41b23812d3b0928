"""Which node or pod an alert is about, from the labels real exporters put on it.

- dcgm-exporter: `Hostname` (3.x–4.4) or `hostname` (later) is the node's name
  when the exporter runs with NODE_NAME, else its own pod's name (then mapped
  through that pod to its node); the GPU's workload pod is `pod`/`namespace`,
  renamed `exported_pod`/`exported_namespace` when Prometheus keeps the
  target's own labels (honorLabels false), and empty strings on old versions.
- kube-state-metrics: `node` (kube_node_*), `namespace` + `pod` (kube_pod_*).
- node-exporter: `instance` ("10.0.3.7:9100", a host name, "[fd00::7]:9100"),
  mapped to a node through the node list's addresses.

An alert naming a pod concerns that pod when it exists and is not itself an
exporter or GPU Operator pod; else it concerns the node: the one its node
labels name, or the node of that exporter or operand pod when it runs one per
node (a DaemonSet's). kube-state-metrics runs one pod for the whole cluster:
scraped with honorLabels false its own pod is in `namespace`/`pod` of every
alert it feeds, and where that pod runs says nothing about the alert. With
`exported_*` labels present, or `instance` at the named pod's own IP,
`namespace`/`pod` are the scrape target's own (an exporter, known by name or
not: node-problem-detector, a smartctl exporter): never the subject, at most
its node. When the cluster
cannot be read, names are taken as given (a node label first): the walk then
says in the thread what it could not read. Nothing found: None (the caller
counts it and moves on).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import msgspec

from layers.facts import objects as o
from layers.facts.context import component
from layers.facts.target import BadTarget, check_namespace, check_object_name
from layers.findings import Target
from layers.sources import Cluster, K8sObject, SourceError

NODE_LABELS = ("node", "kubernetes_node", "Hostname", "hostname")
POD_LABELS = (("exported_namespace", "exported_pod"), ("namespace", "pod"))
# Exporters whose own pods carry the alert's pod labels when a series is about something else.
EXPORTER_NAMES = frozenset(
    {
        "kube-state-metrics",
        "prometheus-node-exporter",
        "node-exporter",
        "dcgm-exporter",
        "nvidia-dcgm-exporter",
    }
)
# Owners whose pods run one per node: such a pod's node is the node its own metrics describe.
PER_NODE_OWNERS = frozenset({"DaemonSet", "Node"})  # Node: a static pod's mirror
CLUSTER_WIDE_EXPORTERS = frozenset({"kube-state-metrics"})
# A namespace with this many uncached pods named in one batch is listed once instead of read by name.
PREFETCH_MIN = 4
PODS_KEPT = 50_000  # remembered pods (found or not), past which the expired are dropped
_HOST_PORT = re.compile(r"^\[?(?P<host>[^\[\]]+?)\]?(?::\d+)?$")


class Subject(msgspec.Struct, frozen=True):
    """A node, or a pod (with the node it runs on when it has one)."""

    kind: str  # "node" or "pod"
    name: str
    namespace: str | None = None
    node: str | None = None

    @property
    def key(self) -> str:
        return f"pod:{self.namespace}/{self.name}" if self.kind == "pod" else f"node:{self.name}"

    @property
    def label(self) -> str:
        return f"pod {self.namespace}/{self.name}" if self.kind == "pod" else f"node {self.name}"

    @property
    def target(self) -> Target:
        if self.kind == "pod":
            return Target(namespace=self.namespace, pod=self.name, node=self.node)
        return Target(namespace=None, pod=None, node=self.name)

    def to_dict(self) -> dict[str, str | None]:
        return {"kind": self.kind, "name": self.name, "namespace": self.namespace, "node": self.node}

    @classmethod
    def from_dict(cls, d: Mapping[str, str | None]) -> Subject:
        return cls(str(d["kind"]), str(d["name"]), d.get("namespace"), d.get("node"))


class PodFacts(msgspec.Struct, frozen=True):
    node: str | None
    infra: bool  # an exporter's or the GPU Operator's own pod
    per_node: bool = True  # one per node (a DaemonSet's): its node is what its metrics are about
    ip: str | None = None  # status.podIP: an `instance` at it means this pod was the one scraped


class Directory(Protocol):
    """The cluster facts subject mapping needs; each may raise SourceError (unavailable)."""

    def has_node(self, name: str) -> bool: ...

    def node_at(self, address: str) -> str | None:
        """The node with this name or address (InternalIP, ExternalIP, Hostname)."""
        ...

    def pod(self, namespace: str | None, name: str) -> PodFacts | None:
        """A pod by namespace and name; namespace None looks in every namespace."""
        ...


def is_infra_pod(pod: K8sObject) -> bool:
    lab = o.labels(pod)
    return component(pod) is not None or bool(
        {lab.get("app"), lab.get("app.kubernetes.io/name")} & EXPORTER_NAMES
    )


def runs_per_node(pod: K8sObject) -> bool:
    """A DaemonSet's (or static) pod; not a Deployment's such as kube-state-metrics or the operator."""
    lab = o.labels(pod)
    if {lab.get("app"), lab.get("app.kubernetes.io/name")} & CLUSTER_WIDE_EXPORTERS:
        return False
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    kinds = {str(ref.get("kind")) for ref in owners if isinstance(ref, dict)}
    return not kinds or bool(kinds & PER_NODE_OWNERS)


def _value(labels: Mapping[str, str], key: str) -> str | None:
    v = labels.get(key, "").strip()
    return v or None


def _pod_name(ns: str | None, pod: str | None) -> tuple[str, str] | None:
    if not ns or not pod:
        return None
    try:
        return check_namespace(ns), check_object_name(pod)
    except BadTarget:
        return None


def _node_name(name: str | None) -> str | None:
    """A node name from a label. Lowercased: a host's own name may carry capitals (dcgm-exporter as a
    host service, a static scrape target), the kubelet lowercases it into the node's, and DNS names
    know no case."""
    if not name:
        return None
    try:
        return check_object_name(name.lower(), "node")
    except BadTarget:
        return None


def instance_host(instance: str) -> str | None:
    m = _HOST_PORT.match(instance.strip())
    return m.group("host") if m else None


def subject_of(labels: Mapping[str, str], directory: Directory) -> Subject | None:
    """The alert's subject, or None when its labels name nothing in this cluster."""
    try:
        return _mapped(labels, directory)
    except SourceError:
        return _as_named(labels)


def _targets_own(labels: Mapping[str, str], ns_key: str) -> bool:
    """`namespace`/`pod` are the scrape target's own when Prometheus renamed the series' to
    `exported_*` (honorLabels false): then they name the exporter, never the alert's subject."""
    return ns_key == "namespace" and bool(
        _value(labels, "exported_namespace") or _value(labels, "exported_pod")
    )


def _mapped(labels: Mapping[str, str], directory: Directory) -> Subject | None:
    infra_node: str | None = None
    host = instance_host(_value(labels, "instance") or "")
    for ns_key, pod_key in POD_LABELS:
        ref = _pod_name(_value(labels, ns_key), _value(labels, pod_key))
        if ref is None:
            continue
        facts = directory.pod(*ref)
        # A DaemonSet's pod Prometheus scraped (its IP is the instance's: node-problem-detector, an
        # exporter whose series name no pod) is the target's own too, whatever its name; a workload
        # scraped for its own metrics stays their subject.
        own = _targets_own(labels, ns_key) or (
            facts is not None and facts.per_node and bool(host) and facts.ip == host
        )
        if facts is not None and not facts.infra and not own:
            return Subject("pod", ref[1], ref[0], facts.node)
        if (
            facts is not None
            and (facts.infra or own)
            and facts.per_node
            and facts.node
            and infra_node is None
        ):
            infra_node = facts.node
    for key in NODE_LABELS:
        name = _node_name(_value(labels, key))
        if name is None:
            continue
        if directory.has_node(name):
            return Subject("node", name)
        if key in ("Hostname", "hostname") and "dcgm-exporter" in name:
            # dcgm-exporter without NODE_NAME reports its own pod's name here (a DaemonSet pod's).
            facts = directory.pod(_value(labels, "namespace"), name) or directory.pod(None, name)
            if facts is not None and facts.per_node and facts.node:
                return Subject("node", facts.node)
    if infra_node is not None:
        return Subject("node", infra_node)
    node = directory.node_at(host) if host else None
    if host and node is None and host != host.lower():
        node = directory.node_at(host.lower())
    return Subject("node", node) if node else None


def _as_named(labels: Mapping[str, str]) -> Subject | None:
    """The cluster cannot be read: trust the labels (a node first, it is what alerts name most)."""
    for key in NODE_LABELS:
        name = _node_name(_value(labels, key))
        if name is not None:
            return Subject("node", name)
    for ns_key, pod_key in POD_LABELS:
        ref = _pod_name(_value(labels, ns_key), _value(labels, pod_key))
        if ref is not None and not _targets_own(labels, ns_key):
            return Subject("pod", ref[1], ref[0])
    host = _node_name(instance_host(_value(labels, "instance") or ""))
    if host is not None and not re.match(r"^[0-9.]+$", host):
        return Subject("node", host)
    return None


class ClusterDirectory:
    """Directory over the cluster reader, cached briefly: a burst of alerts reads the node list once.

    A name missing from a node list older than `recheck_s` lists again, so a node that just
    joined is found; pods are remembered (found or not) for `ttl_s`.
    """

    def __init__(
        self,
        cluster: Cluster,
        *,
        ttl_s: float = 60.0,
        recheck_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.ttl_s = ttl_s
        self.recheck_s = recheck_s
        self.clock = clock
        self._lock = threading.Lock()
        self._nodes: tuple[float, frozenset[str], dict[str, str]] | None = None
        self._pods: dict[tuple[str | None, str], tuple[float, PodFacts | None]] = {}

    def _node_index(self, fresh_after: float | None = None) -> tuple[frozenset[str], dict[str, str]]:
        now = self.clock()
        with self._lock:
            cached = self._nodes
        if (
            cached is not None
            and now - cached[0] < self.ttl_s
            and (fresh_after is None or cached[0] >= fresh_after)
        ):
            return cached[1], cached[2]
        nodes = self.cluster.list_nodes()
        names = frozenset(o.name(n) for n in nodes)
        addresses: dict[str, str] = {}
        for n in nodes:
            for a in (n.get("status") or {}).get("addresses") or []:
                if isinstance(a, dict) and a.get("address"):
                    addresses.setdefault(str(a["address"]), o.name(n))
        with self._lock:
            self._nodes = (now, names, addresses)
        return names, addresses

    def _lookup(self, find: Callable[[frozenset[str], dict[str, str]], str | None]) -> str | None:
        names, addresses = self._node_index()
        found = find(names, addresses)
        if found is None:
            with self._lock:
                age = self.clock() - self._nodes[0] if self._nodes else self.ttl_s
            if age >= self.recheck_s:
                found = find(*self._node_index(fresh_after=self.clock()))
        return found

    def has_node(self, name: str) -> bool:
        return self._lookup(lambda names, _a: name if name in names else None) is not None

    def node_at(self, address: str) -> str | None:
        return self._lookup(lambda names, addrs: address if address in names else addrs.get(address))

    def pod(self, namespace: str | None, name: str) -> PodFacts | None:
        now = self.clock()
        with self._lock:
            hit = self._pods.get((namespace, name))
            if hit is not None and now - hit[0] < self.ttl_s:
                return hit[1]
            if len(self._pods) > PODS_KEPT:  # a stream of distinct pod names must not grow this forever
                self._pods = {k: v for k, v in self._pods.items() if now - v[0] < self.ttl_s}
        facts = self._read_pod(namespace, name)
        with self._lock:
            self._pods[(namespace, name)] = (now, facts)
        return facts

    def prefetch(self, label_sets: Iterable[Mapping[str, str]]) -> None:
        """Read in bulk the pods a batch of alerts names: a namespace with several pods not cached is
        listed once (10,000 alerts naming deleted pods: a list per namespace, not 10,000 GETs).
        A list that fails leaves the names to the one-by-one reads (and their own errors)."""
        now = self.clock()
        wanted: dict[str, set[str]] = {}
        with self._lock:
            for labels in label_sets:
                for ns_key, pod_key in POD_LABELS:
                    ref = _pod_name(_value(labels, ns_key), _value(labels, pod_key))
                    if ref is None:
                        continue
                    hit = self._pods.get(ref)
                    if hit is None or now - hit[0] >= self.ttl_s:
                        wanted.setdefault(ref[0], set()).add(ref[1])
        for namespace, names in wanted.items():
            if len(names) < PREFETCH_MIN:
                continue
            try:
                pods = self.cluster.list_pods(namespace)
            except SourceError:
                continue
            found = {o.name(p): _facts(p) for p in pods}
            with self._lock:
                if len(self._pods) + len(names) > PODS_KEPT:
                    self._pods = {k: v for k, v in self._pods.items() if now - v[0] < self.ttl_s}
                for name in names:
                    self._pods[(namespace, name)] = (now, found.get(name))

    def _read_pod(self, namespace: str | None, name: str) -> PodFacts | None:
        if namespace is None:
            pods = self.cluster.list_pods(None, field_selector=f"metadata.name={name}")
            pod = pods[0] if len(pods) == 1 else None
        else:
            try:
                pod = self.cluster.get_pod(namespace, name)
            except SourceError as err:
                if err.kind in ("not_found", "forbidden", "bad_input"):
                    return None
                raise
        return None if pod is None else _facts(pod)


def _facts(pod: K8sObject) -> PodFacts:
    ip = (pod.get("status") or {}).get("podIP")
    return PodFacts(
        node=o.pod_node(pod),
        infra=is_infra_pod(pod),
        per_node=runs_per_node(pod),
        ip=str(ip) if ip else None,
    )
