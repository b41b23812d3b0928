"""Layer 2 — the container cannot see the GPU.

Reads the GPU Operator's pods on the examined node(s): the validator first
(it gates each stage in order, so it tells fastest where things stopped),
then sandbox events (`no runtime for "nvidia"`), operands stuck in Init behind
the driver, the device plugin's NVML start-up, failing operand containers,
and the target pod's own logs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence

from layers.dra.computedomain import compute_domains
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts import podstatus as ps
from layers.facts.context import OPERATOR_SELECTORS, WalkContext, trusted_pods
from layers.facts.deployments import where_looked
from layers.facts.fold import fold, shown
from layers.facts.startfail import StartFailure, walk_start_failures
from layers.facts.trusted import Trust
from layers.findings import Finding, LayerResult, finding, unknown
from layers.operands import Reads, no_runtime_finding, node_checks, runtime_lines
from layers.registration import not_registered
from layers.sources import K8sObject, SourceError

LAYER = 2
# Beyond this many examined nodes, logs are read only for pods that are not healthy:
# an unbound pod in a large fleet must not cost a log read per node.
LOG_NODE_LIMIT = 50


def check(ctx: WalkContext) -> LayerResult:
    w = Reads(ctx)
    findings: list[Finding] = []
    try:
        nodes = ctx.examined_nodes()
    except SourceError as err:
        w.refused("the nodes to examine", err)
        nodes = []
    try:
        operator: list[K8sObject] | None = ctx.operator_pods()
    except SourceError as err:
        w.refused("the GPU Operator's pods", err)
        operator = None

    if operator == []:
        findings.append(operator_not_found(ctx))
    findings.extend(impostor_finding(ctx))
    sandbox = target_runtime_evidence(w)
    refused = walk_start_failures(ctx)
    for what, why in refused.errors:
        w.refused(what, why, ctx.bound_node)
    findings.extend(container_start_failed(refused.failures))
    findings.extend(app_sees_no_gpu(w, {f.container for f in refused.failures}))
    findings.extend(compute_domains(ctx))
    unregistered = not_registered(ctx, nodes)
    findings.extend(unregistered)
    if operator:
        by_node: dict[str, list[K8sObject]] = defaultdict(list)
        for p in operator:
            if o.pod_node(p):
                by_node[str(o.pod_node(p))].append(p)
        read_all_logs = len(nodes) <= LOG_NODE_LIMIT
        bare = [n for n in nodes if n not in by_node]
        for node in nodes:
            if node in by_node:
                findings.extend(node_checks(w, node, by_node[node], sandbox.pop(node, []), read_all_logs))
        if bare:
            findings.append(
                unknown(
                    LAYER,
                    f"no GPU Operator pods run on {shown(bare)}: check the nodes' nvidia.com/gpu.deploy.* labels and "
                    "that Node Feature Discovery labels them as GPU nodes",
                    node=bare[0] if len(bare) == 1 else None,
                )
            )
    for node, lines in sandbox.items():  # the target's node had no operator pods to read
        findings.append(no_runtime_finding(node, lines, []))
    if not nodes and operator and ctx.pod is not None and not ctx.bound_node:
        # An unbound pod without candidate nodes: no node's operator pods were looked at, which is not "ok".
        findings.append(
            unknown(
                LAYER,
                "no GPU node to examine (the pod is not scheduled and has no candidate node: no GPU node it "
                "could run on, or a scheduling gate holds it): layer 1 says why",
            )
        )
    # Its pods Ready do not make a node whose plugin never registered again "ok".
    stale = {f.node for f in unregistered}
    findings = [f for f in findings if not (f.code == "L2_OK" and f.node in stale)]
    return LayerResult.build(
        LAYER, [*fold(findings, keep=0, codes={"L2_OK"}, into=_healthy_nodes), *w.unknowns()]
    )


def operator_not_found(ctx: WalkContext) -> Finding:
    """L2_OPERATOR_NOT_FOUND saying where it looked: every namespace, or the one the setting names —
    and then whether operator pods run elsewhere, since a wrong setting is not a missing operator."""
    looked = (
        "no pod labelled app=gpu-operator, app=nvidia-*-daemonset, "
        f"app.kubernetes.io/name=nvidia-device-plugin or any device plugin ({where_looked()})"
    )
    commands = ["kubectl get pods -A -l app=gpu-operator", "kubectl get pods -A | grep -i nvidia"]
    ns = ctx.settings.operator_namespace
    if ns is None:
        return finding(
            "L2_OPERATOR_NOT_FOUND",
            "no GPU Operator pods in any namespace: install the GPU Operator (or the device plugin) "
            "before looking further",
            evidence=[f"{looked} in any namespace"],
            commands=commands,
        )
    evidence = [f"{looked} in namespace {ns}, the only one GPUBOT_OPERATOR_NAMESPACE={ns} lets gpubot read"]
    try:
        elsewhere = _operator_pods_anywhere(ctx)
    except SourceError as err:
        evidence.append(f"other namespaces not searched: {err.hint() or err}")
        return finding(
            "L2_OPERATOR_NOT_FOUND",
            f"no GPU Operator pods in namespace {ns} (GPUBOT_OPERATOR_NAMESPACE), and the other namespaces "
            "could not be searched: the setting may be wrong — set it to the operator's namespace, or unset it to "
            "look in every namespace",
            evidence=evidence,
            commands=commands,
        )
    by_ns: dict[str, list[str]] = defaultdict(list)
    for p in elsewhere:
        by_ns[o.namespace(p) or "?"].append(o.name(p))
    if not by_ns:
        evidence.append("no such pod in any other namespace either")
        return finding(
            "L2_OPERATOR_NOT_FOUND",
            f"no GPU Operator pods in namespace {ns} (GPUBOT_OPERATOR_NAMESPACE) nor in any other: install the "
            "GPU Operator (or the device plugin) before looking further",
            evidence=evidence,
            commands=commands,
        )
    evidence += [
        f"operator pods in namespace {n}: {shown(sorted(names))}" for n, names in sorted(by_ns.items())
    ]
    where = ", ".join(sorted(by_ns))
    return finding(
        "L2_OPERATOR_NOT_FOUND",
        f"no GPU Operator pods in namespace {ns}, the one GPUBOT_OPERATOR_NAMESPACE names, but they run in "
        f"{where}: the setting is likely wrong — set GPUBOT_OPERATOR_NAMESPACE={sorted(by_ns)[0]} (or unset it to "
        "look in every namespace); the operator is installed",
        evidence=evidence,
        commands=[f"kubectl get pods -n {n} -o wide" for n in sorted(by_ns)] + commands[:1],
    )


def impostor_finding(ctx: WalkContext) -> list[Finding]:
    """L2_OPERAND_IMPOSTOR: pods the operator-pod reads refused as evidence (layers/facts/trusted.py)."""
    refused = ctx.impostors()
    if not refused:
        return []
    trust = ctx.operator_trust()
    where = f"the operator's namespace is {trust.namespace} ({trust.how})" if trust.namespace else "by owner"
    nodes = sorted({o.pod_node(p) or "" for p, _ in refused} - {""})
    return [
        finding(
            "L2_OPERAND_IMPOSTOR",
            f"{len(refused)} pod(s) carry GPU Operator or device-plugin labels but are not the operator's "
            f"({where}): their logs and status are not evidence, in this walk or in the ledger",
            evidence=[
                f"{o.namespace(p)}/{o.name(p)} on {o.pod_node(p) or '(no node)'}: {why}"
                for p, why in refused[:5]
            ]
            + ([f"… and {len(refused) - 5} more"] if len(refused) > 5 else []),
            commands=[f"kubectl get pod -n {o.namespace(p)} {o.name(p)} -o yaml" for p, _ in refused[:3]],
            node=nodes[0] if len(nodes) == 1 else None,
        )
    ]


def _operator_pods_anywhere(ctx: WalkContext) -> list[K8sObject]:
    """The operator's pods in every namespace (the walk's own read is held to the setting's), owned as
    operands are: a tenant's imitation must not suggest its namespace as the setting."""
    seen: dict[tuple[str | None, str], K8sObject] = {}
    for selector in OPERATOR_SELECTORS:
        for pod in ctx.cluster.list_pods(label_selector=selector):
            seen[(o.namespace(pod), o.name(pod))] = pod
    kept, _ = trusted_pods(list(seen.values()), Trust(None))
    return sorted(kept, key=lambda p: (o.namespace(p) or "", o.name(p)))


