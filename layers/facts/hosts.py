"""Which series belong to which node and which workload (spec/findings.md, layer 4).

A DCGM series names its node by label `Hostname` or `hostname`; where the exporter runs
without NODE_NAME that label holds the exporter pod's name, mapped back through the pod's
spec.nodeName. A series names its workload by the exporter's pod labels (or a DRA claim's).
The selectors here are what every fleet-wide read sends (layers/facts/gpufacts.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from layers.facts import objects as o
from layers.sources import K8sObject, Selector

HOST_LABELS = ("Hostname", "hostname")
# Exporter labels naming the workload; Prometheus renames them exported_* when
# the scrape does not honour them, and old exporters used pod_name/pod_namespace.
# kubernetes_namespace/kubernetes_pod_name: older prometheus charts' `kubernetes-pods` scrape job.
POD_LABELS = (
    ("exported_namespace", "exported_pod"),
    ("namespace", "pod"),
    ("pod_namespace", "pod_name"),
    ("kubernetes_namespace", "kubernetes_pod_name"),
)

PodRef = tuple[str, str]  # (namespace, pod)
ClaimRef = tuple[str, str]  # (namespace, ResourceClaim)
# dcgm-exporter's labels for a GPU a DRA claim holds (KUBERNETES_ENABLE_DRA=true).
DRA_CLAIM_LABELS = ("dra_claim_namespace", "dra_claim_name")


class HostMap(msgspec.Struct, frozen=True):
    """Resolves a series' Hostname/hostname label to a node name."""

    nodes: frozenset[str] = frozenset()
    exporters: Mapping[str, str] = msgspec.field(default_factory=dict)  # exporter pod name -> node

    def node_of(self, labels: Mapping[str, str]) -> str | None:
        """The node a series belongs to, or None when it names no host."""
        host, _ = host_label(labels)
        if not host:
            return None
        if host in self.nodes:
            return host
        return self.exporters.get(host, host)

    def hosts_for(self, nodes: Iterable[str]) -> list[str]:
        """Label values that mean these nodes: their names and their exporter pods' names."""
        wanted = set(nodes)
        values = set(wanted)
        values.update(pod for pod, node in self.exporters.items() if node in wanted)
        return sorted(values)


def host_map(nodes: Iterable[str], exporter_pods: Iterable[K8sObject]) -> HostMap:
    """Build the map from the node names and the dcgm-exporter pods (their spec.nodeName)."""
    exporters = {o.name(p): node for p in exporter_pods if (node := o.pod_node(p))}
    return HostMap(nodes=frozenset(nodes), exporters=exporters)


def host_label(labels: Mapping[str, str]) -> tuple[str, str]:
    """(value, label name) of the series' host label; ("", "") when it has none."""
    for key in HOST_LABELS:
        value = labels.get(key)
        if value:
            return value, key
    return "", ""


def selector_for(nodes: Iterable[str], hostmap: HostMap | None = None) -> list[Selector]:
    """Selector alternatives matching every series of these nodes, whichever host label spelling."""
    values = hostmap.hosts_for(nodes) if hostmap else sorted(set(nodes))
    return [{key: values} for key in HOST_LABELS]


def pod_selector(namespace: str, pod: str) -> list[Selector]:
    """Selector alternatives matching series whose pod labels name this pod."""
    return [{ns_key: [namespace], pod_key: [pod]} for ns_key, pod_key in POD_LABELS]


def pod_of(labels: Mapping[str, str]) -> PodRef | None:
    """The workload a series names, preferring exported_* (the exporter's own labels)."""
    for ns_key, pod_key in POD_LABELS:
        ns, pod = labels.get(ns_key), labels.get(pod_key)
        if ns and pod:
            return ns, pod
    return None


def promql_matcher(labels: Mapping[str, str]) -> str:
    """A PromQL label matcher from label pairs, e.g. `{Hostname="gpu-7",gpu="3"}`."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"
