"""Layer 3: driver and toolkit versions (spec/findings.md, layer 3).

Three usual causes (playbook): the kernel changed under the driver module, the
nodes run different OS/kernel versions than the driver image fits, or the host
already has a driver while the operator installs another. Per examined node the
driver container's log tells the first and third; the GFD labels and
status.nodeInfo, compared with the majority of the node's driver pool
(layers/facts/driverpool.py), tell the second.
"""

from __future__ import annotations

import msgspec

from layers.driver_missing import driver_pod_missing
from layers.driver_too_old import driver_too_old
from layers.driverimage import driver_image_unavailable
from layers.facts import driverlogs as dl
from layers.facts import fleet as fl
from layers.facts import objects as o
from layers.facts import podstatus as ps
from layers.facts.context import WalkContext, component
from layers.facts.fold import fold
from layers.facts.logs import LogReads
from layers.facts.logsigs import Signature, clean_line, event_message, lines_of
from layers.findings import Finding, LayerResult, finding, unknown
from layers.sources import K8sObject, SourceError

LAYER = 3
DRIVER_CTR = "nvidia-driver-ctr"
DRIVER_MANAGER = "k8s-driver-manager"
DTK_CTR = "openshift-driver-toolkit-ctr"
VALIDATOR_COMPONENTS = ("validator", "cuda-validator", "plugin-validator")
MAX_EVIDENCE = 8


# Containers to try when a (sparse) pod object names none.
_FALLBACK_CONTAINERS: dict[str, tuple[str, ...]] = {
    "driver": (DRIVER_CTR,),
    "validator": ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
    "cuda-validator": ("cuda-validation", "nvidia-cuda-validator"),
    "plugin-validator": ("plugin-validation", "nvidia-device-plugin-validator"),
}


class _Reads(LogReads):
    """Layer 3's reads: the walk's log reader (layers/facts/logs.py) and the pods' events; `held`
    keeps layer 3's own unknowns (a check that could not be judged), one per node and kind."""

    def __init__(self, ctx: WalkContext) -> None:
        super().__init__(ctx, LAYER)
        self.held: dict[str, Finding] = {}

    def events(self, pod: K8sObject, node: str | None) -> list[K8sObject]:
        try:
            return self.ctx.events("Pod", o.namespace(pod), o.name(pod))
        except SourceError as err:
            self.refused(f"events of pod {o.namespace(pod)}/{o.name(pod)}", err, node)
            return []


def _logs_cmd(pod: K8sObject, container: str, previous: bool = False) -> str:
    prev = " --previous" if previous else ""
    return f"kubectl logs -n {o.namespace(pod)} {o.name(pod)} -c {container}{prev}"


# --- per node: driver container, host driver, fabric manager ----------------------


class _DriverLog(msgspec.Struct):
    pod: K8sObject
    failures: list[tuple[str, str]]  # (advice, line)
    host_driver: list[str]
    manager: list[str]
    kernel: str | None
    soft: list[str]  # apt warnings about unreachable mirrors, evidence beside a failure
    containers: list[str]  # the containers whose logs showed the failures

    @property
    def manager_failing(self) -> bool:
        return bool(self.manager)


def _scan_container(
    reads: _Reads, pod: K8sObject, container: str, node: str, ready: Signature
) -> list[tuple[str, dl.DriverLogScan]]:
    """The scans of one container's current log and, when it restarted, the previous one."""
    current = reads.log(pod, container, False)
    texts = [(container, current)]
    # A container that came up since (ready marker in the current log) makes older failures history.
    if ps.restarted(pod, container) and not ready.find(current, 1):
        texts.insert(0, (f"{container} (previous)", reads.log(pod, container, True)))
    return [(name, dl.scan_driver_log(text, ready)) for name, text in texts if text]