def _healthy_nodes(oks: Sequence[Finding]) -> Finding:
    """How `fold` says a fleet of healthy nodes: one L2_OK naming them."""
    return finding(
        "L2_OK",
        f"the GPU Operator's pods are Ready and validated on {len(oks)} examined nodes",
        evidence=[f"nodes: {shown([f.node or '' for f in oks])}"],
        commands=[oks[0].commands[0].rsplit(" --field-selector", 1)[0]],
    )


# --- the target pod ---------------------------------------------------------------------


def target_runtime_evidence(w: Reads) -> dict[str, list[str]]:
    pod, node = w.ctx.pod, w.ctx.bound_node
    if pod is None or not node:
        return {}
    ns, name = o.namespace(pod), o.name(pod)
    try:
        events = w.ctx.events("Pod", ns, name)
    except SourceError as err:
        w.refused(f"the events of {ns}/{name}", err, node)
        events = []
    lines = runtime_lines(pod, events)
    return {node: lines} if lines else {}


_CAUSE_TEXT = {
    "driver-not-loaded": "the NVIDIA driver is not loaded on {node}",
    "driver-rpc": "the NVIDIA driver on {node} does not answer (driver rpc error{detail}): the GPU or driver "
    "is hung or still initialising",
    "driver-mismatch": "the NVIDIA kernel module loaded on {node} is not the version of the driver's user-space "
    "library (NVML: driver/library version mismatch): the driver was upgraded or reinstalled without reloading "
    "its module — drain the node and reboot it (or reload the nvidia modules)",
    "driver-library": "the NVIDIA driver's library ({detail}) is not on {node}: the driver is not installed "
    "there, or the toolkit looks for it under the wrong root",
    "driver-error": "the NVIDIA driver on {node} refused the request ({detail})",
    "driver-mount": "the runtime could not mount the NVIDIA driver library {detail} into it on {node}: that "
    "file is gone from the host, so the CDI spec (or the hook) still names the driver installed before an "
    "upgrade — regenerate the node's CDI spec (restart the toolkit pod, or nvidia-ctk cdi generate) and "
    "restart the device plugin; layer 3 compares the node's driver",
    "cdi-unresolvable": "the runtime knows no CDI device {detail} on {node}: the node's CDI specs lack the "
    "device the device plugin or DRA driver allocated — regenerate them (the toolkit's CDI refresh / "
    "nvidia-ctk cdi generate) and restart the plugin",
    "unknown-device": "the runtime hook was asked for device {detail}, which {node} does not have: the "
    "allocated GPU is gone, or NVIDIA_VISIBLE_DEVICES names a device the node lacks",
    "hook-failed": "the NVIDIA runtime hook failed on {node} ({detail}): read the container toolkit's log",
    "dra-prepare": "the kubelet on {node} cannot prepare the pod's DRA claim ({detail})",
}


