"""Layer 4 — out of memory: system memory (OOMKilled) or GPU framebuffer.

First separate the two: a cgroup kill is recorded in the pod's status; GPU
memory exhaustion leaves the pod alive with failing allocations (logs) or a
framebuffer at its ceiling (DCGM). Inference servers such as vLLM reserve GPU
memory up front, so for them preemptions decide, not usage. Time-slicing
shares memory with no isolation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from layers.facts import gpufacts as gf
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.facts.fleet import fold
from layers.findings import Finding, LayerResult, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 4
FB_CEILING = 0.95

_VLLM = re.compile(r"vllm", re.IGNORECASE)
_EVIDENCE_LINES = 5
_KV_CACHE = re.compile(r"memory for the cache blocks|available KV cache memory", re.IGNORECASE)


def check(ctx: WalkContext) -> LayerResult:
    findings: list[Finding] = []
    got = wf.examined_walk_facts(ctx, LAYER)
    if isinstance(got, LayerResult):
        return got
    nodes, facts = got
    pod = ctx.pod
    if pod is not None:
        findings += oomkilled(ctx, pod)
        findings += gpu_oom_in_logs(ctx, pod)
        findings += framebuffer(ctx, pod, facts)
    findings += no_telemetry(facts, nodes, ctx)
    for node in nodes:
        findings += time_slicing(ctx, node)
    if not findings:
        where = ", ".join(nodes) if len(nodes) <= 3 else f"{len(nodes)} examined GPU nodes"
        findings.append(
            finding(
                "L4_OK",
                f"no memory problem: no OOMKilled container, no GPU OOM, framebuffer below the ceiling ({where})",
                node=ctx.bound_node,
            )
        )
    return LayerResult.build(LAYER, fold(findings))


def _ref(ctx: WalkContext) -> tuple[str, str]:
    return ctx.target.namespace or "default", ctx.target.pod or ""


# --- system memory -------------------------------------------------------------------


def _memory_limit(pod: K8sObject, container: str) -> str:
    for c in o.containers(pod) + o.containers(pod, init=True):
        if c.get("name") == container:
            limits = (c.get("resources") or {}).get("limits") or {}
            return str(limits["memory"]) if limits.get("memory") else "none set"
    return "unknown"


def _statuses(pod: K8sObject) -> list[tuple[str, str, dict[str, Any]]]:
    """(kind, status field, status) of every init, app and ephemeral (debug) container."""
    status = pod.get("status") or {}
    return [
        (kind, key, s)
        for kind, key in (
            ("init container", "initContainerStatuses"),
            ("container", "containerStatuses"),
            ("ephemeral container", "ephemeralContainerStatuses"),
        )
        for s in status.get(key) or []
    ]


def oomkilled(ctx: WalkContext, pod: K8sObject) -> list[Finding]:
    ns, name = _ref(ctx)
    out: list[Finding] = []
    for kind, field, status in _statuses(pod):
        for state_key in ("state", "lastState"):
            term = (status.get(state_key) or {}).get("terminated") or {}
            if str(term.get("reason", "")).lower() != "oomkilled":
                continue
            container = str(status.get("name", "?"))
            limit = _memory_limit(pod, container)
            when = "now" if state_key == "state" else "last"
            evidence = [
                f"{kind} {container}: {state_key}.terminated.reason=OOMKilled, exitCode={term.get('exitCode', '?')}"
                + (f", finishedAt={term['finishedAt']}" if term.get("finishedAt") else ""),
                f"memory limit of {container}: {limit}",
                f"restartCount: {status.get('restartCount', 0)}",
            ]
            out.append(
                finding(
                    "L4_OOMKILLED",
                    f"{kind} {container} was OOMKilled ({when}): system memory (cgroup limit {limit}), not GPU "
                    "memory — raise its memory limit or cut host-side memory use",
                    evidence=evidence,
                    commands=[
                        f"kubectl get pod -n {ns} {name} -o jsonpath='{{.status.{field}[*].{state_key}.terminated.reason}}'",
                        f"kubectl describe pod -n {ns} {name}",
                    ],
                    node=ctx.bound_node,
                )
            )
            break  # one finding per container, the current state wins
    return out


# --- GPU memory in the application's own logs ----------------------------------------


def gpu_oom_in_logs(ctx: WalkContext, pod: K8sObject) -> list[Finding]:
    ns, name = _ref(ctx)
    out: list[Finding] = []
    for c in o.containers(pod):
        container = str(c.get("name", ""))
        hits: list[str] = []
        seen: set[str] = set()
        try:
            for previous in (False, True):
                for line in sig.gpu_oom_lines(ctx.log(ns, name, container, previous)):
                    if line not in seen:
                        seen.add(line)
                        hits.append(f"[{container}{' previous' if previous else ''}] {line}")
        except SourceError as err:
            out.append(
                unknown(
                    LAYER,
                    f"could not read the logs of {ns}/{name} container {container} to look for GPU out-of-memory "
                    f"errors: {err.message}" + (f"; {err.hint()}" if err.hint() else ""),
                    node=ctx.bound_node,
                )
            )
            # Lines already found in the current log still stand.
        if not hits:
            continue
        out.append(
            finding(
                "L4_GPU_OOM_IN_LOGS",
                _oom_summary(container, hits),
                evidence=hits[:_EVIDENCE_LINES],
                commands=[
                    f"kubectl logs -n {ns} {name} -c {container} | grep -iE '{sig.GPU_OOM_GREP}'",
                    f"kubectl logs -n {ns} {name} -c {container} --previous | grep -iE '{sig.GPU_OOM_GREP}'",
                ],
                node=ctx.bound_node,
            )
        )
    return out


def _oom_summary(container: str, hits: list[str]) -> str:
    for line in hits:
        m = sig.VLLM_FREE_MEMORY.search(line)
        if m and m.group("free"):
            util = (
                f"gpu_memory_utilization {m.group('util')} ({m.group('want')} GiB)"
                if m.group("util")
                else ("its gpu_memory_utilization")
            )
            return (
                f"vLLM in {container} could not start: only {m.group('free')} of {m.group('total')} GiB GPU memory "
                f"free, below {util} — another process or time-sliced sharer holds the GPU; lower "
                "--gpu-memory-utilization or free the GPU"
            )
        if m:
            return (
                f"vLLM in {container} could not start: free GPU memory is below its gpu_memory_utilization — "
                "lower it or free the GPU"
            )
    if any(_KV_CACHE.search(line) for line in hits):
        return (
            f"vLLM in {container} has too little GPU memory left for its KV cache: raise "
            "--gpu-memory-utilization, lower --max-model-len, or give it a larger or unshared GPU"
        )
    said = "CUDA out of memory" if any("out of memory" in h.lower() for h in hits) else "allocation failed"
    if any("RESOURCE_EXHAUSTED" in h for h in hits):
        said = "XLA RESOURCE_EXHAUSTED"
    return (
        f"{container} ran out of GPU memory ({said}): the framebuffer, not the pod's memory limit — "
        "reduce batch size/model size, or give it a GPU to itself"
    )


# --- framebuffer (DCGM) and vLLM preemptions -----------------------------------------


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


def _fb_ratio(g: gf.GpuFacts, node: K8sObject | None) -> tuple[float | None, str]:
    """used / (used + free), else used / the node's nvidia.com/gpu.memory label (MiB)."""
    if g.fb_ratio is not None:
        return g.fb_ratio, f"FB_USED {g.fb_used_mib:g} MiB, FB_FREE {g.fb_free_mib:g} MiB"
    total = o.quantity(o.labels(node).get("nvidia.com/gpu.memory", "")) if node else 0
    if g.fb_used_mib is not None and total > 0:
        return g.fb_used_mib / float(total), (
            f"FB_USED {g.fb_used_mib:g} MiB of {total} MiB (node label nvidia.com/gpu.memory; FB_FREE not exported)"
        )
    return None, ""