def _read_driver(reads: _Reads, pod: K8sObject, node: str) -> _DriverLog:
    failures: list[tuple[str, str]] = []
    host: list[str] = []
    soft: list[str] = []
    kernel: str | None = None
    where: list[str] = []
    names = ps.container_names(pod, [DRIVER_CTR])
    # NVIDIADriver-managed pods keep the container name; anything else named *driver* is the fallback.
    main = (
        DRIVER_CTR
        if DRIVER_CTR in names
        else next(
            (c for c in names if "driver" in c and "manager" not in c and "toolkit" not in c), DRIVER_CTR
        )
    )
    scans = _scan_container(reads, pod, main, node, dl.DRIVER_READY)
    # On OpenShift the modules are built in the Driver Toolkit container; nvidia-driver-ctr only waits.
    if DTK_CTR in names:
        scans += _scan_container(reads, pod, DTK_CTR, node, dl.DTK_READY)
    for name, scan in scans:
        failures += scan.failures
        host += scan.host_driver
        soft += scan.soft
        kernel = scan.kernel or kernel
        if scan.failures:
            where.append(name)
    manager: list[str] = []
    if DRIVER_MANAGER in names:
        st = ps.container_status(pod, DRIVER_MANAGER)
        if st is None or ps.status_failing(st, init=True):
            for prev in (False, True) if ps.restarted(pod, DRIVER_MANAGER) else (False,):
                for ln in lines_of(reads.log(pod, DRIVER_MANAGER, prev)):
                    if dl.MANAGER_HOST_DRIVER.matches(ln):
                        host.append(dl.excerpt(ln, dl.MANAGER_HOST_DRIVER))
                    elif dl.MANAGER_PROBLEM.search(ln):
                        manager.append(dl.excerpt(ln))
    return _DriverLog(pod, failures, host, list(dict.fromkeys(manager)), kernel, soft, where)


def _build_failed(log: _DriverLog, node: str, node_obj: K8sObject | None) -> Finding:
    kernel = log.kernel or o.node_info(node_obj or {}).get("kernelVersion") or "unknown kernel"
    cause = dl.most_specific(log.failures) or ""
    if log.soft and cause in (dl.ADVICE["kernel-headers"], dl.ADVICE["precompiled"]):
        # apt could not fetch the index: the package may exist, the mirror was unreachable.
        cause += " (apt could not fetch part of the package index: check the node's egress/proxy first)"
    lines = list(dict.fromkeys(ln for _, ln in log.failures))[:MAX_EVIDENCE]
    evidence = [f"kernel: {kernel}", *lines, *log.soft[:3]]
    evidence += [f"{DRIVER_MANAGER}: {ln}" for ln in log.manager[:3]]
    pod = log.pod
    commands = [_logs_cmd(pod, DRIVER_CTR)]
    if ps.restarted(pod, DRIVER_CTR):
        # kubectl refuses --previous for a container that never restarted.
        commands.append(_logs_cmd(pod, DRIVER_CTR, previous=True))
    if any(w.startswith(DTK_CTR) for w in log.containers):
        commands.append(_logs_cmd(pod, DTK_CTR))
    commands += [_logs_cmd(pod, DRIVER_MANAGER), "kubectl get nodes -o wide"]
    return finding(
        "L3_DRIVER_BUILD_FAILED",
        f"NVIDIA driver could not be built/loaded on {node} (kernel {kernel}): {cause}",
        evidence=evidence,
        commands=commands,
        node=node,
    )


def _manager_stuck(log: _DriverLog, failing: list[str], node: str) -> Finding:
    """The driver pod stops in k8s-driver-manager: the driver build never started, so it cannot be judged."""
    pod = log.pod
    return unknown(
        LAYER,
        f"the driver pod {o.namespace(pod)}/{o.name(pod)} on {node} is stuck in its {DRIVER_MANAGER} init "
        "container (evicting GPU pods / draining the node / unloading the old driver), so the driver build "
        "has not started and cannot be judged: free the GPUs on the node (stop GPU workloads or drain it) "
        "or fix the error shown",
        node=node,
        evidence=[*failing, *(f"{DRIVER_MANAGER}: {ln}" for ln in log.manager[-5:])],
    )


def _operands_on(ctx: WalkContext, node: str, *components: str) -> list[K8sObject]:
    """Operator pods of these components on the node (the context indexes them by node once per walk)."""
    return [p for p in ctx.operator_pods_on(node) if component(p) in components]


def _host_driver_in_validators(reads: _Reads, pods: list[K8sObject], node: str) -> list[str]:
    out: list[str] = []
    for pod in pods:
        if component(pod) != "validator":
            continue
        for prev in (False, True) if ps.restarted(pod, "driver-validation") else (False,):
            text = reads.log(pod, "driver-validation", prev)
            out += [ln for ln in lines_of(text) if dl.HOST_DRIVER.matches(ln)][:2]
    return out