def _cause_text(f: StartFailure) -> str:
    node = f.node or "the node"
    if f.dra is not None:
        return f.dra.explain(node)
    if f.requirement is not None:
        req = f.requirement
        if req.what in ("cuda", "driver"):
            return (
                f"the image requires {req}, which the NVIDIA driver on {node} does not satisfy: run it on a node "
                "with a newer driver or use an image built for an older CUDA (layer 3 compares the fleet)"
            )
        return f"the image requires {req}, which the GPUs of {node} do not satisfy"
    detail = f.detail if f.cause != "driver-rpc" else (f": {f.detail}" if f.detail else "")
    return _CAUSE_TEXT[f.cause].format(node=node, detail=detail)


def container_start_failed(failures: Sequence[StartFailure]) -> list[Finding]:
    """L2_CONTAINER_START_FAILED: one finding per pod, its refused containers as evidence."""
    by_pod: dict[tuple[str, str], list[StartFailure]] = defaultdict(list)
    for f in failures:
        by_pod[(f.namespace, f.pod)].append(f)
    out = []
    for (ns, name), group in by_pod.items():
        first = next((f for f in group if f.names_driver), group[0])
        containers = sorted({f.container for f in group if f.container})
        what = (
            f"container{'s' if len(containers) > 1 else ''} {', '.join(containers)}"
            if containers
            else "its sandbox"
        )
        evidence: list[str] = []
        for key in dict.fromkeys((f.container, f.core) for f in group):
            f = next(g for g in group if (g.container, g.core) == key)
            who = f"container {f.container}" if f.container else "pod"
            evidence.append(f"{who} ({f.reason}): {f.core}")
        evidence += list(
            dict.fromkeys(f"{'event' if f.where == 'event' else 'status message'}: {f.raw}" for f in group)
        )
        commands = [
            f"kubectl describe pod -n {ns} {name} | sed -n '/Events:/,$p'",
            f"kubectl get pod -n {ns} {name} -o jsonpath='{{range .status.containerStatuses[*]}}"
            '{.name}{"\\t"}{.state}{"\\n"}{end}\'',
        ]
        if any(f.names_driver for f in group):
            commands.append(
                "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full"
            )
        for d in dict.fromkeys(f.dra for f in group if f.dra is not None):
            evidence += [e for e in d.evidence if e not in evidence]
            commands += [c for c in d.commands(first.node or "") if c not in commands]
        if any(f.cause in ("cdi-unresolvable", "hook-failed", "unknown-device") and not f.dra for f in group):
            commands.append(
                "kubectl logs -n gpu-operator -l app=nvidia-container-toolkit-daemonset -c nvidia-container-toolkit-ctr"
            )
        out.append(
            finding(
                "L2_CONTAINER_START_FAILED",
                f"{ns}/{name} cannot start {what}: {_cause_text(first)}",
                evidence=evidence,
                commands=commands,
                node=first.node,
                next=3 if any(f.names_driver for f in group) else None,
            )
        )
    return out


