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

from layers import framebuffer as fbj
from layers.dra.sharing import shared_claims
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts import walkfacts as wf
from layers.facts.context import WalkContext
from layers.facts.fold import fold
from layers.facts.logs import LogReads
from layers.findings import Finding, LayerResult, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 4

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
        fb = fbj.pod_framebuffer(ctx, pod, facts)
    else:  # a walk about a node: every GPU on it (spec, layer 4)
        fb = fbj.node_framebuffer(ctx, ctx.target.node or "", facts)
    findings += fb.findings
    findings += no_telemetry(facts, nodes, ctx)
    if not fb.read and facts.error is None and (ctx.pod is None or ctx.bound_node):
        findings += fb_unread(ctx, nodes, facts)
    for node in nodes:
        findings += time_slicing(ctx, node)
        findings += shared_claims(ctx, node)
    if not findings:
        findings.append(_ok(ctx, nodes, fb.read))
    return LayerResult.build(LAYER, fold(findings))


def _ok(ctx: WalkContext, nodes: list[str], fb_read: int) -> Finding:
    """L4_OK saying only what was checked: a framebuffer never read is not "below the ceiling"."""
    where = ", ".join(nodes) if len(nodes) <= 3 else f"{len(nodes)} examined GPU nodes"
    checked = [] if ctx.pod is None else ["no OOMKilled container", "no GPU OOM in its logs"]
    if fb_read:
        checked.append(f"framebuffer below the ceiling on {fb_read} GPU(s)")
    elif ctx.pod is not None and not ctx.bound_node:
        checked.append("framebuffer not judged (the pod runs on no GPU yet)")
    else:
        checked.append("framebuffer not judged (no FB_USED/FB_FREE series read for its GPUs)")
    return finding("L4_OK", f"no memory problem found: {', '.join(checked)} ({where})", node=ctx.bound_node)


def fb_unread(ctx: WalkContext, nodes: Iterable[str], facts: wf.WalkFacts) -> list[Finding]:
    """A node whose GPUs have DCGM series but no framebuffer pair: the check could not run (unknown, spec:
    "a check could not run"), not ok. A pod that requests no GPU and maps to none has none to judge."""
    pod = ctx.pod
    if pod is not None and not o.pod_requests(pod) and not facts.of_pod(_ref(ctx)):
        return []
    out = []
    for node in nodes:
        gpus = facts.on(node)
        if not gpus:
            continue  # L4_NO_TELEMETRY says it
        used = sum(1 for g in gpus if g.fb_used_mib is not None)
        free = sum(1 for g in gpus if g.fb_free_mib is not None)
        out.append(
            unknown(
                LAYER,
                f"framebuffer not checked on {node}: its {len(gpus)} GPU(s) have DCGM series but not "
                "DCGM_FI_DEV_FB_USED with DCGM_FI_DEV_FB_FREE (or the node's nvidia.com/gpu.memory label) — enable "
                "both in dcgm-exporter's counters CSV (dcgmExporter.config, key dcgm-metrics.csv) and check the scrape",
                node=node,
                evidence=[
                    f"GPUs with DCGM series: {len(gpus)}; with DCGM_FI_DEV_FB_USED: {used}; with DCGM_FI_DEV_FB_FREE: {free}",
                    *facts.notes,
                ],
            )
        )
    return out


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
    reads = LogReads(ctx, LAYER)
    out: list[Finding] = []
    for c in o.containers(pod):
        container = str(c.get("name", ""))
        hits: list[str] = []
        seen: set[str] = set()
        # The previous instance is asked for even without a restart count: an OOM kill's line may be there.
        for previous in (False, True):
            for line in sig.gpu_oom_lines(reads.log(pod, container, previous)):
                if line not in seen:
                    seen.add(line)
                    hits.append(f"[{container}{' previous' if previous else ''}] {line}")
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
    # Lines found in a log that could be read still stand beside what could not be.
    return out + reads.unknowns("GPU out-of-memory errors were not looked for there")


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
