"""Layer 2 — the container cannot see the GPU.

Reads the GPU Operator's pods on the examined node(s): the validator first
(it gates each stage in order, so it tells fastest where things stopped),
then sandbox events (`no runtime for "nvidia"`), operands stuck in Init behind
the driver, the device plugin's NVML start-up, failing operand containers,
and the target pod's own logs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from layers import logsigs as sig
from layers import objects as o
from layers.context import WalkContext, component
from layers.findings import Finding, LayerResult, Severity, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 2
VALIDATOR_STAGES = ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation")
STAGE_MEANING = {
    "driver-validation": "the driver is not ready on the node (see layer 3)",
    "toolkit-validation": "the NVIDIA Container Toolkit cannot run nvidia-smi in a container",
    "cuda-validation": "a CUDA sample workload could not run on the GPU",
    "plugin-validation": "the node does not advertise GPU resources: the device plugin has not registered",
}
# Operator install first, standalone Helm chart second (reference §0 note 5).
DEVICE_PLUGIN_CONTAINERS = ("nvidia-device-plugin", "nvidia-device-plugin-ctr")
# Beyond this many examined nodes, logs are read only for pods that are not healthy:
# an unbound pod in a large fleet must not cost a log read per node.
LOG_NODE_LIMIT = 50
TAIL = 5
MAX_OK_NODES = 10  # healthy nodes reported one by one; more are merged into one finding


class _Walk:
    """One run of layer 2: the context, and the reads that failed (one unknown per cause)."""

    def __init__(self, ctx: WalkContext) -> None:
        self.ctx = ctx
        self.failed: dict[tuple[object, ...], tuple[list[str], SourceError, str | None]] = {}

    def cannot(self, what: str, err: SourceError, node: str | None = None) -> None:
        key = (err.kind, err.verb, err.resource, err.namespace, err.message if not err.verb else "")
        whats, _err, _node = self.failed.setdefault(key, ([], err, node))
        if what not in whats:
            whats.append(what)

    def unknowns(self) -> list[Finding]:
        out = []
        for whats, err, node in self.failed.values():
            more = f" and {len(whats) - 3} more" if len(whats) > 3 else ""
            out.append(unknown(LAYER, f"could not read {', '.join(whats[:3])}{more}: {err}", node=node))
        return out

    def log(self, pod: K8sObject, container: str, previous: bool = False) -> str | None:
        ns, name = o.namespace(pod) or "", o.name(pod)
        try:
            return self.ctx.log(ns, name, container, previous)
        except SourceError as err:
            self.cannot(f"the log of {ns}/{name} container {container}", err, o.pod_node(pod))
            return None

    def last_lines(self, pod: K8sObject, status: dict[str, Any]) -> list[str]:
        """The container's last log lines: the crashed instance's when it restarted."""
        name = str(status.get("name"))
        previous = bool(status.get("restartCount")) or bool((status.get("lastState") or {}).get("terminated"))
        text = self.log(pod, name, previous=True) if previous else None
        return sig.tail(text or self.log(pod, name), TAIL)

    def pod_events(self, pod: K8sObject) -> list[K8sObject]:
        """Events of an operator pod, from one namespace-wide list per walk."""
        ns = o.namespace(pod)

        def index() -> dict[str, list[K8sObject]]:
            by_name: dict[str, list[K8sObject]] = defaultdict(list)
            for ev in self.ctx.cluster.list_events(ns):
                inv = ev.get("involvedObject") or {}
                if inv.get("kind", "Pod") == "Pod":
                    by_name[str(inv.get("name"))].append(ev)
            return by_name

        try:
            return self.ctx.cached(("l2_events_by_pod", ns), index).get(o.name(pod), [])
        except SourceError as err:
            self.cannot(f"events in namespace {ns}", err)
            return []


def check(ctx: WalkContext) -> LayerResult:
    w = _Walk(ctx)
    findings: list[Finding] = []
    try:
        nodes = ctx.examined_nodes()
    except SourceError as err:
        w.cannot("the nodes to examine", err)
        nodes = []
    try:
        operator: list[K8sObject] | None = ctx.operator_pods()
    except SourceError as err:
        w.cannot("the GPU Operator's pods", err)
        operator = None

    if operator == []:
        findings.append(
            finding(
                "L2_OPERATOR_NOT_FOUND",
                "no GPU Operator pods in any namespace: install the GPU Operator (or the device plugin) "
                "before looking further",
                evidence=[
                    "no pod labelled app=gpu-operator, app=nvidia-*-daemonset or "
                    "app.kubernetes.io/name=nvidia-device-plugin in any namespace"
                ],
                commands=["kubectl get pods -A -l app=gpu-operator", "kubectl get pods -A | grep -i nvidia"],
            )
        )
    sandbox = target_runtime_evidence(w)
    findings.extend(app_sees_no_gpu(w))
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
            shown = ", ".join(bare[:MAX_OK_NODES]) + (
                f" and {len(bare) - MAX_OK_NODES} more" if len(bare) > MAX_OK_NODES else ""
            )
            findings.append(
                unknown(
                    LAYER,
                    f"no GPU Operator pods run on {shown}: check the nodes' nvidia.com/gpu.deploy.* labels and "
                    "that Node Feature Discovery labels them as GPU nodes",
                    node=bare[0] if len(bare) == 1 else None,
                )
            )
    for node, lines in sandbox.items():  # the target's node had no operator pods to read
        findings.append(no_runtime_finding(node, lines, []))
    return LayerResult.build(LAYER, [*_merge_ok(findings), *w.unknowns()])


def _merge_ok(findings: list[Finding]) -> list[Finding]:
    """One L2_OK for a fleet of healthy nodes instead of one per node."""
    oks = [f for f in findings if f.code == "L2_OK"]
    if len(oks) <= MAX_OK_NODES:
        return findings
    rest = [f for f in findings if f.code != "L2_OK"]
    names = [f.node or "" for f in oks]
    shown = ", ".join(names[:MAX_OK_NODES])
    return [
        *rest,
        finding(
            "L2_OK",
            f"the GPU Operator's pods are Ready and validated on {len(oks)} examined nodes",
            evidence=[
                f"nodes: {shown}"
                + (f" … and {len(names) - MAX_OK_NODES} more" if len(names) > MAX_OK_NODES else "")
            ],
            commands=[oks[0].commands[0].rsplit(" --field-selector", 1)[0]],
        ),
    ]


# --- the target pod ---------------------------------------------------------------------


def status_messages(pod: K8sObject) -> list[str]:
    """Every message a pod's status carries: pod, conditions, container states."""
    status = pod.get("status") or {}
    out = [str(status.get("message") or "")]
    out += [str(c.get("message") or "") for c in status.get("conditions") or []]
    for _init, cs in o.iter_all_statuses(pod):
        for key in ("state", "lastState"):
            for st in (cs.get(key) or {}).values():
                if isinstance(st, dict):
                    out.append(str(st.get("message") or ""))
    return [m for m in out if m]


