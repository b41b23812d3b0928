"""The walk: which layer runs, in what order, and the verdict.

A registry of five checks, one per layer; from layer 1 follow each layer's
`next` until it stops, or run all five, or one. The same walk serves the CLI,
the Slack thread (one layer per click) and the digest's "diagnose node".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from layers import card, memory, ownership, runtime, scheduling, versions
from layers.facts import objects as o
from layers.facts.context import EXAMINED_NODES, Settings, WalkContext
from layers.facts.fold import shown
from layers.facts.target import check_object_name
from layers.findings import LayerResult, Target, WalkResult, unknown
from layers.sources import Cluster, K8sObject, SourceError, Telemetry, TelemetryError

LayerCheck = Callable[[WalkContext], LayerResult]

LAYERS: dict[int, LayerCheck] = {
    1: scheduling.check,
    2: runtime.check,
    3: versions.check,
    4: memory.check,
    5: card.check,
}


def run_layer(ctx: WalkContext, layer: int) -> LayerResult:
    """One layer. A source error a layer did not turn into a finding still becomes `unknown`."""
    try:
        # Every layer names the node's other owners; their maintenance is not a fault. Each node's
        # GPU resources are parsed once for the walk, however many checks ask.
        with o.parsed_once(ctx.gpu_memo):
            result = ownership.adjust(ctx, LAYERS[layer](ctx))
    except (SourceError, TelemetryError) as err:
        return LayerResult.build(layer, [unknown(layer, f"layer {layer} could not read its sources: {err}")])
    skipped = ctx.not_examined() if layer > 1 else []
    if not skipped:
        return result
    # An unbound pod with more candidates than a walk examines (layers/facts/context.py,
    # EXAMINED_NODES): the layer's verdict covers the examined ones only, never "ok" for the rest.
    note = unknown(
        layer,
        f"{len(skipped)} more candidate node(s) were not examined (a walk examines {EXAMINED_NODES}): "
        "`gpubot digest` covers the fleet, `gpubot why` on a pod there walks that node",
        evidence=[f"not examined: {shown(skipped)}"],
    )
    return LayerResult.build(layer, [*result.findings, note])


def open_pod(
    cluster: Cluster,
    telemetry: Telemetry,
    namespace: str,
    pod: str,
    settings: Settings | None = None,
) -> WalkContext:
    """Read the target pod (errors escape: not found is exit 2, unreachable 3) and set up the walk."""
    obj: K8sObject = cluster.get_pod(namespace, pod)
    target = Target(namespace=namespace, pod=pod, node=o.pod_node(obj))
    return WalkContext(cluster, telemetry, target, obj, settings)


def open_node(
    cluster: Cluster, telemetry: Telemetry, node: str, settings: Settings | None = None
) -> WalkContext:
    """A walk about a node rather than a pod (the digest's "diagnose node")."""
    check_object_name(node, "node")
    cluster.get_node(node)
    return WalkContext(cluster, telemetry, Target(namespace=None, pod=None, node=node), None, settings)


def follow(ctx: WalkContext, start: int = 1, done: Iterable[int] = ()) -> list[LayerResult]:
    """From `start`, follow each layer's next until it stops; never repeat a layer."""
    seen = set(done)
    results: list[LayerResult] = []
    layer: int | None = start
    while layer is not None and layer not in seen and layer in LAYERS:
        seen.add(layer)
        result = run_layer(ctx, layer)
        results.append(result)
        layer = result.next_layer
    return results


def run(ctx: WalkContext, *, all_layers: bool = False, only_layer: int | None = None) -> WalkResult:
    if only_layer is not None:
        if only_layer not in LAYERS:
            raise ValueError(f"--layer must be 1 to 5, got {only_layer}")
        results = [run_layer(ctx, only_layer)]
    elif all_layers:
        results = [run_layer(ctx, n) for n in sorted(LAYERS)]
    else:
        results = follow(ctx)
    return WalkResult(target=ctx.target, layers=tuple(results))


def walk(
    cluster: Cluster,
    telemetry: Telemetry,
    namespace: str,
    pod: str,
    *,
    all_layers: bool = False,
    only_layer: int | None = None,
    settings: Settings | None = None,
) -> WalkResult:
    ctx = open_pod(cluster, telemetry, namespace, pod, settings)
    return run(ctx, all_layers=all_layers, only_layer=only_layer)
