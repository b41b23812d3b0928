"""Layer 3: driver and toolkit versions (spec/findings.md, layer 3).

Three usual causes (playbook): the kernel changed under the driver module, the
nodes run different OS/kernel versions than the driver image fits, or the host
already has a driver while the operator installs another. Per examined node the
driver container's log tells the first and third; the GFD labels and
status.nodeInfo, compared with the majority of GPU nodes, tell the second.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from layers import objects as o
from layers.context import WalkContext, component
from layers.findings import Finding, LayerResult, finding, unknown
from layers.logsigs import Signature, lines_of
from layers.sources import K8sObject, SourceError

LAYER = 3
DRIVER_CTR = "nvidia-driver-ctr"
DRIVER_MANAGER = "k8s-driver-manager"
VALIDATOR_COMPONENTS = ("validator", "cuda-validator", "plugin-validator")
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
MAX_EVIDENCE = 8
MAX_PER_CODE = 10


def _sig(name: str, *phrases: str) -> Signature:
    """A case-insensitive signature; a space in a phrase matches any run of whitespace."""
    return Signature(name, tuple(re.compile(p.replace(" ", r"\s+"), re.IGNORECASE) for p in phrases))


_Q = r"""["'‘’`]?"""
# Build/load failures of the driver container (gpu-driver-container's nvidia-driver
# script, nvidia-installer, apt/dnf), most specific first: the first match names the cause.
BUILD_FAILURES: tuple[tuple[Signature, str], ...] = (
    (
        _sig("secure-boot", "not signed by a key that is trusted by the kernel", "key was rejected by service",
             "required key not available"),
        "the kernel refused the unsigned NVIDIA module (Secure Boot): sign the module, use signed "
        "precompiled drivers, or disable Secure Boot",
    ),
    (
        _sig("kernel-headers", "could not resolve linux kernel version", "could not locate linux kernel version string",
             "unable to find the kernel source tree", "unable to locate package linux-(?:headers|image|modules)",
             "no (?:package|match for argument:?) kernel-(?:headers|devel)",
             "unable to find a match:? kernel-(?:headers|devel|core)"),
        "no kernel headers/packages for the running kernel in the driver image's repositories: boot a "
        "kernel the driver supports, use precompiled drivers, or serve the packages (driver.repoConfig)",
    ),
    (
        _sig("package-cache", "failed to update (?:the )?package cache", r"\b[EW]: failed to fetch",
             "some index files failed to download", "temporary failure resolving", "could not resolve host",
             "failed to download metadata for repo", "cannot find a valid baseurl",
             "errors during downloading metadata", "could not retrieve mirrorlist", "cannot download repomd"),
        "the driver container cannot reach its package repositories: allow egress (or a proxy) from the "
        "node, or mirror them (driver.repoConfig)",
    ),
    (
        _sig("module-load", f"unable to load the (?:nvidia )?kernel module {_Q}nvidia",
             "kernel module failed to load", f"could not insert {_Q}nvidia", "modprobe: (?:fatal|error):.*nvidia"),
        "the NVIDIA kernel module was built but would not load: check that nouveau is blacklisted and the "
        "module matches the running kernel",
    ),
    (
        _sig("installer", "installation has failed", "an error occurred while performing the step",
             "failed to (?:build|install) the (?:nvidia )?kernel modules?",
             "error: failed to update the nvidia driver"),
        "nvidia-installer failed: read the driver container log and /var/log/nvidia-installer.log",
    ),
)  # fmt: skip
# The driver container finished its start-up: failures before it are history.
DRIVER_READY = _sig("driver-ready", "now waiting for signal")
# The host already has a driver (validator) or the module is held by one (driver container).
HOST_DRIVER = _sig(
    "host-driver", "detected a pre-?installed driver",
    "could not unload nvidia driver kernel modules?,? driver is in use",
    "an instance of the nvidia driver is already running", "module nvidia\\w* is in use",
    f"an nvidia kernel module {_Q}[\\w-]+{_Q} appears to (?:already be|be already) loaded",
)  # fmt: skip
FABRIC_NOT_READY = _sig(
    "system-not-yet-initialized", "system not yet initiali[sz]ed", "cudaErrorSystemNotReady",
    r"fabric\s*manager\b.*\b(?:fail|error|not running|exited|could not)",
    r"nv-fabricmanager.*\b(?:not found|failed|no such file)",
)  # fmt: skip
# Containers to try when a (sparse) pod object names none.
_FALLBACK_CONTAINERS: dict[str, tuple[str, ...]] = {
    "driver": (DRIVER_CTR,),
    "validator": ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"),
    "cuda-validator": ("cuda-validation", "nvidia-cuda-validator"),
    "plugin-validator": ("plugin-validation", "nvidia-device-plugin-validator"),
}
_KERNEL_IN_LOG = (
    re.compile(r"for\s+linux\s+kernel\s+version\s+(\S+)", re.IGNORECASE),
    re.compile(r"kernel\s+source\s+path:\s+'?/lib/modules/([^/'\s]+)", re.IGNORECASE),
)


# --- reads ------------------------------------------------------------------------


class _Reads:
    """Reads for one node that turn a SourceError into one `unknown` finding each."""

    def __init__(self, ctx: WalkContext) -> None:
        self.ctx = ctx
        self.unknowns: dict[str, Finding] = {}

    def fail(self, what: str, err: SourceError, node: str | None) -> None:
        hint = err.hint()
        summary = f"could not read {what}: {err.message}" + (f"; {hint}" if hint else "")
        self.unknowns.setdefault(summary, unknown(LAYER, summary, node=node))

    def log(self, pod: K8sObject, container: str, previous: bool, node: str | None) -> str | None:
        ns, name = o.namespace(pod) or "default", o.name(pod)
        try:
            return self.ctx.log(ns, name, container, previous)
        except SourceError as err:
            # Asking for the previous log of a container that never restarted is not a fault.
            if previous and err.kind == "bad_input":
                return None
            self.fail(f"the log of {ns}/{name} container {container}", err, node)
            return None

    def events(self, pod: K8sObject, node: str | None) -> list[K8sObject]:
        try:
            return self.ctx.events("Pod", o.namespace(pod), o.name(pod))
        except SourceError as err:
            self.fail(f"events of pod {o.namespace(pod)}/{o.name(pod)}", err, node)
            return []


def _logs_cmd(pod: K8sObject, container: str, previous: bool = False) -> str:
    prev = " --previous" if previous else ""
    return f"kubectl logs -n {o.namespace(pod)} {o.name(pod)} -c {container}{prev}"


def _container_names(pod: K8sObject, fallback: Iterable[str]) -> list[str]:
    names = [c.get("name") for c in o.containers(pod, init=True) + o.containers(pod)]
    names += [s.get("name") for _, s in o.iter_all_statuses(pod)]
    out = list(dict.fromkeys(str(n) for n in names if n))
    return out or list(fallback)


def _status(pod: K8sObject, container: str) -> dict[str, Any] | None:
    for _, s in o.iter_all_statuses(pod):
        if s.get("name") == container:
            return s
    return None


def _restarted(pod: K8sObject, container: str) -> bool:
    """Whether a previous log may exist; unknown status (a sparse scenario) counts as yes."""
    s = _status(pod, container)
    return s is None or int(str(s.get("restartCount") or 0)) > 0 or bool(s.get("lastState"))


def _status_failing(s: dict[str, Any], init: bool) -> str | None:
    """Why one container is failing, or None."""
    kind = "init container" if init else "container"
    restarts = int(str(s.get("restartCount") or 0))
    waiting = o.waiting_reason(s)
    term = (s.get("state") or {}).get("terminated") or {}
    last = (s.get("lastState") or {}).get("terminated") or {}
    if waiting and waiting not in ("ContainerCreating", "PodInitializing"):
        return f"{kind} {s.get('name')}: {waiting}, {restarts} restarts"
    if term and term.get("exitCode") not in (0, None):
        return f"{kind} {s.get('name')}: {term.get('reason') or 'exited'} {term.get('exitCode')}"
    if not s.get("ready") and not init and (restarts > 0 or last.get("exitCode") not in (0, None)):
        return f"{kind} {s.get('name')}: not ready, {restarts} restarts"
    return None


def _failing(pod: K8sObject) -> list[str]:
    """Why a pod is failing, one line per container; empty when it is not."""
    out = [why for init, s in o.iter_all_statuses(pod) if (why := _status_failing(s, init))]
    if not out and o.pod_phase(pod) == "Failed":
        out.append(f"pod phase Failed: {(pod.get('status') or {}).get('reason') or ''}".strip())
    return out


# --- per node: driver container, host driver, fabric manager ----------------------


@dataclass
class _DriverLog:
    pod: K8sObject
    failures: list[tuple[str, str]]  # (cause, line)
    host_driver: list[str]
    manager: list[str]
    kernel: str | None


def _read_driver(reads: _Reads, pod: K8sObject, node: str) -> _DriverLog:
    failures: list[tuple[str, str]] = []
    host: list[str] = []
    kernel: str | None = None
    names = _container_names(pod, [DRIVER_CTR])
    # NVIDIADriver-managed pods keep the container name; anything else named *driver* is the fallback.
    main = (
        DRIVER_CTR
        if DRIVER_CTR in names
        else next((c for c in names if "driver" in c and "manager" not in c), DRIVER_CTR)
    )
    current = reads.log(pod, main, False, node)
    texts = [current]
    # A driver that came up since (ready marker in the current log) makes older failures history.
    if _restarted(pod, main) and not DRIVER_READY.find(current, 1):
        texts.insert(0, reads.log(pod, main, True, node))
    for text in texts:
        lines = lines_of(text)
        cut = max((i for i, ln in enumerate(lines) if DRIVER_READY.matches(ln)), default=-1)
        for ln in lines[cut + 1 :]:
            for sig, cause in BUILD_FAILURES:
                if sig.matches(ln):
                    failures.append((cause, ln))
                    break
            if HOST_DRIVER.matches(ln):
                host.append(ln)
        for ln in lines:
            for rx in _KERNEL_IN_LOG:
                m = rx.search(ln)
                if m:
                    kernel = m.group(1)
    manager: list[str] = []
    if DRIVER_MANAGER in _container_names(pod, [DRIVER_MANAGER]):
        st = _status(pod, DRIVER_MANAGER)
        if st is None or _status_failing(st, init=True):
            for prev in (False, True):
                for ln in lines_of(reads.log(pod, DRIVER_MANAGER, prev, node)):
                    if HOST_DRIVER.matches(ln):
                        host.append(ln)
                    elif re.search(r"\b(?:error|fail(?:ed|ure)?|could\s+not|unable)\b", ln, re.IGNORECASE):
                        manager.append(ln)
    return _DriverLog(pod, failures, host, manager, kernel)


def _build_failed(log: _DriverLog, node: str, node_obj: K8sObject | None) -> Finding:
    kernel = log.kernel or o.node_info(node_obj or {}).get("kernelVersion") or "unknown kernel"
    cause = log.failures[0][0]
    lines = list(dict.fromkeys(ln for _, ln in log.failures))[:MAX_EVIDENCE]
    evidence = [f"kernel: {kernel}", *lines]
    evidence += [f"{DRIVER_MANAGER}: {ln}" for ln in log.manager[:3]]
    return finding(
        "L3_DRIVER_BUILD_FAILED",
        f"NVIDIA driver could not be built/loaded on {node} (kernel {kernel}): {cause}",
        evidence=evidence,
        commands=[
            _logs_cmd(log.pod, DRIVER_CTR),
            _logs_cmd(log.pod, DRIVER_CTR, previous=True),
            _logs_cmd(log.pod, DRIVER_MANAGER),
            "kubectl get nodes -o wide",
        ],
        node=node,
    )


def _operands_on(ctx: WalkContext, node: str, *components: str) -> list[K8sObject]:
    """Operator pods of these components on the node, indexed once per walk (O(pods), not per node)."""

    def index() -> dict[str, list[K8sObject]]:
        by_node: dict[str, list[K8sObject]] = {}
        for p in ctx.operator_pods():
            by_node.setdefault(o.pod_node(p) or "", []).append(p)
        return by_node

    return [p for p in ctx.cached("l3_operands_by_node", index).get(node, []) if component(p) in components]


def _host_driver_in_validators(reads: _Reads, pods: list[K8sObject], node: str) -> list[str]:
    out: list[str] = []
    for pod in pods:
        if component(pod) != "validator":
            continue
        for prev in (False, True) if _restarted(pod, "driver-validation") else (False,):
            out += HOST_DRIVER.find(reads.log(pod, "driver-validation", prev, node), 2)
    return out


def _driver_enabled(reads: _Reads, node: str) -> tuple[bool | None, str]:
    """(enabled?, evidence) from the ClusterPolicy; None when it cannot be read."""
    try:
        policies = reads.ctx.custom("nvidia.com", "v1", "clusterpolicies")
    except SourceError as err:
        reads.fail("ClusterPolicy (to confirm spec.driver.enabled)", err, node)
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
    log: _DriverLog, failing: list[str], validator_lines: list[str], policy: str, node: str
) -> Finding:
    pod = log.pod
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
            "kubectl logs -n <operator-namespace> -l app=nvidia-operator-validator -c driver-validation",
            "kubectl get clusterpolicies.nvidia.com -o jsonpath='{.items[*].spec.driver.enabled}'",
        ],
        node=node,
    )