def framebuffer(ctx: WalkContext, pod: K8sObject, facts: wf.WalkFacts) -> list[Finding]:
    ns, name = _ref(ctx)
    node = ctx.bound_node
    vllm = facts.vllm.get((ns, name))
    server, why = is_inference_server(pod, vllm)
    out: list[Finding] = []
    pod_q = f'namespace="{ns}",pod="{name}"'
    if vllm is not None and (vllm.preemption_rate or 0) > 0:
        out.append(
            finding(
                "L4_PREEMPTIONS",
                f"vLLM in {ns}/{name} is preempting requests ({vllm.preemption_rate:.3g}/s over 5 m): its KV cache "
                "is too small — raise gpu_memory_utilization, add GPUs (tensor parallel) or lower max_num_seqs",
                evidence=[
                    f"rate(vllm:num_preemptions_total{{{pod_q}}}[5m]) = {vllm.preemption_rate:.4g}",
                    f"gpu_memory_utilization = {vllm.gpu_memory_utilization or 'not exported'}",
                ],
                commands=[f"sum by (model_name) (rate(vllm:num_preemptions_total{{{pod_q}}}[5m])) > 0"],
                node=node,
            )
        )
    if facts.error is not None or not node:
        return out
    own = facts.of_pod((ns, name))
    if not own and not o.pod_requests(pod):
        return out  # no GPU requested and none mapped to it: no framebuffer of its own to judge
    gpus = own or facts.on(node)
    node_obj = _node(ctx, node)
    for g in gpus:
        ratio, numbers = _fb_ratio(g, node_obj)
        if ratio is None or ratio <= FB_CEILING:
            continue
        whose = (
            "used by the pod" if own else "on the pod's node (the exporter does not map GPUs to pods here)"
        )
        evidence = [f"{g.label} {whose}: {numbers} → {ratio:.1%}"]
        others = [f"{p_ns}/{p}" for p_ns, p in g.pods if (p_ns, p) != (ns, name)]
        if others:
            evidence.append(f"shared GPU: the value is the whole GPU's, also used by {', '.join(others)}")
        m = g.matcher()
        commands = [
            f"DCGM_FI_DEV_FB_USED{m} / (DCGM_FI_DEV_FB_USED{m} + DCGM_FI_DEV_FB_FREE{m}) > 0.95",
            f"sum by (namespace, pod) (DCGM_FI_DEV_FB_USED{g.matcher(with_gpu=False)})",
        ]
        if server and (vllm is None or not (vllm.preemption_rate or 0) > 0):
            util = vllm.gpu_memory_utilization if vllm else None
            evidence.append(f"inference server: {why}")
            evidence.append(
                f"gpu_memory_utilization = {util}" if util else "gpu_memory_utilization: not exported"
            )
            if vllm is None:
                evidence.append("vLLM metrics not found for the pod: preemptions could not be checked")
            commands.append(f"sum by (model_name) (rate(vllm:num_preemptions_total{{{pod_q}}}[5m])) > 0")
            out.append(
                finding(
                    "L4_FB_RESERVED_NORMAL",
                    f"{g.label} at {ratio:.0%} framebuffer is vLLM's up-front reservation"
                    + (f" (gpu_memory_utilization {util})" if util else "")
                    + " with no preemptions: normal, not a memory problem",
                    evidence=evidence,
                    commands=commands,
                    node=node,
                )
            )
        elif not server:
            out.append(
                finding(
                    "L4_FB_SATURATED",
                    f"{g.label} framebuffer at {ratio:.0%} (> 95%): GPU memory exhausted — allocations will fail; "
                    "reduce the workload's memory or move it to a larger/unshared GPU",
                    evidence=evidence,
                    commands=commands,
                    node=node,
                )
            )
    return out


