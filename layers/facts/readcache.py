"""The per-walk read cache: the target, the sources, and every read made once per walk.

Split from layers/facts/context.py so the fact modules the walk context uses (layers/facts/drareads.py)
can take the cache without importing the context that imports them. A failed read is cached too: a 403
is reported by each layer that needed it, not retried by each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import msgspec

from layers.facts import objects as o
from layers.findings import Target
from layers.sources import Cluster, K8sObject, SourceError, Telemetry

T = TypeVar("T")


class Settings(msgspec.Struct, frozen=True):
    operator_namespace: str | None = None
    log_tail_lines: int = 500
    # The byte cap of a log read by time (layers/facts/logs.py, window): ~5,000 lines of the
    # device plugin's klog chatter, scanned in a few milliseconds.
    log_window_bytes: int = 1 << 20


class _Failed:
    def __init__(self, error: SourceError) -> None:
        self.error = error


class ReadCache:
    """The target and cached reads of one walk (the nodes; any read by key)."""

    def __init__(
        self,
        cluster: Cluster,
        telemetry: Telemetry,
        target: Target,
        pod: K8sObject | None,
        settings: Settings | None = None,
    ) -> None:
        self.cluster = cluster
        self.telemetry = telemetry
        self.target = target
        self.pod = pod  # None for a node-only walk (from the digest)
        self.settings = settings or Settings()
        self._cache: dict[object, object] = {}
        # The GPU resources of the nodes' maps, parsed once per walk (layers/facts/objects.py, parsed_once).
        self.gpu_memo: o.GpuMemo = {}

    def cached(self, key: object, read: Callable[[], T]) -> T:
        """Run a read once per walk; a SourceError is cached and re-raised."""
        if key in self._cache:
            hit = self._cache[key]
            if isinstance(hit, _Failed):
                raise hit.error
            return hit  # type: ignore[return-value]
        try:
            value = read()
        except SourceError as err:
            self._cache[key] = _Failed(err)
            raise
        self._cache[key] = value
        return value

    # --- nodes -------------------------------------------------------------------

    def nodes(self) -> list[K8sObject]:
        return self.cached("nodes", self.cluster.list_nodes)

    def node(self, name: str) -> K8sObject | None:
        """The node by name (None: no such node). From the node list once a layer has read it;
        before that, one GET of that node, so a bound pod's walk reads its own node, not a
        fleet of 65,000 (a list that failed raises its error here too, as it always did)."""
        if "nodes" in self._cache:
            by_name = self.cached("nodes_by_name", lambda: {o.name(n): n for n in self.nodes()})
            return by_name.get(name)

        def read() -> K8sObject | None:
            try:
                return self.cluster.get_node(name)
            except SourceError as err:
                if err.kind == "not_found":
                    return None
                raise

        return self.cached(("node", name), read)

    def gpu_nodes(self) -> list[K8sObject]:
        return self.cached("gpu_nodes", lambda: [n for n in self.nodes() if o.is_gpu_node(n)])

    def some_gpu_node_silent(self) -> bool:
        """Some GPU node advertises no GPU resource (its plugin never registered, or it serves DRA)."""
        return self.cached("silent_gpu_node", lambda: not all(o.advertises(n) for n in self.gpu_nodes()))

    @property
    def bound_node(self) -> str | None:
        """The pod's node, or the node of a node walk."""
        if self.pod is not None:
            return o.pod_node(self.pod)
        return self.target.node
