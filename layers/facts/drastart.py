"""The DRA side of a refused start: which of the pod's claims the container could not get, and the
node's kubelet plugin that prepares it (spec/findings.md, DRA: `unresolvable CDI devices` is
`L2_CONTAINER_START_FAILED`; the DRA kubelet plugin is an operand like the device plugin).

Two real shapes. The runtime refuses a CDI device the NVIDIA DRA driver named: its claim's transient
spec `k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0` (gone when a reboot clears /var/run/cdi and the
kubelet still counts the claim prepared, kubernetes#141433) or its base spec
`k8s.gpu.nvidia.com/device=gpu-1` (the runtime does not read the plugin's CDI root,
dra-driver-nvidia-gpu#736). Or the kubelet cannot prepare the claim and says so in a
`FailedPrepareDynamicResources` event: `Failed to prepare dynamic resources: prepare dynamic
resources: NodePrepareResources failed for ResourceClaim <name>: <the plugin's error>`, `DRA driver
gpu.nvidia.com is not registered` (no kubelet plugin runs there), `NodePrepareResources: rpc error: …`.
Called by the one reader of start failures (layers/facts/startfail.py) for the target pod, or for
the pods on a node walk's node.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from layers.facts import dra, drareads, podstatus
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.deployments import DRA_PLUGIN_CONTAINERS, dra_plugin_container
from layers.facts.logs import LogReads
from layers.sources import K8sObject, SourceError

# The DRA driver's CDI vendor is `k8s.` + its driver name (cmd/gpu-kubelet-plugin/cdi.go).
_CDI_NAME = re.compile(
    r"k8s\.(?P<driver>(?:gpu|compute-domain)\.nvidia\.com)/(?P<cls>claim|device)=(?P<name>[\w.-]{1,200})"
)
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_FAILED_FOR = re.compile(
    r"NodePrepareResources\s+failed\s+for\s+(?:ResourceClaim|claim)\s+(?P<claim>[\w./-]{1,300}):"
)
_FETCH = re.compile(r"fetch\s+ResourceClaim\s+(?P<claim>[\w.-]{1,300})")
# The kubelet's own read of the claim answered 404 for the whole resource: the API server does not serve
# the resource.k8s.io version this kubelet asks for (a node older or newer than the control plane,
# dra-driver-nvidia-gpu issue 766), not a plugin failure.
_NOT_SERVED = re.compile(r"the\s+server\s+could\s+not\s+find\s+the\s+requested\s+resource", re.IGNORECASE)
_NOT_REGISTERED = re.compile(
    r"DRA\s+driver\s+(?P<a>[\w.-]{1,100})\s+is\s+not\s+registered"
    r"|plugin\s+(?:name\s+)?(?P<b>[\w.-]{1,100})\s+not\s+found\s+in\s+the\s+list\s+of\s+registered\s+DRA\s+plugins"
)
_RPC = re.compile(r"NodePrepareResources:\s*(?P<rpc>rpc\s+error:[^\n]{0,200})")
# The IMEX daemon of this node has not joined its ComputeDomain yet: L2_COMPUTE_DOMAIN_NOT_READY's story
# (it quotes the same event); once the domain is Ready, such events are history.
_DOMAIN_WAIT = re.compile(r"ComputeDomain", re.IGNORECASE)
_PREFIX = re.compile(
    r"^.*?Failed\s+to\s+prepare\s+dynamic\s+resources:\s*(?:prepare\s+dynamic\s+resources:\s*)?", re.S
)
_PLUGIN_PREFIX = re.compile(
    r"^error\s+preparing\s+devices\s+for\s+claim\s+'?[\w./-]{1,300}(?::[0-9a-f-]{36})?'?:\s*"
)
MAX_LOG_LINES = 3


class DraStart(msgspec.Struct, frozen=True):
    """The claim behind one refused start, and the kubelet plugin on the node that prepares it."""

    kind: str  # "cdi-claim", "cdi-device", "prepare", "not-registered", "rpc", "api-version"
    driver: str  # the DRA driver name the claim's devices belong to (gpu.nvidia.com …)
    error: str  # the kubelet's or the runtime's words after the wrapping
    claim: str | None = None  # "ns/name"; None when the message names no claim of the pod
    claim_uid: str | None = None
    devices: tuple[str, ...] = ()  # the claim's allocated devices, "pool/device"
    plugin: str | None = None  # "ns/pod" of the node's kubelet plugin; None: none runs there
    container: str | None = None  # its container serving `driver`
    plugin_state: str = ""
    log: tuple[str, ...] = ()  # the plugin's own lines about the claim
    problems: tuple[str, ...] = ()  # what could not be read
    kubelet: str = ""  # the node's kubelet version, for a refusal the kubelet itself makes

    def explain(self, node: str) -> str:
        """The summary's cause: what is wrong and what to do, naming the claim and the plugin."""
        claim = f"claim {self.claim}" if self.claim else "its DRA claim"
        plugin = f"the DRA kubelet plugin {self.plugin}" if self.plugin else "the DRA kubelet plugin"
        if self.kind == "cdi-claim":
            return (
                f"the runtime on {node} has no CDI spec for {claim} (its devices {', '.join(self.devices) or '?'}): "
                f"the kubelet counts the claim prepared but {plugin}'s per-claim spec is gone (a reboot clears "
                "/var/run/cdi) — delete the pod so the claim is prepared again"
            )
        if self.kind == "cdi-device":
            return (
                f"the runtime on {node} does not see the CDI specs {plugin} writes for {claim}: the plugin's CDI "
                "root (/var/run/cdi) must be one of the runtime's CDI spec dirs (containerd cdi_spec_dirs)"
            )
        if self.kind == "api-version":
            which = f" ({self.kubelet})" if self.kubelet else ""
            return (
                f"the kubelet on {node}{which} cannot read {claim}: the API server does not serve the "
                "resource.k8s.io version this kubelet uses (the server could not find the requested resource) — "
                "bring the node's kubelet to the control plane's minor version, or enable that API version"
            )
        if self.kind == "not-registered":
            if not self.plugin:
                return (
                    f"no DRA kubelet plugin of driver {self.driver} runs on {node}, so the kubelet cannot "
                    f"prepare {claim}: check the driver's kubelet-plugin DaemonSet on that node"
                )
            return (
                f"the kubelet on {node} has no DRA plugin {self.driver} registered to prepare {claim}: "
                f"{plugin} is {self.plugin_state} — read its {self.container or 'plugin'} log"
            )
        return (
            f"{plugin} on {node} failed to prepare {claim}: {self.error} — read its "
            f"{self.container or 'plugin'} log for the claim"
        )

    @property
    def evidence(self) -> list[str]:
        out = []
        if self.claim:
            uid = f" (uid {self.claim_uid})" if self.claim_uid else ""
            out.append(
                f"claim {self.claim}{uid}: allocated {', '.join(self.devices) or 'nothing'} of {self.driver}"
            )
        if self.plugin:
            out.append(
                f"DRA kubelet plugin {self.plugin} ({self.container or 'no container for ' + self.driver}): {self.plugin_state}"
            )
        else:
            out.append(f"DRA kubelet plugin of {self.driver}: {self.plugin_state}")
        out += [f"plugin log: {line}" for line in self.log]
        out += list(self.problems)
        return out

    def commands(self, node: str) -> list[str]:
        out = []
        if self.claim:
            ns, _, name = self.claim.rpartition("/")
            out.append(f"kubectl get resourceclaim -n {ns or 'default'} {name} -o yaml")
        if self.plugin:
            ns, _, name = self.plugin.partition("/")
            key = self.claim_uid or (self.claim.rpartition("/")[2] if self.claim else "")
            grep = f" | grep {key}" if key else ""
            out.append(f"kubectl logs -n {ns} {name} -c {self.container or 'gpus'}{grep}")
        else:
            out.append(f"kubectl get pods -A -o wide --field-selector spec.nodeName={node} | grep -i dra")
        if self.kind.startswith("cdi"):
            out.append(f"kubectl debug node/{node} -it --image=busybox -- ls /host/var/run/cdi")
        return out