def _node(ctx: WalkContext, name: str) -> K8sObject | None:
    try:
        return ctx.node(name)
    except SourceError:
        return None


def no_telemetry(facts: wf.WalkFacts, nodes: Iterable[str], ctx: WalkContext) -> list[Finding]:
    notes = [*facts.notes]
    if facts.error is not None:
        return [
            finding(
                "L4_NO_TELEMETRY",
                # The telemetry error names the source and what to check: said once.
                f"framebuffer and vLLM preemptions not checked: {facts.error}",
                evidence=[f"telemetry error: {facts.error}", *notes],
                commands=["DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE) > 0.95"],
                node=ctx.bound_node,
            )
        ]
    out: list[Finding] = []
    for node in nodes:
        if facts.on(node):
            continue
        exporter = facts.exporters_on(node)
        hosts = sorted({node, *exporter})
        values = "|".join(hosts)
        out.append(
            finding(
                "L4_NO_TELEMETRY",
                f"no DCGM series for node {node} in {facts.source}: dcgm-exporter is missing, failing or not "
                "scraped — check the nvidia-dcgm-exporter pod on the node and that Prometheus scrapes port 9400",
                evidence=[
                    f"no DCGM_FI_DEV_* series with Hostname or hostname in {hosts}",
                    f"dcgm-exporter pod on the node: {', '.join(exporter) if exporter else 'none found'}",
                    *notes,
                ],
                commands=[
                    f'DCGM_FI_DEV_FB_USED{{Hostname=~"{values}"}} or DCGM_FI_DEV_FB_USED{{hostname=~"{values}"}}',
                    f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} | grep dcgm-exporter",
                ],
                node=node,
            )
        )
    return out


