"""Layer 4's framebuffer judgement: GPU memory at its ceiling, and vLLM's reservation that only looks so.

Inference servers such as vLLM reserve GPU memory up front, so for them preemptions decide, not
usage; that needs the preemption check to have run (vLLM series for the pod), else the layer says
`unknown` as well (spec/findings.md, layer 4). A pod walk judges the pod's GPUs (or its node's when
the exporter maps none to it); a walk about a node judges every GPU on the node, each against the
pods its series name. What was read is counted, so the layer's OK never claims a framebuffer it
did not see.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from layers.facts import gpufacts as gf
from layers.facts import hosts
from layers.facts import objects as o
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError, TelemetryError

LAYER = 4
FB_CEILING = 0.95
_VLLM = re.compile(r"vllm", re.IGNORECASE)


@dataclass
class Judgement:
    findings: list[Finding] = field(default_factory=list)
    read: int = 0  # GPUs whose framebuffer ratio was read


def is_inference_server(pod: K8sObject, vllm: wf.VllmFacts | None) -> tuple[bool, str]:
    """(is it, why): vLLM series for the pod, or a container whose image/command/args names vLLM."""
    if vllm is not None:
        return True, "the pod exports vLLM metrics"
    for c in o.containers(pod):
        words = [str(c.get("image", ""))] + [str(x) for x in (c.get("command") or []) + (c.get("args") or [])]
        for word in words:
            if _VLLM.search(word):
                return True, f"container {c.get('name')} runs {word!r}"
    return False, ""


def fb_ratio(g: gf.GpuFacts, node: K8sObject | None) -> tuple[float | None, str]:
    """used / (used + free), else used / the node's nvidia.com/gpu.memory label (MiB)."""
    if g.fb_ratio is not None:
        return g.fb_ratio, f"FB_USED {g.fb_used_mib:g} MiB, FB_FREE {g.fb_free_mib:g} MiB"
    total = o.quantity(o.labels(node).get("nvidia.com/gpu.memory", "")) if node else 0
    if g.fb_used_mib is not None and total > 0:
        return g.fb_used_mib / float(total), (
            f"FB_USED {g.fb_used_mib:g} MiB of {total} MiB (node label nvidia.com/gpu.memory; FB_FREE not exported)"
        )
    return None, ""


def _pod_q(ref: hosts.PodRef) -> str:
    return f'namespace="{ref[0]}",pod="{ref[1]}"'


def preemptions(ref: hosts.PodRef, vllm: wf.VllmFacts | None, node: str | None) -> list[Finding]:
    if vllm is None or not (vllm.preemption_rate or 0) > 0:
        return []
    ns, name = ref
    return [
        finding(
            "L4_PREEMPTIONS",
            f"vLLM in {ns}/{name} is preempting requests ({vllm.preemption_rate:.3g}/s over 5 m): its KV cache "
            "is too small — raise gpu_memory_utilization, add GPUs (tensor parallel) or lower max_num_seqs",
            evidence=[
                f"rate(vllm:num_preemptions_total{{{_pod_q(ref)}}}[5m]) = {vllm.preemption_rate:.4g}",
                f"gpu_memory_utilization = {vllm.gpu_memory_utilization or 'not exported'}",
            ],
            commands=[f"sum by (model_name) (rate(vllm:num_preemptions_total{{{_pod_q(ref)}}}[5m])) > 0"],
            node=node,
        )
    ]


def preemptions_unchecked(ref: hosts.PodRef, source: str, node: str | None) -> Finding:
    """A reservation called normal without the preemption check: say it could not run, and what to scrape."""
    ns, name = ref
    return unknown(
        LAYER,
        f"vLLM preemptions of {ns}/{name} could not be checked: no vLLM series for it in {source} — scrape "
        "the server's /metrics (vllm:num_preemptions_total, vllm:cache_config_info; port 8000 by default) "
        "with its pod and namespace labels, e.g. a PodMonitor",
        node=node,
        evidence=[f"no vllm:* series with namespace={ns}, pod={name} (or exported_/kubernetes_ spellings)"],
    )


