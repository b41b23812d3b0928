"""Layer 4's framebuffer judgement: GPU memory at its ceiling, and vLLM's reservation that only looks so.

Inference servers such as vLLM reserve GPU memory up front, so for them preemptions decide, not
usage; that needs the preemption check to have run (vLLM series for the pod), else the layer says
`unknown` as well (spec/findings.md, layer 4). A pod walk judges the pod's GPUs (or its node's when
the exporter maps none to it); a walk about a node judges every GPU on the node, each against the
pods its series name. What was read is counted, so the layer's OK never claims a framebuffer it
did not see.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from layers.facts import gpufacts as gf
from layers.facts import hosts
from layers.facts import inference as inf
from layers.facts import objects as o
from layers.facts import servermetrics as sm
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.facts.podserver import PodServer, pod_server
from layers.findings import Finding, finding, unknown
from layers.sources import K8sObject, SourceError, TelemetryError

LAYER = 4
FB_CEILING = 0.95


class Judgement(msgspec.Struct):
    findings: list[Finding] = msgspec.field(default_factory=list)
    read: int = 0  # GPUs whose framebuffer ratio was read


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


def overload(ps: PodServer, node: str | None) -> list[Finding]:
    """SGLang's retractions and a queue that never emptied (vLLM's preemptions: `preemptions`)."""
    sig = ps.signals
    if sig is None:
        return []
    ns, name = ps.ref
    out = []
    if sig.retracting:
        evidence = []
        if sig.retraction_rate is not None:
            evidence.append(
                f"rate({sm.SGLANG_RETRACTED_TOTAL}{{{_pod_q(ps.ref)}}}[5m]) = {sig.retraction_rate:.4g}"
            )
        if sig.retracted_peak is not None:
            evidence.append(
                f"max_over_time({sm.SGLANG_RETRACTED}{{{_pod_q(ps.ref)}}}[5m]) = {sig.retracted_peak:g}"
            )
        out.append(
            finding(
                "L4_RETRACTIONS",
                f"SGLang in {ns}/{name} is retracting running requests (its KV cache ran out in the last 5 m): "
                "raise --mem-fraction-static, lower --max-running-requests, or add GPUs (tensor parallel)",
                evidence=[*evidence, *inf.reservation_args_of(ps.recognition)],
                commands=[
                    f"rate({sm.SGLANG_RETRACTED_TOTAL}{{{_pod_q(ps.ref)}}}[5m]) > 0",
                    f"max_over_time({sm.SGLANG_RETRACTED}{{{_pod_q(ps.ref)}}}[5m]) > 0",
                ],
                node=node,
            )
        )
    if sig.backlog:
        out.append(
            finding(
                "L4_QUEUE_BACKLOG",
                f"{'/'.join(sig.servers)} in {ns}/{name} never emptied its request queue in the last 5 m: the server "
                "is full (its memory reservation is in use), not failing — add replicas or GPUs, or lower the load",
                evidence=[
                    f"min_over_time({m}{{{_pod_q(ps.ref)}}}[5m]) = {v:g}"
                    for m, v in sorted(sig.backlog.items())
                ],
                commands=[f"min_over_time({m}{{{_pod_q(ps.ref)}}}[5m]) > 0" for m in sorted(sig.backlog)],
                node=node,
            )
        )
    return out


def overload_unchecked(ps: PodServer, source: str, node: str | None) -> Finding:
    """A reservation called normal without its overload check: say it could not run, and what to scrape."""
    ns, name = ps.ref
    server = ps.server.name if ps.server else "the server"
    if server == "vLLM":
        return unknown(
            LAYER,
            f"vLLM preemptions of {ns}/{name} could not be checked: no vLLM series for it in {source} — scrape "
            "the server's /metrics (vllm:num_preemptions_total, vllm:cache_config_info; port 8000 by default) "
            "with its pod and namespace labels, e.g. a PodMonitor",
            node=node,
            evidence=[
                f"no vllm:* series with namespace={ns}, pod={name} (or exported_/kubernetes_ spellings)"
            ],
        )
    what = inf.OVERLOAD.get(server, "overload (preemptions, retractions or a queue backlog)")
    evidence = [
        f"no vllm:*, sglang:* or tgi_* overload series with namespace={ns}, pod={name} "
        "(or exported_/kubernetes_ spellings)"
    ]
    if ps.unread:
        evidence.append(f"SGLang/TGI series not read: {ps.unread}")
    return unknown(
        LAYER,
        f"{server} {what} of {ns}/{name} could not be checked: no overload series for it in {source} — scrape "
        f"{inf.scrape_hint(server)} with its pod and namespace labels, e.g. a PodMonitor",
        node=node,
        evidence=evidence,
    )


def _over(
    g: gf.GpuFacts, ratio: float, numbers: str, whose: str, ps: PodServer | None, node: str | None
) -> Finding | None:
    """One GPU above the ceiling: saturated, a server's normal reservation, or nothing (it is overloaded)."""
    evidence = [f"{g.label} {whose}: {numbers} → {ratio:.1%}"]
    ref = ps.ref if ps else None
    others = [f"{p_ns}/{p}" for p_ns, p in g.pods if (p_ns, p) != ref]
    if others:
        evidence.append(f"shared GPU: the value is the whole GPU's, also used by {', '.join(others)}")
    m = g.matcher()
    commands = [
        f"DCGM_FI_DEV_FB_USED{m} / (DCGM_FI_DEV_FB_USED{m} + DCGM_FI_DEV_FB_FREE{m}) > 0.95",
        f"sum by (namespace, pod) (DCGM_FI_DEV_FB_USED{g.matcher(with_gpu=False)})",
    ]
    server = ps.server if ps else None
    if ps is None or server is None:
        return finding(
            "L4_FB_SATURATED",
            f"{g.label} framebuffer at {ratio:.0%} (> 95%): GPU memory exhausted — allocations will fail; "
            "reduce the workload's memory or move it to a larger/unshared GPU",
            evidence=evidence + (ps.recognition.notes if ps else []),
            commands=commands,
            node=node,
        )
    if ps.overloaded:
        return None  # L4_PREEMPTIONS / L4_RETRACTIONS say it
    vllm = ps.vllm
    util = vllm.gpu_memory_utilization if vllm else None
    evidence.append(f"inference server: {server.why}")
    # The reservation as exported (vLLM's config series), else as its command line sets it.
    args = [
        a
        for a in inf.reservation_args_of(ps.recognition)
        if not (util and a.startswith("gpu_memory_utilization"))
    ]
    if util:
        evidence.append(f"gpu_memory_utilization = {util}")
    elif server.name == "vLLM" and not args:
        evidence.append("gpu_memory_utilization: not exported")
    evidence += args
    if not ps.checked:
        what = "vLLM metrics" if server.name == "vLLM" else "overload series (vLLM, SGLang, TGI)"
        evidence.append(
            f"{what} not found for the pod: {inf.OVERLOAD.get(server.name, 'overload')} could not be checked"
        )
    if ref is not None:
        commands += _overload_queries(ref, server.name)
    said = "vLLM's" if server.name == "vLLM" else f"{server.name}'s"
    by = "vLLM" if vllm is not None else (ps.signals.servers[0] if ps.signals and ps.signals.servers else "")
    quiet = {
        "vLLM": "no preemptions",
        "SGLang": "no retractions and a queue that empties",
        "TGI": "a queue that empties",
    }
    return finding(
        "L4_FB_RESERVED_NORMAL",
        f"{g.label} at {ratio:.0%} framebuffer is {said} up-front reservation"
        + (f" (gpu_memory_utilization {util})" if util else "")
        + (
            f" with {quiet.get(by, 'no overload')}: normal, not a memory problem"
            if ps.checked
            else f": normal if it is not {'preempting' if server.name == 'vLLM' else 'overloaded'}"
        ),
        evidence=evidence,
        commands=commands,
        node=node,
    )


