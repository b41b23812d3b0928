"""A device plugin that did not register again after the kubelet restarted (spec/findings.md,
L2_DEVICE_PLUGIN_NOT_REGISTERED): layer 2's finding, and layer 1's capacity gap sent to layer 2.

The node keeps its GPUs in capacity with allocatable 0, and no GPU was marked unhealthy: the card is
not the question (layer 5), the plugin's registration is. The facts are read by
layers/facts/pluginreg.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec.structs

from layers.facts import pluginreg
from layers.facts.context import WalkContext
from layers.findings import Finding, finding
from layers.sources import SourceError

LAYER = 2


def _unregistered(ctx: WalkContext, node: str) -> pluginreg.Unregistered | None:
    try:
        obj = ctx.node(node)
    except SourceError:
        return None
    return pluginreg.unregistered(ctx, obj) if obj is not None else None


def redirect_gaps(ctx: WalkContext, findings: Sequence[Finding]) -> list[Finding]:
    """Layer 1's L1_ALLOCATABLE_BELOW_CAPACITY on a node whose plugin did not register again points to
    layer 2, not 5: no GPU is unhealthy there."""
    out: list[Finding] = []
    checked = 0
    for f in findings:
        if f.code != "L1_ALLOCATABLE_BELOW_CAPACITY" or f.node is None or checked >= pluginreg.MAX_NODES:
            out.append(f)
            continue
        checked += 1
        reg = _unregistered(ctx, f.node)
        if reg is None:
            out.append(f)
            continue
        gpus = ", ".join(f"{c} {r}" for r, c in sorted(reg.capacity.items()))
        out.append(
            msgspec.structs.replace(
                f,
                next=2,
                summary=(
                    f"{f.node} advertises {gpus} but none allocatable, and no GPU was marked unhealthy: the "
                    "kubelet restarted after the device plugin last registered — the plugin is the question "
                    "(layer 2), not the card"
                ),
                evidence=(*f.evidence, *reg.evidence()[len(reg.capacity) :]),
            )
        )
    return out


def not_registered(ctx: WalkContext, nodes: Sequence[str]) -> list[Finding]:
    out: list[Finding] = []
    for node in list(nodes)[: pluginreg.MAX_NODES]:
        reg = _unregistered(ctx, node)
        if reg is None:
            continue
        ns, pod = reg.plugin.split("/", 1)
        out.append(
            finding(
                "L2_DEVICE_PLUGIN_NOT_REGISTERED",
                f"the device plugin on {node} ({pod}) has not registered with the kubelet since the kubelet "
                f"restarted, so the node's {sum(reg.capacity.values())} GPU(s) are in capacity but none is "
                f"allocatable — restart the plugin pod (kubectl delete pod -n {ns} {pod}); its DaemonSet "
                "recreates it and it registers again",
                evidence=reg.evidence(),
                commands=[
                    f"kubectl logs -n {ns} {pod} | grep -i 'Registered device plugin'",
                    f"kubectl get node {node} -o jsonpath='{{.status.conditions[?(@.type==\"Ready\")]}}'",
                    f"kubectl get events --field-selector involvedObject.kind=Node,involvedObject.name={node}",
                    f"kubectl delete pod -n {ns} {pod}",
                ],
                node=node,
            )
        )
    return out