def runtime_lines(pod: K8sObject, events: Iterable[K8sObject]) -> list[str]:
    """`no runtime for "nvidia"` in a pod's events and status, as evidence lines."""
    who = f"{o.namespace(pod)}/{o.name(pod)}"
    lines = [
        f"{who}: {sig.event_line(e)}" for e in events if sig.NO_RUNTIME_NVIDIA.matches(sig.event_message(e))
    ]
    lines += [
        f"{who} status: {' '.join(m.split())}"
        for m in status_messages(pod)
        if sig.NO_RUNTIME_NVIDIA.matches(m)
    ]
    return lines


def target_runtime_evidence(w: _Walk) -> dict[str, list[str]]:
    pod, node = w.ctx.pod, w.ctx.bound_node
    if pod is None or not node:
        return {}
    ns, name = o.namespace(pod), o.name(pod)
    try:
        events = w.ctx.events("Pod", ns, name)
    except SourceError as err:
        w.cannot(f"the events of {ns}/{name}", err, node)
        events = []
    lines = runtime_lines(pod, events)
    return {node: lines} if lines else {}


def app_sees_no_gpu(w: _Walk) -> list[Finding]:
    pod, node = w.ctx.pod, w.ctx.bound_node
    if pod is None or not node:
        return []
    ns, name = o.namespace(pod), o.name(pod)
    statuses = {str(s.get("name")): s for _init, s in o.iter_all_statuses(pod)}
    evidence: list[str] = []
    commands: list[str] = []
    for c in [*o.containers(pod, init=True), *o.containers(pod)]:
        cname = str(c.get("name"))
        st = statuses.get(cname, {})
        restarted = bool(st.get("restartCount")) or bool((st.get("lastState") or {}).get("terminated"))
        for previous in (False, True) if restarted else (False,):
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
    return [
        finding(
            "L2_APP_SEES_NO_GPU",
            f"{ns}/{name} runs but its application finds no usable GPU: {first}",
            evidence=evidence,
            commands=[*commands, f"kubectl exec -n {ns} {name} -- nvidia-smi"],
            node=node,
        )
    ]


