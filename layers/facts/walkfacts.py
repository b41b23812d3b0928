"""The telemetry read a walk shares: GPU facts of the examined nodes, and the target pod's vLLM facts.

Layers 4 and 5 read the same series; `walk_facts` reads them once per walk
(cached on the WalkContext) and never raises: a telemetry failure becomes
`WalkFacts.error`, which each layer turns into its own unknown finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cached_property

import msgspec

from layers.facts import dra, drareads, hosts
from layers.facts import gpufacts as gf
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.findings import LayerResult, unknown
from layers.sources import K8sObject, Selector, SourceError, Telemetry, TelemetryError

# --- vLLM ---------------------------------------------------------------------------------


class VllmFacts(msgspec.Struct, frozen=True):
    pod: hosts.PodRef
    preemption_rate: float | None  # rate(vllm:num_preemptions_total[5m]); None when not computable
    gpu_memory_utilization: str | None
    models: tuple[str, ...] = ()


_UTILIZATION_LABELS = ("gpu_memory_utilization", "cache_config_gpu_memory_utilization")


class _VllmSeen(msgspec.Struct):
    util: str | None = None
    rate: float | None = None
    models: set[str] = msgspec.field(default_factory=set)


def read_vllm(telemetry: Telemetry, pods: Sequence[hosts.PodRef]) -> dict[hosts.PodRef, VllmFacts]:
    """vLLM facts for the pods that have vLLM series (two calls); pods without any are absent."""
    if not pods:
        return {}
    match: list[Selector] = []
    for ns, pod in pods:
        match.extend(hosts.pod_selector(ns, pod))
    wanted = set(pods)
    seen: dict[hosts.PodRef, _VllmSeen] = {}
    for s in telemetry.instant(gf.VLLM_INFO, match):
        ref = hosts.pod_of(s.labels)
        if ref is None or ref not in wanted:
            continue
        entry = seen.setdefault(ref, _VllmSeen())
        for key in _UTILIZATION_LABELS:
            if s.labels.get(key) and entry.util is None:
                entry.util = s.labels[key]
        model = s.labels.get("model_name") or s.labels.get("model")
        if model:
            entry.models.add(model)
    for s in telemetry.rate(gf.VLLM_PREEMPTIONS, gf.PREEMPTION_WINDOW_S, match):
        ref = hosts.pod_of(s.labels)
        if ref is None or ref not in wanted:
            continue
        entry = seen.setdefault(ref, _VllmSeen())
        entry.rate = (entry.rate or 0.0) + s.value  # one series per engine/model: the pod's total
    return {ref: VllmFacts(ref, e.rate, e.util, tuple(sorted(e.models))) for ref, e in seen.items()}


# --- the walk's cached read ------------------------------------------------------------------


class WalkFacts(msgspec.Struct, frozen=True, dict=True):  # dict: for its cached_property
    """Telemetry facts for a walk's examined nodes, read once and shared by layers 4 and 5."""

    nodes: tuple[str, ...]
    gpus: tuple[gf.GpuFacts, ...]
    hostmap: hosts.HostMap
    source: str
    error: str | None = None  # why telemetry could not be read
    notes: tuple[str, ...] = ()  # what limited the read (e.g. exporter pods not listable)
    vllm: Mapping[hosts.PodRef, VllmFacts] = msgspec.field(default_factory=dict)

    def on(self, node: str) -> list[gf.GpuFacts]:
        return list(self._by_node.get(node, ()))

    def of_pod(self, ref: hosts.PodRef) -> list[gf.GpuFacts]:
        return [g for g in self.gpus if ref in g.pods]

    def exporters_on(self, node: str) -> list[str]:
        """The dcgm-exporter pods whose name stands for this node in a host label."""
        return list(self._exporters_by_node.get(node, ()))

    # Indexed once: a pending pod examines every GPU node, and a scan of every
    # GPU per node is quadratic (25 s at 5,000 nodes).
    @cached_property
    def _by_node(self) -> dict[str | None, list[gf.GpuFacts]]:
        out: dict[str | None, list[gf.GpuFacts]] = {}
        for g in self.gpus:
            out.setdefault(g.node, []).append(g)
        return out

    @cached_property
    def _exporters_by_node(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for pod, node in self.hostmap.exporters.items():
            if node:
                out.setdefault(node, []).append(pod)
        return out


def exporter_pods(ctx: WalkContext, nodes: Sequence[str]) -> list[K8sObject]:
    """The dcgm-exporter pods on these nodes: the only ones whose names can label their series."""
    return [p for n in nodes for p in ctx.operator_pods_on(n, "dcgm-exporter")]


def walk_facts(ctx: WalkContext, nodes: Sequence[str]) -> WalkFacts:
    """GPU and vLLM facts for these nodes and the target pod, cached for the walk; never raises."""
    return ctx.cached(("gpufacts", tuple(nodes)), lambda: _read_walk_facts(ctx, tuple(nodes)))


def examined_walk_facts(ctx: WalkContext, layer: int) -> tuple[list[str], WalkFacts] | LayerResult:
    """The examined nodes and their facts, or the layer's unknown result when the nodes cannot be listed."""
    try:
        nodes = ctx.examined_nodes()
    except SourceError as err:
        return LayerResult.build(
            layer, [unknown(layer, f"could not list nodes to examine: {err.hint() or err}")]
        )
    if not nodes:
        # Only an unbound pod without candidate nodes gets here: nothing to look at is not "no problem".
        return LayerResult.build(
            layer,
            [
                unknown(
                    layer,
                    "no GPU node to examine (the pod is not scheduled and has no candidate node: no GPU "
                    "node it could run on, or a scheduling gate holds it): layer 1 says why",
                )
            ],
        )
    return nodes, walk_facts(ctx, nodes)


def _read_walk_facts(ctx: WalkContext, nodes: tuple[str, ...]) -> WalkFacts:
    notes: list[str] = []
    try:
        exporters = exporter_pods(ctx, nodes)
    except SourceError as err:
        exporters = []
        notes.append(
            "could not list the dcgm-exporter pods, so series labelled with an exporter pod's name "
            f"cannot be mapped to their node: {err}"
        )
    try:
        # A bound pod's walk has not listed the fleet (ctx.node reads its node by name): its
        # examined node is what it knows, as when the list fails; series are selected for it anyway.
        known = [o.name(n) for n in ctx.nodes()] if not ctx.bound_node else list(nodes)
    except SourceError:
        known = list(nodes)
    hostmap = hosts.host_map(known, exporters)
    tel = ctx.telemetry
    pods: dict[hosts.PodRef, str | None] = {}
    if ctx.pod is not None and ctx.target.namespace and ctx.target.pod:
        pods[(ctx.target.namespace, ctx.target.pod)] = ctx.bound_node
    claims = pod_claim_refs(ctx)
    try:
        gpus = gf.read_gpu_facts(tel, hostmap, nodes, pods, claims)
        vllm = read_vllm(tel, list(pods))
    except TelemetryError as err:
        return WalkFacts(
            nodes, (), hostmap, tel.source, error=str(err) or type(err).__name__, notes=tuple(notes)
        )
    return WalkFacts(nodes, tuple(gpus), hostmap, tel.source, notes=tuple(notes), vllm=vllm)


def pod_claim_refs(ctx: WalkContext) -> dict[hosts.ClaimRef, hosts.PodRef]:
    """The target pod's DRA ResourceClaims (by their generated names), for series labelled by claim."""
    pod, ns, name = ctx.pod, ctx.target.namespace, ctx.target.pod
    if pod is None or not ns or not name or not dra.pod_claims(pod):
        return {}
    try:
        states = drareads.pod_claims(ctx)
    except SourceError:
        return {}  # layer 1 reports the unreadable claims
    return {(ns, s.claim.name): (ns, name) for s in states if s.claim is not None}