def waits_for_domain(message: str) -> bool:
    """A prepare failure that only says this node's IMEX daemon has not joined its ComputeDomain."""
    return bool(_DOMAIN_WAIT.search(message))


def _kind(message: str, cause: str) -> tuple[str, str, str, str | None] | None:
    """(kind, driver, error, named claim or CDI name) of a DRA refusal, or None when it is not one."""
    if cause == "cdi-unresolvable":
        m = _CDI_NAME.search(message)
        if m is None:
            return None
        kind = "cdi-claim" if m.group("cls") == "claim" else "cdi-device"
        return kind, m.group("driver"), m.group(0), m.group("name")
    if cause != "dra-prepare":
        return None
    error = _PREFIX.sub("", " ".join(message.split()), count=1)
    m = _NOT_REGISTERED.search(message)
    if m:
        return "not-registered", m.group("a") or m.group("b"), error, None
    failed = _FAILED_FOR.search(error)
    if failed:
        # The plugin repeats the claim (`error preparing devices for claim ns/name:uid:`): said once.
        rest = _PLUGIN_PREFIX.sub("", error[failed.end() :].strip(), count=1)
        return "prepare", "", rest, failed.group("claim")
    fetch = _FETCH.search(error)
    if fetch:
        return ("api-version" if _NOT_SERVED.search(error) else "prepare"), "", error, fetch.group("claim")
    rpc = _RPC.search(error)
    return ("rpc", "", rpc.group("rpc"), None) if rpc else ("prepare", "", error, None)