# --- the operator's pods on one node ----------------------------------------------------


def node_checks(
    w: _Walk, node: str, pods: list[K8sObject], sandbox: list[str], read_all_logs: bool
) -> list[Finding]:
    live = [p for p in pods if o.pod_phase(p) != "Succeeded" and not p["metadata"].get("deletionTimestamp")]
    for p in live:
        sandbox += runtime_lines(p, w.pod_events(p))
    out: list[Finding] = []
    if sandbox:
        out.append(no_runtime_finding(node, sandbox, live))
    out += waiting_for_driver(w, node, live)
    out += validator_stuck(w, node, live)
    out += device_plugin_nvml(w, node, live, read_all_logs)
    out += operand_failing(w, node, live)
    if any(f.severity >= Severity.WARN for f in out):
        return out
    not_ready = [p for p in live if not o.pod_ready(p)]
    ns = o.namespace(pods[0])
    listing = f"kubectl get pods -n {ns} -o wide --field-selector spec.nodeName={node}"
    if not_ready:
        out.append(
            unknown(
                LAYER,
                f"{len(not_ready)} GPU Operator pod(s) on {node} are not Ready for no reason the bot recognises: "
                "read their events and logs",
                node=node,
                evidence=[f"{o.name(p)}: {display_status(p)}" for p in not_ready],
            )
        )
        return out
    validators = [p for p in live if component(p) == "validator"]
    out.append(
        finding(
            "L2_OK",
            f"the GPU Operator's {len(live)} pod(s) on {node} are Ready"
            + (" and the validator passed" if validators else " (no validator pod on the node)"),
            evidence=[f"{o.name(p)}: {display_status(p)}" for p in live],
            commands=[listing],
            node=node,
        )
    )
    return out


def display_status(pod: K8sObject) -> str:
    """kubectl's STATUS column with READY and RESTARTS: `Init:0/4`, `Init:CrashLoopBackOff`, `Running`…"""
    inits = o.container_statuses(pod, init=True)
    mains = o.container_statuses(pod)
    restarts = sum(int(s.get("restartCount") or 0) for _i, s in o.iter_all_statuses(pod))
    ready = f"{sum(1 for s in mains if s.get('ready'))}/{len(o.containers(pod)) or len(mains)}"
    n_init = len(o.containers(pod, init=True)) or len(inits)
    status = o.pod_phase(pod)
    for i, s in enumerate(inits):
        term = (s.get("state") or {}).get("terminated")
        if term and term.get("exitCode") == 0:
            continue
        reason = o.waiting_reason(s)
        if term:
            status = f"Init:{term.get('reason') or 'Error'}"
        elif reason and reason != "PodInitializing":
            status = f"Init:{reason}"
        else:
            status = f"Init:{i}/{n_init}"
        break
    else:
        for s in mains:
            reason = o.waiting_reason(s) or ((s.get("state") or {}).get("terminated") or {}).get("reason")
            if reason:
                status = str(reason)
                break
    return f"{status}, ready {ready}, restarts {restarts}"


def in_init(pod: K8sObject) -> bool:
    """Still running its init containers (some init container has not completed)."""
    inits = o.container_statuses(pod, init=True)
    if not inits:
        return o.pod_phase(pod) == "Pending" and bool(o.containers(pod, init=True))
    return any(((s.get("state") or {}).get("terminated") or {}).get("exitCode") != 0 for s in inits)