def _driver_enabled(reads: _Reads, node: str) -> tuple[bool | None, str]:
    """(enabled?, evidence) from the ClusterPolicy; None when it cannot be read."""
    try:
        policies = reads.ctx.custom("nvidia.com", "v1", "clusterpolicies")
    except SourceError as err:
        reads.refused("ClusterPolicy (to confirm spec.driver.enabled)", err, node)
        return None, ""
    if not policies:
        # A driver pod exists, so something deploys it: no policy reads as "unset".
        return True, "no ClusterPolicy found: spec.driver.enabled unset (defaults to true)"
    policy = policies[0]
    enabled = ((policy.get("spec") or {}).get("driver") or {}).get("enabled")
    text = "unset (defaults to true)" if enabled is None else str(enabled).lower()
    return enabled is not False and str(enabled).lower() != "false", (
        f"ClusterPolicy {o.name(policy)}: spec.driver.enabled={text}"
    )


def _conflict(
    log: _DriverLog,
    failing: list[str],
    validator_lines: list[str],
    policy: str,
    node: str,
    validators: list[K8sObject],
) -> Finding:
    pod = log.pod
    # The node's own validator pods, so the command can be pasted as is (its namespace is known).
    validator_cmds = [_logs_cmd(v, "driver-validation") for v in validators if component(v) == "validator"]
    return finding(
        "L3_PREINSTALLED_DRIVER_CONFLICT",
        f"{node} already has an NVIDIA driver on the host while the operator installs its own: "
        "set driver.enabled=false in the ClusterPolicy/Helm values (and toolkit.enabled=false if the "
        "host's toolkit is preconfigured)",
        evidence=[
            *list(dict.fromkeys(validator_lines + log.host_driver))[:MAX_EVIDENCE],
            *(f"driver pod {o.namespace(pod)}/{o.name(pod)} {why}" for why in failing),
            policy,
        ],
        commands=[
            _logs_cmd(pod, DRIVER_CTR),
            *(
                validator_cmds
                or [
                    f"kubectl logs -n {o.namespace(pod)} -l app=nvidia-operator-validator -c driver-validation"
                ]
            ),
            "kubectl get clusterpolicies.nvidia.com -o jsonpath='{.items[*].spec.driver.enabled}'",
        ],
        node=node,
    )


def _driver_findings(reads: _Reads, node: str, node_obj: K8sObject | None) -> list[Finding]:
    try:
        drivers = _operands_on(reads.ctx, node, "driver")
        validators = _operands_on(reads.ctx, node, "validator")
    except SourceError as err:
        reads.refused("the GPU Operator's pods", err, node)
        return []
    out: list[Finding] = driver_image_unavailable(reads.ctx, node, drivers)
    if out:
        return out  # no image, no container: there is no log to read
    if not drivers:
        missing = driver_pod_missing(reads, node, node_obj)
        if missing is not None:
            reads.held.setdefault(f"nodriver:{node}", missing)
    for pod in drivers:
        if o.pod_ready(pod) or o.pod_phase(pod) == "Succeeded":
            continue  # a Ready driver built and loaded its module
        log = _read_driver(reads, pod, node)
        failing = ps.failing(pod)
        host_lines = log.host_driver
        validator_lines = _host_driver_in_validators(reads, validators, node) if failing else []
        if failing and (host_lines or validator_lines):
            enabled, policy = _driver_enabled(reads, node)
            if enabled:
                out.append(_conflict(log, failing, validator_lines, policy, node, validators))
                continue
            if enabled is None:
                reads.held.setdefault(
                    f"conflict:{node}",
                    unknown(
                        LAYER,
                        f"{node} has a pre-installed host driver and its driver pod is failing, but the "
                        "ClusterPolicy could not be read to confirm spec.driver.enabled; grant 'list' on "
                        "'clusterpolicies.nvidia.com' cluster-wide, or set driver.enabled=false if it is true",
                        node=node,
                        evidence=(host_lines + validator_lines)[:MAX_EVIDENCE],
                    ),
                )
        if log.failures:
            out.append(_build_failed(log, node, node_obj))
        elif failing and log.manager_failing and not host_lines:
            reads.held.setdefault(f"manager:{node}", _manager_stuck(log, failing, node))
    return out