def app_sees_no_gpu(w: Reads, refused: Collection[str] = ()) -> list[Finding]:
    pod, node = w.ctx.pod, w.ctx.bound_node
    if pod is None or not node:
        return []
    ns, name = o.namespace(pod), o.name(pod)
    evidence: list[str] = []
    commands: list[str] = []
    for c in [*o.containers(pod, init=True), *o.containers(pod)]:
        cname = str(c.get("name"))
        if cname in refused:
            continue  # it never ran: no log to read (layer 2's start failure says why)
        for previous in (False, True) if ps.restarted(pod, cname) else (False,):
            hits = sig.APP_SEES_NO_GPU.find(w.log(pod, cname, previous), 3)
            if hits:
                when = " (previous)" if previous else ""
                evidence += [f"container {cname}{when}: {h}" for h in hits]
                flag = " --previous" if previous else ""
                commands.append(
                    f"kubectl logs -n {ns} {name} -c {cname}{flag} | grep -iE 'cuda|nvml|nvidia-smi'"
                )
    if not evidence:
        return []
    first = sig.strip_prefixes(evidence[0].split(": ", 1)[1])[:140]
    hints: list[str] = []
    if any(sig.NVML_UNKNOWN_ERROR.search(line) for line in evidence):
        # NVIDIA/nvidia-container-toolkit#48: the container had its GPUs and lost them.
        hints.append(
            "NVML's `Unknown Error` inside a container that had its GPUs means it lost access to "
            "them: a `systemctl daemon-reload` on the node, with runc's systemd cgroup driver and no "
            "/dev/char symlinks for the NVIDIA devices, takes them away (NVIDIA/nvidia-container-toolkit#48). "
            "Delete the pod to get them back; prevent it with the symlinks (the GPU Operator's validator "
            "makes them unless DISABLE_DEV_CHAR_SYMLINK_CREATION is set) or CDI"
        )
        commands.append(
            f"kubectl debug node/{node} -it --image=busybox -- ls -l /host/dev/char | grep -c nvidia"
        )
    hint = runtime_class_hint(w, pod)
    if hint:
        hints.append(hint)
        commands.append("kubectl get runtimeclasses")
    summary = f"{ns}/{name} runs but its application finds no usable GPU: {first}"
    return [
        finding(
            "L2_APP_SEES_NO_GPU",
            "; ".join([summary, *hints]),
            evidence=evidence,
            commands=[*commands, f"kubectl exec -n {ns} {name} -- nvidia-smi"],
            node=node,
        )
    ]


def runtime_class_hint(w: Reads, pod: K8sObject) -> str | None:
    """Set `runtimeClassName` when the cluster has the NVIDIA RuntimeClass and the pod names none
    (spec L2_APP_SEES_NO_GPU): where the toolkit is not containerd's default runtime, such a pod
    starts under runc without the NVIDIA hook and sees no GPU."""
    if (pod.get("spec") or {}).get("runtimeClassName"):
        return None
    try:
        classes = w.ctx.cached("runtimeclasses", w.ctx.cluster.list_runtimeclasses)
    except SourceError:
        return None  # a hint, not a check: the finding stands without it
    names = [o.name(rc) for rc in classes if o.name(rc) == "nvidia" or rc.get("handler") == "nvidia"]
    if not names:
        return None
    return (
        f"the pod sets no `runtimeClassName` while RuntimeClass `{names[0]}` exists: set "
        f"`runtimeClassName: {names[0]}` unless the NVIDIA runtime is containerd's default on this node"
    )