def _driver_findings(reads: _Reads, node: str, node_obj: K8sObject | None) -> list[Finding]:
    try:
        drivers = _operands_on(reads.ctx, node, "driver")
        validators = _operands_on(reads.ctx, node, "validator")
    except SourceError as err:
        reads.fail("the GPU Operator's pods", err, node)
        return []
    out: list[Finding] = []
    for pod in drivers:
        if o.pod_ready(pod) or o.pod_phase(pod) == "Succeeded":
            continue  # a Ready driver built and loaded its module
        log = _read_driver(reads, pod, node)
        failing = _failing(pod)
        host_lines = log.host_driver
        validator_lines = _host_driver_in_validators(reads, validators, node) if failing else []
        if failing and (host_lines or validator_lines):
            enabled, policy = _driver_enabled(reads, node)
            if enabled:
                out.append(_conflict(log, failing, validator_lines, policy, node))
                continue
            if enabled is None:
                reads.unknowns.setdefault(
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
    return out


def _fabric_manager(reads: _Reads, node: str) -> list[Finding]:
    ctx = reads.ctx
    try:
        pods = _operands_on(ctx, node, "driver", *VALIDATOR_COMPONENTS)
    except SourceError as err:
        reads.fail("the GPU Operator's pods", err, node)
        return []
    evidence: list[str] = []
    commands: list[str] = []
    # The application's own CUDA output counts too, Ready or not (nothing probes CUDA in it).
    target = ctx.pod if ctx.pod is not None and o.pod_node(ctx.pod) == node else None
    for pod in pods + ([target] if target else []):
        if pod is not target and (o.pod_ready(pod) or o.pod_phase(pod) == "Succeeded"):
            continue  # validations that passed did run CUDA
        for c in _container_names(pod, _FALLBACK_CONTAINERS.get(component(pod) or "", ())):
            for prev in (False, True) if _restarted(pod, c) else (False,):
                hits = FABRIC_NOT_READY.find(reads.log(pod, c, prev, node), 3)
                if hits:
                    evidence += [f"{o.name(pod)}/{c}: {ln}" for ln in hits]
                    commands.append(_logs_cmd(pod, c, prev))
        for ev in reads.events(pod, node):
            msg = str(ev.get("message") or "")
            if FABRIC_NOT_READY.matches(msg):
                evidence.append(f"event on {o.name(pod)}: {' '.join(msg.split())}")
                commands.append(f"kubectl describe pod -n {o.namespace(pod)} {o.name(pod)}")
        for _, s in o.iter_all_statuses(pod):
            for key in ("state", "lastState"):
                msg = str(((s.get(key) or {}).get("terminated") or {}).get("message") or "")
                if msg and FABRIC_NOT_READY.matches(msg):
                    evidence.append(f"{o.name(pod)}/{s.get('name')} terminated: {' '.join(msg.split())}")
    if not evidence:
        return []
    return [
        finding(
            "L3_FABRIC_MANAGER",
            f"CUDA on {node} reports the system is not yet initialized: an NVSwitch system needs "
            "nvidia-fabricmanager running with the driver (same version); start it or fix it",
            evidence=list(dict.fromkeys(evidence))[:MAX_EVIDENCE],
            commands=[
                *dict.fromkeys(commands),
                "kubectl exec -n <operator-namespace> <nvidia-driver-daemonset-pod> -c nvidia-driver-ctr -- "
                "nvidia-smi -q | grep -A2 Fabric",
            ],
            node=node,
        )
    ]


def _upgrade_failed(node: str, node_obj: K8sObject | None) -> list[Finding]:
    state = o.labels(node_obj or {}).get(UPGRADE_STATE, "")
    if state.strip().lower() != "upgrade-failed":
        return []
    return [
        finding(
            "L3_DRIVER_UPGRADE_FAILED",
            f"The operator's driver upgrade failed on {node}: fix the driver pod's error, then relabel the "
            f"node {UPGRADE_STATE}=upgrade-required to retry",
            evidence=[f"{UPGRADE_STATE}={state}"],
            commands=[
                f"kubectl get nodes -l {UPGRADE_STATE}=upgrade-failed",
                f"kubectl label node {node} {UPGRADE_STATE}=upgrade-required --overwrite",
            ],
            node=node,
        )
    ]


# --- fleet: versions against the majority -------------------------------------------


def driver_version(node: K8sObject) -> str | None:
    """GFD's driver version; the deprecated cuda.driver.major/minor/rev labels where older GFD runs."""
    lab = o.labels(node)
    full = lab.get("nvidia.com/cuda.driver-version.full")
    if full:
        return full.strip()
    parts = [lab.get(f"nvidia.com/cuda.driver.{p}") for p in ("major", "minor", "rev")]
    return ".".join(p.strip() for p in parts if p) if parts[0] else None


def runtime_version(node: K8sObject) -> str | None:
    lab = o.labels(node)
    full = lab.get("nvidia.com/cuda.runtime-version.full")
    if full:
        return full.strip()
    major, minor = lab.get("nvidia.com/cuda.runtime.major"), lab.get("nvidia.com/cuda.runtime.minor")
    return f"{major.strip()}.{(minor or '0').strip()}" if major else None


def kernel_version(node: K8sObject) -> str | None:
    return o.node_info(node).get("kernelVersion") or None


def os_image(node: K8sObject) -> str | None:
    return o.node_info(node).get("osImage") or None


@dataclass(frozen=True)
class Spread:
    """How one attribute is spread over the GPU nodes that have it."""

    what: str
    counts: tuple[tuple[str, int], ...]  # value → nodes, most common first
    by_node: dict[str, str]

    @property
    def majority(self) -> str | None:
        """The most common value; None on a tie for first place (the fleet is split)."""
        if not self.counts or (len(self.counts) > 1 and self.counts[0][1] == self.counts[1][1]):
            return None
        return self.counts[0][0]

    def odd(self, node: str) -> bool:
        """The node's value differs from the majority (or the fleet is split and it has company)."""
        value = self.by_node.get(node)
        if value is None or len(self.counts) < 2:
            return False
        return value != self.majority

    def table(self) -> str:
        return f"{self.what}: " + ", ".join(f"{v} → {n} node{'s' if n != 1 else ''}" for v, n in self.counts)

    def describe(self, node: str) -> str:
        m = self.majority
        base = f"{self.what} {self.by_node[node]}"
        if m is None:
            return f"{base} (GPU nodes are split with no majority: {self.table().split(': ', 1)[1]})"
        return f"{base} vs {m} on {dict(self.counts)[m]} of {len(self.by_node)} GPU nodes"

    @cached_property
    def odd_nodes(self) -> list[str]:
        m = self.majority
        return [n for n, v in self.by_node.items() if v != m]


def _spread(nodes: list[K8sObject], what: str, read: Callable[[K8sObject], str | None]) -> Spread:
    by_node: dict[str, str] = {}
    for n in nodes:
        value = read(n)
        if value:
            by_node[o.name(n)] = value
    return Spread(what, tuple(Counter(by_node.values()).most_common()), by_node)


def _odd_list(nodes: list[str]) -> str:
    shown = ", ".join(nodes[:10])
    return shown + (f" … and {len(nodes) - 10} more" if len(nodes) > 10 else "")


def _skew(code: str, spreads: list[Spread], examined: list[str], command: str, advice: str) -> list[Finding]:
    out: list[Finding] = []
    for node in examined:
        odd = [s for s in spreads if s.odd(node)]
        if odd:
            out.append(
                finding(
                    code,
                    f"{node} runs " + " and ".join(s.describe(node) for s in odd) + f": {advice}",
                    evidence=[s.table() for s in odd]
                    + [f"odd nodes ({s.what}): {_odd_list(s.odd_nodes)}" for s in odd],
                    commands=[command],
                    node=node,
                )
            )
    return out


def _fold(findings: list[Finding]) -> list[Finding]:
    """Past MAX_PER_CODE findings of one code, the rest become one finding listing their nodes.

    A pending pod examines every GPU node; one line per node would drown the thread.
    """
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    out: list[Finding] = []
    for code, group in by_code.items():
        if len(group) <= MAX_PER_CODE:
            out += group
            continue
        kept, rest = group[: MAX_PER_CODE - 1], group[MAX_PER_CODE - 1 :]
        nodes = [f.node for f in rest if f.node]
        out += kept
        out.append(
            finding(
                code,
                f"{len(rest)} more examined GPU nodes have the same finding, e.g. {rest[0].summary}",
                evidence=[*rest[0].evidence, f"nodes: {_odd_list(nodes)}"],
                commands=rest[0].commands,
                severity=rest[0].severity,
            )
        )
    return out


def _fleet(ctx: WalkContext) -> list[Spread]:
    def compute() -> list[Spread]:
        gpu = ctx.gpu_nodes()
        return [
            _spread(gpu, "driver", driver_version),
            _spread(gpu, "CUDA runtime", runtime_version),
            _spread(gpu, "kernel", kernel_version),
            _spread(gpu, "OS image", os_image),
        ]

    return ctx.cached("l3_fleet_spread", compute)


# --- the layer ------------------------------------------------------------------------


def check(ctx: WalkContext) -> LayerResult:
    try:
        examined = ctx.examined_nodes()
        spreads = _fleet(ctx)
    except SourceError as err:
        hint = err.hint()
        return LayerResult.build(
            LAYER, [unknown(LAYER, f"could not list nodes: {err.message}" + (f"; {hint}" if hint else ""))]
        )
    if not examined:
        return LayerResult.build(
            LAYER,
            [unknown(LAYER, "no GPU node to examine for driver versions (no node advertises or is labelled "
                     "with a GPU): layers 1-2 explain why")],
        )  # fmt: skip
    findings: list[Finding] = []
    reads = _Reads(ctx)
    for node in examined:
        node_obj = ctx.node(node)
        findings += _driver_findings(reads, node, node_obj)
        findings += _fabric_manager(reads, node)
        findings += _upgrade_failed(node, node_obj)
    driver, runtime, kernel, image = spreads
    findings += _skew(
        "L3_DRIVER_VERSION_SKEW",
        [driver, runtime],
        examined,
        "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full",
        "upgrade or roll back this node's driver so the fleet matches (GFD labels per node)",
    )
    findings += _skew(
        "L3_KERNEL_SKEW",
        [kernel, image],
        examined,
        "kubectl get nodes -o wide",
        "check that the driver image fits this kernel/OS (a kernel update needs a matching driver build)",
    )
    findings = _fold(findings) + list(reads.unknowns.values())
    if not findings:
        one = examined[0] if len(examined) == 1 else None
        if one:
            facts = [f"{s.what}: {s.by_node.get(one, 'not reported')}" for s in spreads]
        else:
            facts = [s.table() for s in spreads if s.counts]
        findings.append(
            finding(
                "L3_OK",
                f"No driver build, host-driver, fabric-manager or version-skew problem on {one or 'the examined nodes'}",
                evidence=facts,
                commands=[
                    "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full"
                ],
                node=one,
            )
        )
    return LayerResult.build(LAYER, findings)