# --- time-slicing --------------------------------------------------------------------


def _sharing(node: K8sObject) -> tuple[list[str], bool]:
    """(the labels that show GPU sharing, whether it is MPS rather than time-slicing)."""
    lab = {k: str(v).strip() for k, v in o.labels(node).items()}
    reasons = []
    strategy = lab.get("nvidia.com/gpu.sharing-strategy", "")
    if strategy.lower() == "time-slicing":
        reasons.append(f"nvidia.com/gpu.sharing-strategy={strategy}")
    replicas = lab.get("nvidia.com/gpu.replicas", "")
    if o.quantity(replicas) > 1:
        reasons.append(f"nvidia.com/gpu.replicas={replicas}")
    product = lab.get("nvidia.com/gpu.product", "")
    if product.upper().endswith("-SHARED"):
        reasons.append(f"nvidia.com/gpu.product={product}")
    if reasons and strategy.lower() == "mps":
        reasons.insert(0, f"nvidia.com/gpu.sharing-strategy={strategy}")
    return reasons, strategy.lower() == "mps"


def time_slicing(ctx: WalkContext, node: str) -> list[Finding]:
    try:
        obj = ctx.node(node)
    except SourceError as err:
        return [
            unknown(
                LAYER, f"could not read node {node} to check GPU time-slicing: {err.hint() or err}", node=node
            )
        ]
    if obj is None:
        return []
    reasons, mps = _sharing(obj)
    if not reasons:
        return []
    evidence = [f"node {node}: {', '.join(reasons)}"]
    try:
        pods = ctx.pods_on(node)
        target = (ctx.target.namespace, ctx.target.pod)
        sharers = [
            f"{o.namespace(p)}/{o.name(p)} ({', '.join(f'{k}={v}' for k, v in o.pod_requests(p).items())})"
            for p in pods
            if o.pod_requests(p) and not o.is_terminating_or_done(p) and (o.namespace(p), o.name(p)) != target
        ]
        evidence.append("other pods using GPUs on the node: " + (", ".join(sharers) if sharers else "none"))
    except SourceError as err:
        evidence.append(f"could not list the pods on {node}: {err.hint() or err}")
    return [
        finding(
            "L4_TIME_SLICING",
            (
                f"node {node} shares its GPUs with MPS: each replica gets a fixed slice of the GPU's memory, a "
                "pod needing more fails with CUDA out of memory — give memory-heavy pods a whole GPU (or MIG)"
                if mps
                else f"node {node} shares its GPUs by time-slicing: replicas have no memory isolation, one pod "
                "can exhaust the memory of the others — give memory-heavy pods a whole GPU (or MIG)"
            ),
            evidence=evidence,
            commands=[
                f"kubectl get node {node} -L nvidia.com/gpu.sharing-strategy,nvidia.com/gpu.replicas,nvidia.com/gpu.product",
                f"kubectl get pods -A -o wide --field-selector spec.nodeName={node}",
            ],
            node=node,
        )
    ]