def _fabric_manager(reads: _Reads, node: str) -> list[Finding]:
    ctx = reads.ctx
    try:
        pods = _operands_on(ctx, node, "driver", *VALIDATOR_COMPONENTS)
    except SourceError as err:
        reads.refused("the GPU Operator's pods", err, node)
        return []
    evidence: list[str] = []
    commands: list[str] = []
    # The application's own CUDA output counts too, Ready or not (nothing probes CUDA in it).
    target = ctx.pod if ctx.pod is not None and o.pod_node(ctx.pod) == node else None
    for pod in pods + ([target] if target else []):
        if pod is not target and (o.pod_ready(pod) or o.pod_phase(pod) == "Succeeded"):
            continue  # validations that passed did run CUDA
        for c in ps.container_names(pod, _FALLBACK_CONTAINERS.get(component(pod) or "", ())):
            for prev in (False, True) if ps.restarted(pod, c) else (False,):
                text = reads.log(pod, c, prev)
                hits = [dl.excerpt(ln) for ln in lines_of(text) if dl.FABRIC_NOT_READY.matches(ln)][:3]
                if hits:
                    evidence += [f"{o.name(pod)}/{c}: {ln}" for ln in hits]
                    commands.append(_logs_cmd(pod, c, prev))
        for ev in reads.events(pod, node):
            msg = clean_line(event_message(ev))
            if dl.FABRIC_NOT_READY.matches(msg):
                evidence.append(f"event on {o.name(pod)}: {' '.join(msg.split())}")
                commands.append(f"kubectl describe pod -n {o.namespace(pod)} {o.name(pod)}")
        for _, s in o.iter_all_statuses(pod):
            for key in ("state", "lastState"):
                msg = str(((s.get(key) or {}).get("terminated") or {}).get("message") or "")
                if msg and dl.FABRIC_NOT_READY.matches(msg):
                    evidence.append(f"{o.name(pod)}/{s.get('name')} terminated: {' '.join(msg.split())}")
    if not evidence:
        return []
    drivers = [p for p in pods if component(p) == "driver"]
    # Fabric state from the driver container when the operator runs one, else from the host's driver.
    fabric = (
        f"kubectl exec -n {o.namespace(drivers[0])} {o.name(drivers[0])} -c {DRIVER_CTR} -- "
        "nvidia-smi -q | grep -A2 Fabric"
        if drivers
        else f"kubectl debug node/{node} -it --image=busybox -- chroot /host nvidia-smi -q | grep -A2 Fabric"
    )
    return [
        finding(
            "L3_FABRIC_MANAGER",
            f"CUDA on {node} reports the system is not yet initialized: an NVSwitch system needs "
            "nvidia-fabricmanager running with the driver (same version); start it or fix it",
            evidence=list(dict.fromkeys(evidence))[:MAX_EVIDENCE],
            commands=[
                *dict.fromkeys(commands),
                fabric,
            ],
            node=node,
        )
    ]


# --- the layer ------------------------------------------------------------------------


def check(ctx: WalkContext) -> LayerResult:
    try:
        examined = ctx.examined_nodes()
        spreads = fl.fleet_spreads(ctx)
        pools = fl.pools_table(ctx)
    except SourceError as err:
        hint = err.hint()
        return LayerResult.build(
            LAYER, [unknown(LAYER, f"could not list nodes: {err.message}" + (f"; {hint}" if hint else ""))]
        )
    if not examined:
        return LayerResult.build(
            LAYER,
            [unknown(LAYER, "no GPU node to examine for driver versions (the pod is not scheduled and has no "
                     "candidate node): layer 1 says why")],
        )  # fmt: skip
    findings: list[Finding] = []
    reads = _Reads(ctx)
    for node in examined:
        node_obj = ctx.node(node)
        findings += _driver_findings(reads, node, node_obj)
        findings += _fabric_manager(reads, node)
        findings += fl.upgrade_failed(node, node_obj, fl.upgrade_events(reads, node, node_obj))
    findings += driver_too_old(ctx, reads.log)
    findings += fl.pool_skews(ctx, examined)
    findings = fold(findings) + reads.unknowns() + list(reads.held.values())
    if not findings:
        one = examined[0] if len(examined) == 1 else None
        if one:
            facts = [f"{s.what}: {s.value(one) or 'not reported'}" for s in spreads]
        else:
            facts = [s.table() for s in spreads if s.counts]
        # Several driver branches in several pools are how the operator is meant to be used: said, not flagged.
        facts += [pools] if pools else []
        facts += fl.overlap_notes(ctx, examined)
        findings.append(
            finding(
                "L3_OK",
                f"No driver build, host-driver, fabric-manager, driver-age or version-skew problem on {one or 'the examined nodes'}",
                evidence=facts,
                commands=[
                    "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full"
                ],
                node=one,
            )
        )
    return LayerResult.build(LAYER, findings)
