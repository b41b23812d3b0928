"""The Cluster protocol's list reads, written once over each adapter's one list primitive.

The live cluster (bot/sources/kube.py) and the snapshot (bot/sources/snapshot.py) differ in
how a kind's objects are found, not in what the layers ask: each implements `_select`, and
the selector plumbing (which kind, which namespace, which label and field selectors) lives
here.
"""

from __future__ import annotations

import msgspec

from layers.sources import DraKind, K8sObject

DRA_GROUP = "resource.k8s.io"


class Selection(msgspec.Struct, frozen=True):
    """Which objects of a kind: a namespace (None: all) and the API's selectors."""

    namespace: str | None = None
    labels: str | None = None
    fields: str | None = None


EVERYTHING = Selection()


class ListReads:
    """list_pods, list_nodes, list_daemonsets, list_runtimeclasses and list_dra over `_select`."""

    def _select(self, group: str, kind: str, where: Selection) -> list[K8sObject]:
        raise NotImplementedError

    def list_pods(
        self,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[K8sObject]:
        return self._select("", "Pod", Selection(namespace, label_selector, field_selector))

    def list_nodes(self, label_selector: str | None = None) -> list[K8sObject]:
        return self._select("", "Node", Selection(labels=label_selector))

    def list_daemonsets(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[K8sObject]:
        return self._select("apps", "DaemonSet", Selection(namespace, label_selector))

    def list_runtimeclasses(self) -> list[K8sObject]:
        return self._select("node.k8s.io", "RuntimeClass", EVERYTHING)

    def list_dra(
        self,
        kind: DraKind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[K8sObject]:
        return self._select(DRA_GROUP, kind, Selection(namespace, label_selector, field_selector))