def _drivers(state: drareads.PodClaimState) -> set[str]:
    return {a.driver for a in state.claim.allocated or ()} if state.claim is not None else set()


def _match(
    states: Sequence[drareads.PodClaimState], kind: str, driver: str, name: str | None
) -> drareads.PodClaimState | None:
    for s in states:
        c = s.claim
        if c is None:
            continue
        if kind == "cdi-claim" and name and c.uid and name.startswith(c.uid):
            return s
        if (
            kind == "cdi-device"
            and name
            and any(a.device == name and a.driver == driver for a in c.allocated or ())
        ):
            return s
        if kind in ("prepare", "api-version") and name and name.rpartition("/")[2] == c.name:
            return s
    # The kubelet named no claim (rpc error, driver not registered): the pod's claim of that driver.
    if kind in ("not-registered", "rpc") or (kind == "prepare" and not name):
        return next((s for s in states if (driver or "gpu.nvidia.com") in _drivers(s)), None)
    return None


def pod_state(pod: K8sObject, container: str | None = None) -> str:
    """`Ready`, or why not in layer 2's words (layers/facts/podstatus.py), this container first."""
    own = podstatus.container_status(pod, container) if container else None
    if o.pod_ready(pod):
        restarts = int((own or {}).get("restartCount") or 0)
        return "Ready" + (f", restarted {restarts} time(s)" if restarts else "")
    why = (podstatus.status_failing(own, init=False) if own else None) or next(
        iter(podstatus.failing(pod)), None
    )
    return why or podstatus.display_status(pod)


def _plugin(
    ctx: WalkContext, node: str, driver: str, wanted: Sequence[str]
) -> tuple[str | None, str | None, str, tuple[str, ...], tuple[str, ...]]:
    """(plugin "ns/pod", container, state, its log lines naming the claim, problems) on the node."""
    try:
        pods = ctx.operator_pods_on(node, "dra-kubelet-plugin")
    except SourceError as err:
        return None, None, "not read", (), (f"the DRA kubelet plugin on {node} not read: {err}",)
    if not pods:
        return None, None, f"no kubelet plugin pod runs on {node}", (), ()
    pod = next((p for p in pods if dra_plugin_container(p, driver)), pods[0])
    ns, name = o.namespace(pod) or "", o.name(pod)
    container = dra_plugin_container(pod, driver)
    state = pod_state(pod, container)
    if container is None:
        return f"{ns}/{name}", container, state, (), ()
    lines: list[str] = []
    logs = LogReads(ctx, 2)
    for previous in (False, True) if podstatus.restarted(pod, container) else (False,):
        got = sig.lines_of(logs.log(pod, container, previous))
        # Its lines about the claim; a plugin that is not Ready: its last words (why it exits).
        hits = [ln for ln in got if any(w in ln for w in wanted)] if o.pod_ready(pod) else got
        lines += [("(previous) " if previous else "") + sig.clip(ln) for ln in hits[-MAX_LOG_LINES:]]
    return (
        f"{ns}/{name}",
        container,
        state,
        tuple(lines[-MAX_LOG_LINES:]),
        tuple(u.summary for u in logs.unknowns()),
    )


