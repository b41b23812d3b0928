"""Layer 2 on one node: what the GPU Operator's pods there say.

The validator gates each stage in order, so it tells fastest where things
stopped; then sandbox events (`no runtime for "nvidia"`), operands stuck in
Init behind the driver, the device plugin's NVML start-up and failing operand
containers. Reads go through `Reads`, the walk's log reader (layers/facts/logs.py),
which turns each failed read into one `unknown` per cause.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts import podstatus as ps
from layers.facts.context import WalkContext, component
from layers.facts.deployments import plugin_containers
from layers.facts.logs import LogReads
from layers.findings import Finding, Severity, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 2  # these checks are layer 2's (layers/runtime.py)
STAGE_MEANING = {
    "driver-validation": "the driver is not ready on the node (see layer 3)",
    "toolkit-validation": "the NVIDIA Container Toolkit cannot run nvidia-smi in a container",
    "cuda-validation": "a CUDA sample workload could not run on the GPU",
    "plugin-validation": "the node does not advertise GPU resources: the device plugin has not registered",
}
TAIL = 5


class Reads(LogReads):
    """One run of layer 2: the walk's log reader (layers/facts/logs.py) and layer 2's event index."""

    def __init__(self, ctx: WalkContext) -> None:
        super().__init__(ctx, LAYER)

    def last_lines(self, pod: K8sObject, status: dict[str, Any]) -> list[str]:
        """The container's last log lines: the crashed instance's when it restarted."""
        name = str(status.get("name"))
        text = self.log(pod, name, previous=True) if ps.restarted(pod, name) else None
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
            self.refused(f"events in namespace {ns}", err)
            return []


def runtime_lines(pod: K8sObject, events: Iterable[K8sObject]) -> list[str]:
    """`no runtime for "nvidia"` in a pod's events and status, as evidence lines."""
    who = f"{o.namespace(pod)}/{o.name(pod)}"
    lines = [
        f"{who}: {sig.event_line(e)}" for e in events if sig.NO_RUNTIME_NVIDIA.matches(sig.event_message(e))
    ]
    lines += [
        f"{who} status: {' '.join(m.split())}"
        for m in ps.status_messages(pod)
        if sig.NO_RUNTIME_NVIDIA.matches(m)
    ]
    return lines


def node_checks(
    w: Reads, node: str, pods: list[K8sObject], sandbox: list[str], read_all_logs: bool
) -> list[Finding]:
    live = [p for p in pods if not _history(p)]
    no_sandbox: set[str] = set()  # pods whose containers never started: the runtime has no "nvidia" handler
    for p in live:
        lines = runtime_lines(p, w.pod_events(p))
        if lines:
            no_sandbox.add(o.name(p))
        sandbox += lines
    out: list[Finding] = []
    if sandbox:
        out.append(no_runtime_finding(node, sandbox, live))
    out += waiting_for_driver(w, node, live)
    # A validator without a sandbox ran no stage: naming one would blame the driver for the runtime.
    out += validator_stuck(w, node, [p for p in live if o.name(p) not in no_sandbox])
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
                evidence=[f"{o.name(p)}: {ps.display_status(p)}" for p in not_ready],
            )
        )
        return out
    validators = [p for p in live if component(p) == "validator"]
    out.append(
        finding(
            "L2_OK",
            f"the GPU Operator's {len(live)} pod(s) on {node} are Ready and the validator passed"
            if validators
            else f"the {len(live)} GPU pod(s) on {node} ({', '.join(sorted({component(p) or '?' for p in live}))}) "
            f"are Ready; there is no validator ({_without_validator(w, live)}), so nothing validated the "
            "driver, toolkit and CUDA stack",
            evidence=[f"{o.name(p)}: {ps.display_status(p)}" for p in live],
            commands=[listing],
            node=node,
        )
    )
    return out