def _over(
    g: gf.GpuFacts,
    ratio: float,
    numbers: str,
    whose: str,
    ref: hosts.PodRef | None,
    server: tuple[bool, str],
    vllm: wf.VllmFacts | None,
    node: str | None,
) -> Finding | None:
    """One GPU above the ceiling: saturated, vLLM's normal reservation, or nothing (vLLM preempting)."""
    evidence = [f"{g.label} {whose}: {numbers} → {ratio:.1%}"]
    others = [f"{p_ns}/{p}" for p_ns, p in g.pods if (p_ns, p) != ref]
    if others:
        evidence.append(f"shared GPU: the value is the whole GPU's, also used by {', '.join(others)}")
    m = g.matcher()
    commands = [
        f"DCGM_FI_DEV_FB_USED{m} / (DCGM_FI_DEV_FB_USED{m} + DCGM_FI_DEV_FB_FREE{m}) > 0.95",
        f"sum by (namespace, pod) (DCGM_FI_DEV_FB_USED{g.matcher(with_gpu=False)})",
    ]
    is_server, why = server
    if not is_server:
        return finding(
            "L4_FB_SATURATED",
            f"{g.label} framebuffer at {ratio:.0%} (> 95%): GPU memory exhausted — allocations will fail; "
            "reduce the workload's memory or move it to a larger/unshared GPU",
            evidence=evidence,
            commands=commands,
            node=node,
        )
    if vllm is not None and (vllm.preemption_rate or 0) > 0:
        return None  # L4_PREEMPTIONS says it
    util = vllm.gpu_memory_utilization if vllm else None
    evidence.append(f"inference server: {why}")
    evidence.append(f"gpu_memory_utilization = {util}" if util else "gpu_memory_utilization: not exported")
    if vllm is None:
        evidence.append("vLLM metrics not found for the pod: preemptions could not be checked")
    if ref is not None:
        commands.append(f"sum by (model_name) (rate(vllm:num_preemptions_total{{{_pod_q(ref)}}}[5m])) > 0")
    return finding(
        "L4_FB_RESERVED_NORMAL",
        f"{g.label} at {ratio:.0%} framebuffer is vLLM's up-front reservation"
        + (f" (gpu_memory_utilization {util})" if util else "")
        + (
            " with no preemptions: normal, not a memory problem"
            if vllm
            else ": normal if it is not preempting"
        ),
        evidence=evidence,
        commands=commands,
        node=node,
    )


def pod_framebuffer(ctx: WalkContext, pod: K8sObject, facts: wf.WalkFacts) -> Judgement:
    ref = (ctx.target.namespace or "default", ctx.target.pod or "")
    node = ctx.bound_node
    vllm = facts.vllm.get(ref)
    server = is_inference_server(pod, vllm)
    out = Judgement(preemptions(ref, vllm, node))
    if facts.error is not None or not node:
        return out
    own = facts.of_pod(ref)
    if not own and not o.pod_requests(pod):
        return out  # no GPU requested and none mapped to it: no framebuffer of its own to judge
    whose = "used by the pod" if own else "on the pod's node (the exporter does not map GPUs to pods here)"
    node_obj = _node(ctx, node)
    unchecked = False
    for g in own or facts.on(node):
        ratio, numbers = fb_ratio(g, node_obj)
        if ratio is None:
            continue
        out.read += 1
        if ratio <= FB_CEILING:
            continue
        f = _over(g, ratio, numbers, whose, ref, server, vllm, node)
        if f is not None:
            out.findings.append(f)
            unchecked |= f.code == "L4_FB_RESERVED_NORMAL" and vllm is None
    if unchecked:
        out.findings.append(preemptions_unchecked(ref, facts.source, node))
    return out


def node_framebuffer(ctx: WalkContext, node: str, facts: wf.WalkFacts) -> Judgement:
    """Every GPU of the node, each judged against the pods its series name (vLLM read for those)."""
    out = Judgement()
    if facts.error is not None or not node:
        return out
    node_obj = _node(ctx, node)
    gpus = facts.on(node)
    hot: list[tuple[gf.GpuFacts, float, str]] = []
    for g in gpus:
        ratio, numbers = fb_ratio(g, node_obj)
        if ratio is None:
            continue
        out.read += 1
        if ratio > FB_CEILING:
            hot.append((g, ratio, numbers))
    if not hot:
        return out
    refs = sorted({ref for g, _, _ in hot for ref in g.pods})
    vllm = _vllm_of(ctx, refs)
    pods = _pods_by_ref(ctx, node)
    said: set[hosts.PodRef] = set()
    for g, ratio, numbers in hot:
        ref = g.pods[0] if g.pods else None
        facts_of = vllm.get(ref) if ref else None
        pod = pods.get(ref) if ref else None
        server = is_inference_server(pod or {}, facts_of)
        whose = f"used by {ref[0]}/{ref[1]}" if ref else "on the node (no pod named in its series)"
        f = _over(g, ratio, numbers, whose, ref, server, facts_of, node)
        if f is not None:
            out.findings.append(f)
        if ref is not None and ref not in said:
            said.add(ref)  # one preemption line per pod, however many GPUs it holds
            out.findings += preemptions(ref, facts_of, node)
            if f is not None and f.code == "L4_FB_RESERVED_NORMAL" and facts_of is None:
                out.findings.append(preemptions_unchecked(ref, facts.source, node))
    return out


def _vllm_of(ctx: WalkContext, refs: Sequence[hosts.PodRef]) -> dict[hosts.PodRef, wf.VllmFacts]:
    try:
        return ctx.cached(("vllm_of", tuple(refs)), lambda: wf.read_vllm(ctx.telemetry, list(refs)))
    except TelemetryError:
        return {}


def _pods_by_ref(ctx: WalkContext, node: str) -> dict[hosts.PodRef, K8sObject]:
    try:
        pods = ctx.cached(
            ("pods_on", node), lambda: ctx.cluster.list_pods(field_selector=f"spec.nodeName={node}")
        )
    except SourceError:
        return {}
    return {(o.namespace(p) or "", o.name(p)): p for p in pods}


def _node(ctx: WalkContext, name: str) -> K8sObject | None:
    try:
        return ctx.node(name)
    except SourceError:
        return None