def _overload_queries(ref: hosts.PodRef, server: str) -> list[str]:
    q = _pod_q(ref)
    vllm = f"sum by (model_name) (rate(vllm:num_preemptions_total{{{q}}}[5m])) > 0"
    sglang = [
        f"rate({sm.SGLANG_RETRACTED_TOTAL}{{{q}}}[5m]) > 0",
        f"min_over_time({sm.SGLANG_QUEUE}{{{q}}}[5m]) > 0",
    ]
    tgi = f"min_over_time({sm.TGI_QUEUE}{{{q}}}[5m]) > 0"
    if server == "SGLang":
        return sglang
    if server == "TGI":
        return [tgi]
    if server == "vLLM":
        return [vllm]
    return [vllm, *sglang, tgi]


def _judge_server(ps: PodServer, unchecked: bool, node: str | None, source: str) -> list[Finding]:
    """The pod-level lines of a server with a GPU at the ceiling: its overload, or that it went unchecked."""
    out = overload(ps, node)
    if unchecked:
        out.append(overload_unchecked(ps, source, node))
    return out


def pod_framebuffer(ctx: WalkContext, pod: K8sObject, facts: wf.WalkFacts) -> Judgement:
    ref = (ctx.target.namespace or "default", ctx.target.pod or "")
    node = ctx.bound_node
    vllm = facts.vllm.get(ref)
    out = Judgement(preemptions(ref, vllm, node))
    if facts.error is not None or not node:
        return out
    own = facts.of_pod(ref)
    if not own and not o.pod_requests(pod):
        return out  # no GPU requested and none mapped to it: no framebuffer of its own to judge
    whose = "used by the pod" if own else "on the pod's node (the exporter does not map GPUs to pods here)"
    node_obj = _node(ctx, node)
    hot: list[tuple[gf.GpuFacts, float, str]] = []
    for g in own or facts.on(node):
        ratio, numbers = fb_ratio(g, node_obj)
        if ratio is None:
            continue
        out.read += 1
        if ratio > FB_CEILING:
            hot.append((g, ratio, numbers))
    if not hot:
        # SGLang's retractions, like vLLM's preemptions, are a fault at any framebuffer level: read
        # them for a pod its own spec names as a server (no ConfigMap read for that).
        if vllm is None and inf.recognise(pod).server is not None:  # vLLM's own series say it otherwise
            quiet = pod_server(ctx, pod, ref, vllm)
            out.findings += [f for f in overload(quiet, node) if f.code == "L4_RETRACTIONS"]
        return out
    # Only a GPU at the ceiling asks whether the pod is a server: its series and scripts are read then.
    ps = pod_server(ctx, pod, ref, vllm)
    unchecked = False
    for g, ratio, numbers in hot:
        f = _over(g, ratio, numbers, whose, ps, node)
        if f is not None:
            out.findings.append(f)
            unchecked |= f.code == "L4_FB_RESERVED_NORMAL" and not ps.checked
    if ps.server is not None:
        out.findings += _judge_server(ps, unchecked, node, facts.source)
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
        ps = pod_server(ctx, pods.get(ref), ref, facts_of) if ref else None
        whose = f"used by {ref[0]}/{ref[1]}" if ref else "on the node (no pod named in its series)"
        f = _over(g, ratio, numbers, whose, ps, node)
        if f is not None:
            out.findings.append(f)
        if ref is not None and ps is not None and ref not in said:
            said.add(ref)  # one preemption line per pod, however many GPUs it holds
            out.findings += preemptions(ref, facts_of, node)
            if ps.server is not None:
                unchecked = f is not None and f.code == "L4_FB_RESERVED_NORMAL" and not ps.checked
                out.findings += _judge_server(ps, unchecked, node, facts.source)
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