def no_runtime_finding(node: str, lines: list[str], pods: list[K8sObject]) -> Finding:
    toolkit = [p for p in pods if component(p) == "toolkit"]
    ns = o.namespace(toolkit[0]) if toolkit else "gpu-operator"
    logs = (
        f"kubectl logs -n {ns} {o.name(toolkit[0])} -c nvidia-container-toolkit-ctr"
        if toolkit
        else f"kubectl logs -n {ns} -l app=nvidia-container-toolkit-daemonset -c nvidia-container-toolkit-ctr"
    )
    first_pod = lines[0].split(":", 1)[0].split(" ", 1)[0]
    pns, _, pname = first_pod.partition("/")
    return finding(
        "L2_NO_RUNTIME_NVIDIA",
        f'the container runtime on {node} has no "nvidia" runtime handler: the NVIDIA Container Toolkit '
        "did not register it (a toolkit problem, not a driver problem)",
        evidence=sig.tail("\n".join(dict.fromkeys(lines)), 8),
        commands=[f"kubectl describe pod -n {pns} {pname} | tail -20", logs, "kubectl get runtimeclasses"],
        node=node,
    )


def waiting_for_driver(w: _Walk, node: str, pods: list[K8sObject]) -> list[Finding]:
    drivers = [p for p in pods if component(p) == "driver" and not o.pod_ready(p)]
    stuck = [p for p in pods if component(p) != "driver" and in_init(p)]
    if not drivers or not stuck:
        return []
    driver = drivers[0]
    ns, dname = o.namespace(driver), o.name(driver)
    evidence = [f"driver pod {dname}: {display_status(driver)}"]
    for s in o.container_statuses(driver):
        if str(s.get("name")) == "nvidia-driver-ctr" or len(o.container_statuses(driver)) == 1:
            evidence += [f"nvidia-driver-ctr: {line}" for line in w.last_lines(driver, s)]
    evidence += [f"{o.name(p)}: {display_status(p)}" for p in stuck]
    return [
        finding(
            "L2_WAITING_FOR_DRIVER",
            f"{len(stuck)} GPU Operator pod(s) on {node} are stuck in Init because the driver pod {dname} "
            "is not Ready: fix the driver first, nothing else will explain it",
            evidence=evidence,
            commands=[
                f"kubectl get pods -n {ns} -o wide --field-selector spec.nodeName={node}",
                f"kubectl logs -n {ns} {dname} -c nvidia-driver-ctr",
                f"kubectl logs -n {ns} {dname} -c k8s-driver-manager",
            ],
            node=node,
        )
    ]


def _state_text(s: dict[str, Any]) -> str:
    state = s.get("state") or {}
    if "waiting" in state:
        return f"waiting: {(state['waiting'] or {}).get('reason') or 'waiting'}"
    if "terminated" in state:
        t = state["terminated"] or {}
        return f"terminated: {t.get('reason') or 'Error'} (exit code {t.get('exitCode')})"
    if "running" in state:
        return "running (not finished)"
    return "no state reported"


def stopped_stage(pod: K8sObject) -> tuple[str, dict[str, Any]]:
    """The first init container that has not succeeded, else the first unready container."""
    inits = {str(s.get("name")): s for s in o.container_statuses(pod, init=True)}
    order = [str(c.get("name")) for c in o.containers(pod, init=True)] or list(inits)
    for name in order:
        s = inits.get(name, {"name": name})
        if ((s.get("state") or {}).get("terminated") or {}).get("exitCode") != 0:
            return name, s
    for s in o.container_statuses(pod):
        if not s.get("ready"):
            return str(s.get("name")), s
    main = o.containers(pod)
    name = str(main[0].get("name")) if main else "nvidia-operator-validator"
    return name, {"name": name}


def validator_stuck(w: _Walk, node: str, pods: list[K8sObject]) -> list[Finding]:
    out = []
    for pod in pods:
        if component(pod) != "validator" or o.pod_ready(pod):
            continue
        ns, name = o.namespace(pod), o.name(pod)
        stage, status = stopped_stage(pod)
        restarts = int(status.get("restartCount") or 0)
        lines = w.last_lines(pod, status)
        meaning = STAGE_MEANING.get(stage, "a validation step has not passed")
        out.append(
            finding(
                "L2_VALIDATOR_STUCK",
                f"{name} on {node} stopped at {stage}: {meaning}",
                evidence=[
                    f"{name}: {display_status(pod)}",
                    f"{stage}: {_state_text(status)}, restarts {restarts}",
                    *(f"{stage} log: {line}" for line in lines),
                ],
                commands=[
                    f"kubectl logs -n {ns} {name} -c {stage}" + (" --previous" if restarts else ""),
                    f"kubectl describe pod -n {ns} {name}",
                ],
                node=node,
                next=3 if stage == "driver-validation" else None,
            )
        )
    return out