def _without_validator(w: Reads, pods: Sequence[K8sObject]) -> str:
    """What runs instead of the operator's validated stack: the DRA driver, the operator without its
    validator on this node, or a standalone device plugin (only when nothing says the operator runs)."""
    if any(component(p) == "dra-kubelet-plugin" for p in pods):
        return "the NVIDIA DRA driver's kubelet plugin serves the GPUs"
    managed = _operator_manages(w, pods)
    if managed:
        return f"{managed}, but no nvidia-operator-validator pod runs on this node"
    return "a standalone device plugin"


def _operator_manages(w: Reads, pods: Sequence[K8sObject]) -> str | None:
    """How we know the GPU Operator deploys these pods: its own operand labels, its pod with a
    ClusterPolicy. None when neither says so (then the plugin is standalone)."""
    if any(o.labels(p).get("app") == "nvidia-device-plugin-daemonset" for p in pods):
        return "the device plugin is the GPU Operator's operand (app=nvidia-device-plugin-daemonset)"
    try:
        operator = [p for p in w.ctx.operator_pods() if component(p) == "operator"]
        policies = w.ctx.custom("nvidia.com", "v1", "clusterpolicies") if operator else []
    except SourceError:
        return None
    if operator and policies:
        return (
            f"the GPU Operator runs ({o.namespace(operator[0])}/{o.name(operator[0])}, ClusterPolicy "
            f"{o.name(policies[0])})"
        )
    return None


def _history(pod: K8sObject) -> bool:
    """A pod that no longer runs anything: completed, being deleted, or evicted (the DaemonSet replaced it)."""
    status = pod.get("status") or {}
    return (
        o.pod_phase(pod) == "Succeeded"
        or bool(pod["metadata"].get("deletionTimestamp"))
        or (o.pod_phase(pod) == "Failed" and status.get("reason") == "Evicted")
    )


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


def waiting_for_driver(w: Reads, node: str, pods: list[K8sObject]) -> list[Finding]:
    drivers = [p for p in pods if component(p) == "driver" and not o.pod_ready(p)]
    stuck = [p for p in pods if component(p) != "driver" and ps.in_init(p)]
    if not drivers or not stuck:
        return []
    driver = drivers[0]
    ns, dname = o.namespace(driver), o.name(driver)
    evidence = [f"driver pod {dname}: {ps.display_status(driver)}"]
    for s in o.container_statuses(driver):
        if str(s.get("name")) == "nvidia-driver-ctr" or len(o.container_statuses(driver)) == 1:
            evidence += [f"nvidia-driver-ctr: {line}" for line in w.last_lines(driver, s)]
    evidence += [f"{o.name(p)}: {ps.display_status(p)}" for p in stuck]
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


