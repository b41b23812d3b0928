"""The must-gather collector's reads: what is collected, masked and written, file by file.

bot/actions/bundle_writer.py is the entry point (collect_bundle); this module holds the
Collector (its reads, the objects it keeps, the logs it spools) and the Kubernetes files, in the
order of hack/must-gather.sh. The DRA objects are bot/actions/gather_dra.py, the DCGM series
bot/actions/gather_series.py, nvidia-bug-report bot/actions/bug_report.py; the archive and its
budget bot/actions/archive.py; scenario.yaml bot/actions/bundle_yaml.py.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from bot.actions import bundle_text as bt
from bot.actions import gather_pool as gp
from bot.actions.archive import Archive
from bot.actions.bundle_yaml import log_entry
from bot.actions.bundlemask import BundleMasker
from bot.actions.redact import mask_messages, mask_object
from layers import remedy as rm
from layers.facts import objects as o
from layers.facts.context import OPERATOR_SELECTORS, trusted_pods
from layers.facts.trusted import operator_trust
from layers.sources import Cluster, K8sObject, SourceError, Telemetry

ExecFn = Callable[[str, str, str, Sequence[str]], bytes]
Progress = Callable[[str], None]


class Collector:
    def __init__(
        self,
        cluster: Cluster,
        telemetry: Telemetry,
        archive: Archive,
        scope: rm.GatherScope,
        progress: Progress,
    ) -> None:
        self.cluster = cluster
        self.telemetry = telemetry
        self.archive = archive
        self.scope = scope
        self.progress = progress
        self.manifest = archive.manifest
        self.now = archive.now
        self.failed: dict[str, SourceError] = {}  # what -> the error its read raised, as raised
        self.operator_ns: str | None = None  # the operator's namespace, once pods() found it
        self.objects: dict[tuple[str, str, str, str], K8sObject] = {}
        self.logs = tempfile.TemporaryFile()  # noqa: SIM115 - closed in collect_bundle
        # A node's bundle without a target: every read is of that node or by name, none of the fleet.
        self.node_only = scope.node is not None and not scope.want_fleet_gpu_pods()
        self.series: list[dict[str, Any]] = []
        self.spooled: set[str] = set()  # the log entries in scenario.yaml
        # Past gp.SLIM_PAST nodes: nodes kept slimmed (self.compact, written one JSON line each) and,
        # with a target, what its walk reads kept instead of the fleet's pods (gather_walk.py).
        self.large = False
        self.compact: set[tuple[str, str, str, str]] = set()
        self.raw_nodes: list[K8sObject] = []
        # Free text (logs, messages, summary.md, errors) is masked default-deny, knowing the names kept.
        self.masker = BundleMasker()
        self.free, self.known = self.masker.free, self.masker.known

    # --- reads ---------------------------------------------------------------------

    def read(self, what: str, fn: Callable[[], Any], default: Any) -> Any:
        try:
            return fn()
        except SourceError as err:
            self.manifest.errors.append({"read": what, "error": str(err)})
            self.failed[what] = err
            return default

    def keep(self, objs: Sequence[K8sObject]) -> list[K8sObject]:
        """Masked copies, remembered for scenario.yaml (one per kind/namespace/name); their names are
        known to the free text from then on, their messages masked as free text."""
        cleans = [mask_object(obj) for obj in objs]
        self.known(cleans)
        out = []
        for clean in cleans:
            mask_messages(clean, self.free)
            if clean.get("kind") == "Node":
                (clean.get("status") or {}).pop("images", None)  # large and never read
            meta = clean.get("metadata") or {}
            key = (
                str(clean.get("kind")),
                str(clean.get("apiVersion")),
                meta.get("namespace") or "",
                meta.get("name") or "",
            )
            self.objects[key] = clean
            self.compact.discard(key)
            out.append(clean)
        return out

    def _from_start(self, file: str, ns: str, pod: str, container: str, previous: bool) -> str:
        """A plugin's log as layer 5 reads it (layers/facts/logs.py): from the container's start, as
        the unhealthy mark is printed once, then its tail. Over half the bytes cap, the start and the
        end keep half each and the middle is left out (said in manifest.json)."""
        half = self.archive.caps.log_bytes // 2
        head = self.cluster.pod_log(ns, pod, container, previous=previous, tail_lines=None, limit_bytes=half)
        if len(head.encode()) < half:
            return head
        tail = self.cluster.pod_log(
            ns, pod, container, previous=previous, tail_lines=self.archive.caps.log_tail_lines
        ).encode()[-half:]
        tail = tail[tail.find(b"\n") + 1 :] if b"\n" in tail else tail
        whole = head[: head.rfind("\n") + 1]
        self.manifest.cut.append(
            {
                "file": file,
                "reason": "log bytes cap",
                "kept": "its start and its end, the middle left out",
                "kept_bytes": len(whole.encode()) + len(tail),
            }
        )
        return whole + tail.decode("utf-8", "replace")

    def log(
        self, file: str, ns: str, pod: str, container: str, previous: bool, *, from_start: bool = False
    ) -> None:
        try:
            raw = (
                self._from_start(file, ns, pod, container, previous)
                if from_start
                else self.cluster.pod_log(
                    ns, pod, container, previous=previous, tail_lines=self.archive.caps.log_tail_lines
                )
            )
        except SourceError as err:
            if err.kind != "not_found":
                self.manifest.errors.append({"read": f"log {ns}/{pod}/{container}", "error": str(err)})
            elif not previous:
                self.manifest.skipped.append({"what": file, "why": "the container has no log yet"})
            return
        caps = self.archive.caps
        if raw.count("\n") >= caps.log_tail_lines and not from_start:
            self.manifest.cut.append(
                {"file": file, "reason": "log tail lines cap", "kept_lines": caps.log_tail_lines}
            )
        data = self.free(raw).encode()
        if len(data) > caps.log_bytes:
            tail = data[-caps.log_bytes :]
            tail = tail[tail.find(b"\n") + 1 :] if b"\n" in tail else tail  # whole lines only
            self.manifest.cut.append(
                {
                    "file": file,
                    "reason": "log bytes cap",
                    "bytes_dropped": len(data) - len(tail),
                    "kept_bytes": len(tail),
                }
            )
            data = tail
        text = data.decode("utf-8", "replace")
        # Twice the size: the readable file and its copy in scenario.yaml.
        if self.archive.add(file, data, reserve=len(data)):
            key = f"{ns}/{pod}/{container}" + ("#previous" if previous else "")
            self.logs.write(log_entry(key, text))
            self.spooled.add(key)
            self.archive.used += len(data)
            self.archive.prepaid += len(data)

    # --- the collection, in the order of hack/must-gather.sh ----------------------------

    def cluster_objects(self) -> tuple[list[K8sObject], list[K8sObject]]:
        self.progress("cluster policy and NVIDIA drivers")
        policies = self.keep(
            self.read(
                "clusterpolicies", lambda: self.cluster.list_custom("nvidia.com", "v1", "clusterpolicies"), []
            )
        )
        if policies:
            self.archive.add("cluster_policy.yaml", bt.to_yaml(policies), essential=True)
        else:
            self.archive.add("cluster_policy.missing", "no ClusterPolicy found\n", essential=True)
        drivers = self.keep(
            self.read(
                "nvidiadrivers",
                lambda: self.cluster.list_custom("nvidia.com", "v1alpha1", "nvidiadrivers"),
                [],
            )
        )
        self.archive.add("nvidiadrivers.yaml", bt.to_yaml(drivers), essential=True)
        self.keep(self.read("runtimeclasses", self.cluster.list_runtimeclasses, []))
        self.progress("nodes")
        if self.node_only:
            # One node's bundle replays the pods on it, whose walks read their node by name: the
            # fleet's node list (130 pages and 1.5 GB at 65,000 nodes) is not read nor kept.
            # Layer 3's comparisons with the rest of the fleet (driver or kernel skew, another pool's
            # driver) need it: a bundle with a target pod (--pod, the Slack button's) reads it whole.
            node = self.scope.node or ""
            nodes = self.keep(self.read("nodes", lambda: [self.cluster.get_node(node)], []))
            nodes += gp.pool_peers(self, nodes, drivers)
        else:
            raw = self.read("nodes", self.cluster.list_nodes, [])
            self.large = len(raw) > gp.SLIM_PAST
            self.raw_nodes = raw if self.large and self.scope.target else []
            nodes = gp.keep_slim(self, raw) if self.large else self.keep(raw)
        return nodes, self.scope.scoped_nodes(nodes)

    def _lister(self, label_sel: str, field_sel: str | None) -> Callable[[], list[K8sObject]]:
        return lambda: self.cluster.list_pods(label_selector=label_sel, field_selector=field_sel)

    def pods(self, setting: str | None = None) -> tuple[list[K8sObject], list[K8sObject]]:
        """(operator pods, operand pods) in scope, plus the workload pods the replay needs. Only the
        operator's own pods (layers/facts/trusted.py) are collected as such: a pod imitating one is kept
        in scenario.yaml (the replay says so) but its logs are not read. `setting`:
        GPUBOT_OPERATOR_NAMESPACE; the operator's namespace found is left in `operator_ns`."""
        self.progress("operator and operand pods")
        seen: dict[tuple[str, str], K8sObject] = {}
        for label_sel, field_sel in self.scope.pod_selectors():
            for pod in self.read(f"pods -l {label_sel}", self._lister(label_sel, field_sel), []):
                seen[(o.namespace(pod) or "", o.name(pod))] = pod
        pods = self.keep(sorted(seen.values(), key=lambda p: (o.namespace(p) or "", o.name(p))))
        policies = [x for x in self.objects.values() if x.get("kind") == "ClusterPolicy"]
        trust = operator_trust(setting, policies, [])
        pods, refused = trusted_pods(pods, trust)
        for pod, why in refused:
            self.manifest.skipped.append(
                {
                    "what": f"the logs of {o.namespace(pod)}/{o.name(pod)}",
                    "why": f"not the operator's pod: {why}",
                }
            )
        self.operator_ns = trust.namespace or next((o.namespace(p) for p in pods), None)
        operator = [p for p in pods if rm.is_operator_pod(p)]
        operands = [p for p in pods if not rm.is_operator_pod(p)]
        on_node = self.scope.node or self.scope.target_node
        if on_node:
            self.keep(
                self.read(
                    f"pods on {on_node}",
                    lambda: self.cluster.list_pods(field_selector=f"spec.nodeName={on_node}"),
                    [],
                )
            )
        walk_reads = self.large and self.scope.target is not None
        if walk_reads:
            self.manifest.skipped.append(
                {
                    "what": "the fleet's pods",
                    "why": f"past {gp.SLIM_PAST:,} nodes the bundle keeps the pods its target's walk "
                    "reads (those of the nodes it examines), not every node's operator and GPU pods",
                }
            )
        elif self.scope.node and self.scope.target:
            # The target's walk examines its candidate nodes, not only this one: their operator pods go
            # into scenario.yaml (no files, no logs), or the replay would read their absence as fact
            # ("no DRA kubelet plugin pod runs on the node").
            for label_sel in OPERATOR_SELECTORS:
                fleet_wide = self.keep(
                    self.read(f"pods -l {label_sel} (all nodes)", self._lister(label_sel, None), [])
                )
                # The DRA controller, like the operator's own pod, runs anywhere and serves every node:
                # its log explains a ComputeDomain that never gets ready (layer 2), so it is collected.
                operands += [
                    p for p in fleet_wide if rm.component(p) == "dra-controller" and p not in operands
                ]
        if self.scope.want_fleet_gpu_pods() and not walk_reads:
            running = "status.phase!=Succeeded,status.phase!=Failed"
            fleet = self.read(
                "pods (all namespaces)", lambda: self.cluster.list_pods(field_selector=running), []
            )
            self.keep([p for p in fleet if rm.requests_gpu(p)])
        return operator, operands

    def pod_files(self, operator: list[K8sObject], operands: list[K8sObject]) -> None:
        now = self.now
        self.archive.add("gpu_operator_pod.status", bt.pods_status(operator, now), essential=True)
        self.archive.add("gpu_operator_pod.yaml", bt.to_yaml(operator), essential=True)
        for pod in operator[:1]:
            for container, previous in rm.log_streams(pod)[:2]:
                self.log(
                    "gpu_operator_pod" + (".previous" if previous else "") + ".log",
                    o.namespace(pod) or "",
                    o.name(pod),
                    container,
                    previous,
                )
        self.archive.add("gpu_operand_pods.status", bt.pods_status(operands, now), essential=True)
        self.archive.add("gpu_operand_pods.yaml", bt.to_yaml(operands), essential=True)
        self.archive.add("gpu_operand_pod_images.txt", bt.pod_images(operator + operands), essential=True)
        for i, pod in enumerate(operands, 1):
            self.progress(f"logs {i}/{len(operands)}: {o.name(pod)}")
            self.pod_logs(pod)

    def pod_logs(self, pod: K8sObject) -> None:
        # Plugins print a device's unhealthy mark once: their logs are kept from the start.
        from_start = rm.component(pod) in ("device-plugin", "dra-kubelet-plugin")
        for container, previous in rm.log_streams(pod):
            file = f"logs/{o.name(pod)}/{container}" + (".previous" if previous else "") + ".log"
            self.log(file, o.namespace(pod) or "", o.name(pod), container, previous, from_start=from_start)

    def node_files(self, scoped: list[K8sObject], operator_ns: str | None) -> None:
        self.progress("node descriptions and events")
        scoped = gp.text_nodes(self, scoped)
        names = {o.name(n) for n in scoped}
        if self.scope.node:
            node_events = self.read(
                "node events", lambda: self.cluster.list_events(None, "Node", self.scope.node), []
            )
        else:
            node_events = self.read("node events", lambda: self.cluster.list_events(None, "Node", None), [])
        node_events = self.keep(
            [
                e
                for e in node_events
                if (e.get("involvedObject") or {}).get("kind") == "Node"
                and (e.get("involvedObject") or {}).get("name") in names
            ]
        )
        self.archive.add("gpu_nodes.labels", bt.nodes_labels(scoped), essential=True)
        self.archive.add("gpu_nodes.status", bt.nodes_status(scoped, self.now), essential=True)
        self.archive.add("gpu_nodes.events", bt.events_table(node_events, self.now), essential=True)
        pods = [p for p in self.objects.values() if p.get("kind") == "Pod"]
        descr = []
        for n in scoped:
            on = [p for p in pods if o.pod_node(p) == o.name(n) and not o.is_terminating_or_done(p)]
            evs = [e for e in node_events if (e.get("involvedObject") or {}).get("name") == o.name(n)]
            descr.append(bt.node_describe(n, on, evs, self.now))
        self.archive.add("gpu_nodes.descr", "\n\n".join(descr), essential=True)
        self.progress("operand daemonsets and operator events")
        if operator_ns:
            dss = self.read("daemonsets", lambda: self.cluster.list_daemonsets(namespace=operator_ns), [])
            if self.node_only:
                events = self._events_of(operator_ns, pods, dss)
            else:
                events = self.read(
                    f"events in {operator_ns}", lambda: self.cluster.list_events(operator_ns), []
                )
        else:
            self.manifest.skipped.append(
                {"what": "operand daemonsets, operator events", "why": "no GPU Operator pod found"}
            )
            dss, events = [], []
        dss = self.keep(dss)
        self.archive.add("gpu_operand_ds.status", bt.daemonsets_status(dss, self.now), essential=True)
        self.archive.add("gpu_operand_ds.yaml", bt.to_yaml(dss), essential=True)
        self.archive.add(
            "gpu_operator_events.txt", bt.events_table(self.keep(events), self.now), essential=True
        )

    def _events_of(self, ns: str, pods: list[K8sObject], dss: list[K8sObject]) -> list[K8sObject]:
        """The operator namespace's events about this node's pods (and the operator's) and the
        operand DaemonSets, object by object: the namespace's whole list grows with the fleet."""
        objects = [("Pod", o.name(p)) for p in pods if o.namespace(p) == ns]
        objects += [("DaemonSet", o.name(d)) for d in dss]
        events: list[K8sObject] = []
        for kind, name in objects:
            events += self.read(
                f"events of {kind.lower()} {ns}/{name}",
                partial(self.cluster.list_events, ns, kind, name),
                [],
            )
        return events

    def target_files(self, pod: K8sObject) -> None:
        ns, name = self.scope.target or ("", "")
        self.progress(f"target pod {ns}/{name}")
        self.archive.add("target/pod.yaml", bt.to_yaml(self.keep([pod])), essential=True)
        events = self.keep(
            self.read(f"events of pod {ns}/{name}", lambda: self.cluster.list_events(ns, "Pod", name), [])
        )
        self.archive.add("target/events.txt", bt.events_table(events, self.now), essential=True)
        self.configmaps(pod)
        self.pod_logs(pod)

    def configmaps(self, pod: K8sObject) -> None:
        """The ConfigMaps the target mounts, masked (bot/actions/redact.py): layer 4 reads the script
        a command names from one (layers/facts/inference.py), so its replay needs them."""
        ns = o.namespace(pod) or ""
        kept = []
        for cm in mounted_configmaps(pod):
            try:
                kept.append(self.cluster.get_configmap(ns, cm))
            except SourceError as err:
                if err.kind != "not_found":
                    self.manifest.errors.append({"read": f"configmap {ns}/{cm}", "error": str(err)})
        if kept:
            self.archive.add("target/configmaps.yaml", bt.to_yaml(self.keep(kept)), essential=True)


def mounted_configmaps(pod: K8sObject) -> list[str]:
    """The ConfigMaps a pod's volumes (and projected volumes) mount, in order, once each."""
    names: dict[str, None] = {}
    for v in (pod.get("spec") or {}).get("volumes") or []:
        sources = [v.get("configMap")] + [
            s.get("configMap") for s in (v.get("projected") or {}).get("sources") or []
        ]
        for cm in sources:
            if isinstance(cm, dict) and cm.get("name"):
                names[str(cm["name"])] = None
    return list(names)