def plugin_containers(pod: K8sObject) -> list[str]:
    names = [str(c.get("name")) for c in o.containers(pod)]
    known = [n for n in names if n in DEVICE_PLUGIN_CONTAINERS]
    if known:
        return known
    guess = [n for n in names if "device-plugin" in n and "config" not in n]
    return guess or names[:1] or list(DEVICE_PLUGIN_CONTAINERS)


def device_plugin_nvml(w: _Walk, node: str, pods: list[K8sObject], read_all_logs: bool) -> list[Finding]:
    out = []
    for pod in pods:
        if component(pod) != "device-plugin":
            continue
        restarts = sum(int(s.get("restartCount") or 0) for _i, s in o.iter_all_statuses(pod))
        if not read_all_logs and o.pod_ready(pod) and not restarts:
            continue
        ns, name = o.namespace(pod), o.name(pod)
        for cname in plugin_containers(pod):
            for previous in (False, True) if restarts else (False,):
                text = w.log(pod, cname, previous)
                hits = sig.DEVICE_PLUGIN_NVML_FAILED.find(text, 3)
                if not hits:
                    continue
                # The plugin's own hints follow the failure (runtime, toolkit, prerequisites).
                after = sig.lines_of(text)
                at = after.index(hits[0])
                context = [ln for ln in after[at + 1 : at + 3] if ln not in hits]
                flag = " --previous" if previous else ""
                out.append(
                    finding(
                        "L2_DEVICE_PLUGIN_NVML_FAILED",
                        f"the device plugin {name} on {node} cannot start NVML: the driver library is not "
                        "reachable in its container (container toolkit/runtime or the driver)",
                        evidence=[
                            f"{cname}{' (previous)' if previous else ''}: {ln}" for ln in [*hits, *context]
                        ],
                        commands=[
                            f"kubectl logs -n {ns} {name} -c {cname}{flag} | grep -iE 'nvml|runtime'",
                            f"kubectl describe pod -n {ns} {name}",
                        ],
                        node=node,
                    )
                )
                break
    return out


_REASON_HINT = {
    "ImagePullBackOff": "the image cannot be pulled: check registry, tag and pull secret",
    "ErrImagePull": "the image cannot be pulled: check registry, tag and pull secret",
    "InvalidImageName": "the image name is invalid: check the ClusterPolicy's repository/image/version",
    "CreateContainerConfigError": "a ConfigMap or Secret it references is missing",
}


def operand_failing(w: _Walk, node: str, pods: Sequence[K8sObject]) -> list[Finding]:
    out = []
    for pod in pods:
        ns, name = o.namespace(pod), o.name(pod)
        for is_init, s in o.iter_all_statuses(pod):
            reason = sig.failing_wait_reason(o.waiting_reason(s))
            if not reason:
                continue
            cname, restarts = str(s.get("name")), int(s.get("restartCount") or 0)
            kind = "init container" if is_init else "container"
            evidence = [f"{name} {kind} {cname}: {reason}, restarts {restarts}"]
            waiting_msg = ((s.get("state") or {}).get("waiting") or {}).get("message")
            if waiting_msg:
                evidence.append(f"message: {' '.join(str(waiting_msg).split())}")
            last = (s.get("lastState") or {}).get("terminated") or {}
            if last:
                msg = " ".join(str(last.get("message") or "").split())
                evidence.append(
                    f"last terminated: {last.get('reason')} (exit code {last.get('exitCode')}) {msg}".strip()
                )
            evidence += [f"log: {line}" for line in w.last_lines(pod, s)]
            hint = _REASON_HINT.get(reason, "read its last log lines")
            out.append(
                finding(
                    "L2_OPERAND_FAILING",
                    f"{name} on {node}: {kind} {cname} is {reason} ({restarts} restarts): {hint}",
                    evidence=evidence,
                    commands=[
                        f"kubectl logs -n {ns} {name} -c {cname}" + (" --previous" if restarts else ""),
                        f"kubectl describe pod -n {ns} {name}",
                    ],
                    node=node,
                )
            )
    return out