def validator_stuck(w: Reads, node: str, pods: list[K8sObject]) -> list[Finding]:
    out = []
    for pod in pods:
        if component(pod) != "validator" or o.pod_ready(pod):
            continue
        ns, name = o.namespace(pod), o.name(pod)
        stage, status = ps.stopped_stage(pod)
        restarts = int(status.get("restartCount") or 0)
        lines = w.last_lines(pod, status)
        # A stage the runtime refused to create never logged: its status message is the only witness
        # (OpenShift's `error executing hook …nvidia-container-runtime-hook`, gpu-operator issue 1598).
        said = [" ".join(str(m).split()) for m in _state_messages(status)]
        meaning = STAGE_MEANING.get(stage, "a validation step has not passed")
        out.append(
            finding(
                "L2_VALIDATOR_STUCK",
                f"{name} on {node} stopped at {stage}: {meaning}",
                evidence=[
                    f"{name}: {ps.display_status(pod)}",
                    f"{stage}: {ps.state_text(status)}, restarts {restarts}",
                    *(f"{stage} message: {m}" for m in said),
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


def _state_messages(status: dict[str, Any]) -> list[str]:
    """The waiting and last-terminated messages of a container status, when the kubelet gave them."""
    state, last = status.get("state") or {}, status.get("lastState") or {}
    found = [
        (state.get("waiting") or {}).get("message"),
        (state.get("terminated") or {}).get("message"),
        (last.get("terminated") or {}).get("message"),
    ]
    return [str(m) for m in found if m and not str(m).startswith("back-off ")]  # the kubelet's retry note


def _match_at(line: str) -> int:
    hit = sig.DEVICE_PLUGIN_NVML_FAILED.search(line)
    return hit.start() if hit else 0


def device_plugin_nvml(w: Reads, node: str, pods: list[K8sObject], read_all_logs: bool) -> list[Finding]:
    out = []
    for pod in pods:
        if component(pod) != "device-plugin":
            continue
        if not read_all_logs and o.pod_ready(pod) and not ps.restarts(pod):
            continue
        ns, name = o.namespace(pod), o.name(pod)
        for cname in plugin_containers(pod):
            for previous in (False, True) if ps.restarts(pod) else (False,):
                # By time and size, as layer 5 reads it (one read for both): NVML fails at start-up,
                # at the head of the log, not in its last lines.
                window = w.window(pod, cname, previous)
                lines = list(
                    dict.fromkeys(ln for t in (window.texts if window else ()) for ln in sig.lines_of(t))
                )
                at = [i for i, ln in enumerate(lines) if sig.DEVICE_PLUGIN_NVML_FAILED.matches(ln)][:3]
                if not at:
                    continue
                hits = [sig.clip(lines[i], _match_at(lines[i])) for i in at]
                # The plugin's own hints follow the failure (runtime, toolkit, prerequisites).
                context = [
                    sig.clip(lines[i]) for i in range(at[0] + 1, min(at[0] + 3, len(lines))) if i not in at
                ]
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


def _oom_hint(pod: K8sObject, cname: str) -> str:
    """An operand the kernel killed for memory (the driver container compiling under the ClusterPolicy's
    limit, a host under pressure): its log just stops, so say so instead of sending a person to it."""
    spec = pod.get("spec") or {}
    limit = next(
        (
            ((c.get("resources") or {}).get("limits") or {}).get("memory")
            for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
            if isinstance(c, dict) and c.get("name") == cname
        ),
        None,
    )
    where = (
        f"over its memory limit of {limit}" if limit else "for system memory (no limit set: the node ran out)"
    )
    return f"it was OOMKilled {where}: raise the limit in the operator's spec or free the node's memory"


def failing_reason(s: dict[str, Any]) -> str | None:
    """Why a container is failing, in kubectl's words: its waiting reason, or `Error` for a container
    caught between a failed run and its back-off (kubectl's `Init:Error`)."""
    reason = sig.failing_wait_reason(o.waiting_reason(s))
    if reason:
        return reason
    term = (s.get("state") or {}).get("terminated") or {}
    if term and term.get("exitCode") not in (0, None):
        return "Error"
    return None


def operand_failing(w: Reads, node: str, pods: Sequence[K8sObject]) -> list[Finding]:
    out = []
    for pod in pods:
        ns, name = o.namespace(pod), o.name(pod)
        for is_init, s in o.iter_all_statuses(pod):
            reason = failing_reason(s)
            if not reason:
                continue
            cname, restarts = str(s.get("name")), int(s.get("restartCount") or 0)
            kind = "init container" if is_init else "container"
            evidence = [f"{name} {kind} {cname}: {reason}, restarts {restarts}"]
            waiting_msg = ((s.get("state") or {}).get("waiting") or {}).get("message")
            if waiting_msg:
                evidence.append(f"message: {' '.join(str(waiting_msg).split())}")
            now = (s.get("state") or {}).get("terminated") or {}
            if now:
                msg = " ".join(str(now.get("message") or "").split())
                evidence.append(
                    f"terminated: {now.get('reason') or 'Error'} (exit code {now.get('exitCode')}) {msg}".strip()
                )
            last = (s.get("lastState") or {}).get("terminated") or {}
            if last:
                msg = " ".join(str(last.get("message") or "").split())
                evidence.append(
                    f"last terminated: {last.get('reason')} (exit code {last.get('exitCode')}) {msg}".strip()
                )
            evidence += [f"log: {line}" for line in w.last_lines(pod, s)]
            hint = _REASON_HINT.get(reason, "read its last log lines")
            if "OOMKilled" in (now.get("reason"), last.get("reason")):
                hint = _oom_hint(pod, cname)
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
