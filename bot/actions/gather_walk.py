"""A large fleet's bundle keeps what its target's walk reads (issue 23).

Past SLIM_PAST nodes (bot/actions/gather_pool.py) a bundle with a target pod no longer lists the
fleet's pods (the operator's on every node, every GPU pod: at 65,000 nodes a million pods masked
and written, a minute and 1.5 GB). It replays the target's walk instead, so what it keeps is what
that walk reads: the walk runs over the cluster through `Recording`, which answers the node list
from the collector's own read (listed once) and remembers every object and log the walk gets: the
pods of the nodes it examines, their events, DRA objects, the plugin logs it scans. Those go into
scenario.yaml (and the logs into logs/), so `gpubot why --bundle` walks the same reads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from bot.actions.bundle_yaml import log_entry
from layers.findings import WalkResult
from layers.sources import Cluster, K8sObject, Telemetry

if TYPE_CHECKING:
    from bot.actions.gather import Collector


class Recording:
    """The cluster as the walk sees it, remembering what it reads (reads only: the walk writes nothing)."""

    def __init__(self, cluster: Cluster, nodes: list[K8sObject]) -> None:
        self._cluster = cluster
        self._nodes = nodes
        self.objects: list[K8sObject] = []
        self.logs: dict[tuple[str, str, str, bool], str] = {}

    def list_nodes(self, label_selector: str | None = None) -> list[K8sObject]:
        if label_selector is None:
            return self._nodes  # the collector's list: the fleet is listed once
        return self._noted(self._cluster.list_nodes(label_selector=label_selector))

    def pod_log(self, namespace: str, pod: str, container: str, *args: Any, **kw: Any) -> str:
        text = self._cluster.pod_log(namespace, pod, container, *args, **kw)
        key = (namespace, pod, container, bool(args[0] if args else kw.get("previous")))
        # The longest read of a stream: a window and a tail of the same log, the replay slices either.
        if len(text) >= len(self.logs.get(key, "")):
            self.logs[key] = text
        return text

    def _noted(self, out: Any) -> Any:
        if isinstance(out, dict) and out.get("kind"):
            self.objects.append(out)
        elif isinstance(out, list):
            self.objects += [o for o in out if isinstance(o, dict) and o.get("kind")]
        return out

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._cluster, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kw: Any) -> Any:
            return self._noted(attr(*args, **kw))

        return cast("Callable[..., Any]", call)


def recorded_walk(c: Collector, telemetry: Telemetry, raw_nodes: list[K8sObject]) -> WalkResult | None:
    """Run the target's walk through Recording and keep what it read (masked, as every object)."""
    from layers.walk import open_pod, run

    rec = Recording(c.cluster, raw_nodes)
    ns, pod = c.scope.target or ("", "")
    try:
        result = run(open_pod(cast("Cluster", rec), telemetry, ns, pod))
    except Exception as err:  # a bug in one layer must not cost the whole bundle
        c.manifest.errors.append({"read": "the walk", "error": f"{type(err).__name__}: {err}"})
        return None
    have = set(c.objects)
    fresh = [o for o in rec.objects if _key(o) not in have or _key(o) in c.compact]
    c.keep(fresh)
    spooled = set(c.spooled)
    for (lns, lpod, container, previous), text in rec.logs.items():
        key = f"{lns}/{lpod}/{container}" + ("#previous" if previous else "")
        if key in spooled:
            continue
        data = c.free(text).encode()
        file = f"logs/{lpod}/{container}" + (".previous" if previous else "") + ".log"
        if c.archive.add(file, data, reserve=len(data)):
            c.logs.write(log_entry(key, data.decode("utf-8", "replace")))
            c.spooled.add(key)
            c.archive.used += len(data)
            c.archive.prepaid += len(data)
    return result


def _key(obj: K8sObject) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("kind")),
        str(obj.get("apiVersion")),
        meta.get("namespace") or "",
        meta.get("name") or "",
    )