def dra_start(ctx: WalkContext, pod: K8sObject, cause: str, message: str) -> DraStart | None:
    """The DRA facts of one refusal of this pod (the target, or one on a node walk's node), or None when
    it is not the NVIDIA DRA driver's."""
    got = _kind(message, cause)
    if got is None:
        return None
    kind, driver, error, name = got
    problems: list[str] = []
    try:
        states = drareads.claims_of(ctx, pod)
    except SourceError as err:
        states = []
        problems.append(f"the pod's ResourceClaims not read: {err}")
    state = _match(states, kind, driver, name)
    claim = state.claim if state is not None else None
    if claim is not None and not driver:
        ours = sorted(d for d in _drivers(state) if d in DRA_PLUGIN_CONTAINERS) if state else []
        if not ours and claim.allocated:
            return None  # another vendor's DRA driver (a NIC, an FPGA): not the NVIDIA runtime's refusal
        driver = ours[0] if ours else "gpu.nvidia.com"
    if driver and driver not in DRA_PLUGIN_CONTAINERS:
        return None
    driver = driver or "gpu.nvidia.com"
    node = o.pod_node(pod) or ""
    wanted = [w for w in (claim.uid if claim else None, claim.name if claim else name) if w]
    plugin, container, plugin_state, log, more = (
        _plugin(ctx, node, driver, wanted) if node else (None, None, "", (), ())
    )
    return DraStart(
        kind=kind,
        driver=driver,
        error=sig.clip(error),
        claim=claim.key if claim else _named(pod, name if kind in ("prepare", "api-version") else None),
        claim_uid=claim.uid if claim else None,
        devices=tuple(f"{a.pool}/{a.device}" for a in claim.allocated or ()) if claim else (),
        plugin=plugin,
        container=container,
        plugin_state=plugin_state,
        log=log,
        problems=(*problems, *more),
        kubelet=_kubelet(ctx, node) if kind == "api-version" else "",
    )


def _kubelet(ctx: WalkContext, node: str) -> str:
    """`kubelet v1.33.1`, the node's, beside the control plane's when a control-plane node says it."""
    try:
        nodes = ctx.nodes()
    except SourceError:
        return ""
    mine = next((str(o.node_info(n).get("kubeletVersion") or "") for n in nodes if o.name(n) == node), "")
    plane = next(
        (
            str(o.node_info(n).get("kubeletVersion") or "")
            for n in nodes
            if "node-role.kubernetes.io/control-plane" in o.labels(n)
        ),
        "",
    )
    if not mine:
        return ""
    return f"kubelet {mine}" + (f", control plane {plane}" if plane and plane != mine else "")


def _named(pod: K8sObject, name: str | None) -> str | None:
    """A claim the kubelet names that the pod's claims do not resolve (deleted, or not readable)."""
    if not name:
        return None
    return name if "/" in name else f"{o.namespace(pod) or 'default'}/{name}"


def claim_containers(pod: K8sObject, claim: str | None) -> list[str]:
    """The pod's containers that use this claim (`resources.claims` naming its pod entry)."""
    if claim is None:
        return []
    entries = {e.name for e in dra.pod_claims(pod) if e.claim_name == claim.rpartition("/")[2]}
    out = []
    for c in [*o.containers(pod, init=True), *o.containers(pod)]:
        used = {
            str(r.get("name")) for r in (c.get("resources") or {}).get("claims") or [] if isinstance(r, dict)
        }
        if used & entries:
            out.append(str(c.get("name")))
    return out
