"""Node actions, decided without touching anything: cordon rules, the circuit breaker,
and what a must-gather bundle holds for a node.

Pure: every function takes plain Kubernetes dicts and returns data. The adapters
in bot/ (bot/actions/cordon.py, bot/actions/bundle_writer.py) do the reads and the one write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, Literal

import msgspec

from layers import nodepolicy
from layers.facts import gpufacts as gf
from layers.facts import hosts
from layers.facts import objects as o
from layers.facts.context import OPERATOR_SELECTORS, component
from layers.sources import K8sObject, Selector

# --- cordon ----------------------------------------------------------------------------

CORDONED_BY = "gpubot/cordoned-by"
CORDON_REASON = "gpubot/cordon-reason"
CORDONED_AT = "gpubot/cordoned-at"
CORDON_ANNOTATIONS = (CORDONED_BY, CORDON_REASON, CORDONED_AT)
REASON_MAX_CHARS = 500  # an annotation is shown in `kubectl describe`: keep it a sentence

CordonAction = Literal["cordon", "already-cordoned", "refused", "not-found"]
UncordonAction = Literal["uncordon", "not-cordoned", "refused", "not-found"]


class RemedyInputError(ValueError):
    """A reason or actor that cannot go into an annotation (the CLI's exit 2)."""


class Breaker(msgspec.Struct, frozen=True):
    """How many GPU nodes would be cordoned after this action, against the allowed fraction."""

    gpu_nodes: int
    cordoned_now: int
    cordoned_after: int
    max_fraction: float

    @property
    def allowed(self) -> bool:
        # Exact rational arithmetic: 1/4 with a 0.25 limit must pass, 2/4 must not.
        if self.gpu_nodes == 0:
            return True
        limit = Fraction(str(self.max_fraction))
        return Fraction(self.cordoned_after, self.gpu_nodes) <= limit

    def describe(self) -> str:
        share = self.cordoned_after / self.gpu_nodes if self.gpu_nodes else 0.0
        return (
            f"{self.cordoned_after} of {self.gpu_nodes} GPU nodes would be cordoned ({share:.0%}), "
            f"the limit is {self.max_fraction:.0%} (GPUBOT_CORDON_MAX_FRACTION)"
        )


class CordonDecision(msgspec.Struct, frozen=True):
    action: CordonAction
    node: str
    message: str
    patch: dict[str, Any] | None = None  # set only when action == "cordon"
    breaker: Breaker | None = None


class UncordonDecision(msgspec.Struct, frozen=True):
    action: UncordonAction
    node: str
    message: str
    patch: dict[str, Any] | None = None


def rfc3339(now: datetime | float) -> str:
    dt = now if isinstance(now, datetime) else datetime.fromtimestamp(now, tz=UTC)
    return dt.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _one_line(text: str, what: str) -> str:
    clean = " ".join(str(text).split())
    if not clean:
        raise RemedyInputError(f"the {what} is empty: say why, e.g. --reason 'Xid 79 on GPU 3'")
    if len(clean) > REASON_MAX_CHARS:
        raise RemedyInputError(
            f"the {what} is {len(clean)} characters long; keep it under {REASON_MAX_CHARS}"
        )
    return clean


def _annotations(obj: K8sObject) -> dict[str, str]:
    return o.annotations_of(obj)


def cordoned_by_bot(node: K8sObject) -> bool:
    return CORDONED_BY in _annotations(node)


def cordon_breaker(nodes: Iterable[K8sObject], node_name: str, max_fraction: float) -> Breaker:
    gpu = [n for n in nodes if o.is_gpu_node(n)]
    cordoned = {o.name(n) for n in gpu if o.is_unschedulable(n)}
    adds = any(o.name(n) == node_name for n in gpu) and node_name not in cordoned
    return Breaker(len(gpu), len(cordoned), len(cordoned) + int(adds), max_fraction)


def cordon_plan(
    nodes: Sequence[K8sObject],
    node_name: str,
    reason: str,
    actor: str,
    now: datetime | float,
    *,
    max_fraction: float = 0.25,
) -> CordonDecision:
    """Whether to cordon `node_name`, and the strategic-merge patch that does it."""
    reason = _one_line(reason, "reason")
    actor = _one_line(actor, "actor")
    node = next((n for n in nodes if o.name(n) == node_name), None)
    if node is None:
        return CordonDecision("not-found", node_name, f'node "{node_name}" not found')
    policy = nodepolicy.decide(node)
    if not policy.cordon.offered:
        # The decision table (spec/findings.md, "One policy decides every action"): an owner's node,
        # or a cordon already there; nothing changes.
        why = _annotations(node).get(CORDON_REASON) if policy.row == "cordoned-by-gpubot" else None
        said = policy.cordon.said + (f": {why}" if why else "") + "; nothing changed"
        return CordonDecision("already-cordoned" if o.is_unschedulable(node) else "refused", node_name, said)
    if not o.is_gpu_node(node):
        return CordonDecision(
            "refused",
            node_name,
            f"{node_name} is not a GPU node: gpubot only cordons GPU nodes (use kubectl cordon for others)",
        )
    breaker = cordon_breaker(nodes, node_name, max_fraction)
    if not breaker.allowed:
        return CordonDecision(
            "refused", node_name, f"refused to cordon {node_name}: {breaker.describe()}", breaker=breaker
        )
    patch = {
        "metadata": {"annotations": {CORDONED_BY: actor, CORDON_REASON: reason, CORDONED_AT: rfc3339(now)}},
        "spec": {"unschedulable": True},
    }
    return CordonDecision(
        "cordon", node_name, f"cordon {node_name} ({breaker.describe()})", patch=patch, breaker=breaker
    )


def uncordon_plan(node: K8sObject | None, node_name: str, *, force: bool = False) -> UncordonDecision:
    """Undo a cordon the bot made; someone else's only with force."""
    if node is None:
        return UncordonDecision("not-found", node_name, f'node "{node_name}" not found')
    policy = nodepolicy.decide(node)
    if o.is_unschedulable(node) and policy.holder is not None and not policy.uncordon_force.offered:
        # Not even with --force: releasing a running owner's node breaks its flow.
        return UncordonDecision("refused", node_name, policy.uncordon_force.said)
    if o.is_unschedulable(node) and policy.row == "gave-up" and not force:
        return UncordonDecision(
            "refused", node_name, f"refused to uncordon {node_name}: {policy.uncordon.said}"
        )
    ours = cordoned_by_bot(node)
    # null removes the field and the annotations, as kubectl uncordon does for unschedulable.
    removal: dict[str, Any] = {"spec": {"unschedulable": None}}
    stale = [k for k in CORDON_ANNOTATIONS if k in _annotations(node)]
    if stale:
        removal["metadata"] = {"annotations": dict.fromkeys(stale)}
    if not o.is_unschedulable(node):
        if stale:
            # Someone uncordoned with kubectl and left our marks: clean them so the node reads true.
            return UncordonDecision(
                "uncordon",
                node_name,
                f"{node_name} is not cordoned; removing gpubot's leftover annotations",
                patch={"metadata": removal["metadata"]},
            )
        return UncordonDecision("not-cordoned", node_name, f"{node_name} is not cordoned; nothing changed")
    if not ours and not force:
        return UncordonDecision(
            "refused",
            node_name,
            f"refused to uncordon {node_name}: it was not cordoned by gpubot (no {CORDONED_BY} annotation); "
            "pass --force to uncordon it anyway",
        )
    recordoned = _cordoned_again(node) if ours and not force else None
    if recordoned:
        return UncordonDecision(
            "refused",
            node_name,
            f"refused to uncordon {node_name}: someone cordoned it again by hand after gpubot did ({recordoned}); "
            "pass --force to uncordon it anyway",
        )
    # Who cordoned it, named (a person's field manager and when; the owner that gave up and its state).
    by = f"cordoned by {_annotations(node)[CORDONED_BY]}" if ours else policy.cordoned_by or "cordoned"
    gave_up = f"; {policy.uncordon_force.said}" if policy.row == "gave-up" else ""
    return UncordonDecision("uncordon", node_name, f"uncordon {node_name} ({by}){gave_up}", patch=removal)


UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# The node lifecycle controller adds the unschedulable taint moments after the bot's patch.
TAINT_GRACE_S = 60


def _parse_time(text: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _cordoned_again(node: K8sObject) -> str | None:
    """Why the cordon is no longer the bot's: the unschedulable taint was added after gpubot's
    cordoned-at (plus the controller's moment), so a person uncordoned and cordoned it again."""
    ours = _parse_time(_annotations(node).get(CORDONED_AT))
    for taint in (node.get("spec") or {}).get("taints") or []:
        added = _parse_time(taint.get("timeAdded")) if taint.get("key") == UNSCHEDULABLE_TAINT else None
        if ours is not None and added is not None and (added - ours).total_seconds() > TAINT_GRACE_S:
            return f"{UNSCHEDULABLE_TAINT} added {taint.get('timeAdded')}, {CORDONED_AT} {rfc3339(ours)}"
    return None


# --- must-gather: what a bundle holds ---------------------------------------------------

# Selectors of the driver pods nvidia-bug-report.sh runs in (hack/must-gather.sh).
DRIVER_POD_LABELS = (
    ("openshift.driver-toolkit", None),
    ("app.kubernetes.io/component", "nvidia-driver"),
    ("app", "nvidia-vgpu-manager-daemonset"),
    ("app", "nvidia-driver-daemonset"),
)
DRIVER_CONTAINERS = ("nvidia-driver-ctr", "nvidia-vgpu-manager-ctr")
BUG_REPORT_COMMAND = (
    "sh",
    "-c",
    "cd /tmp && nvidia-bug-report.sh >/dev/null 2>&1; base64 /tmp/nvidia-bug-report.log.gz",
)

SERIES_WINDOW_S = 24 * 3600
SERIES_STEP_S = 300
# The DCGM signals the layers read, plus the health counters a vendor asks for first.
DCGM_METRICS = (
    gf.FB_USED,
    gf.FB_FREE,
    gf.LAST_XID,
    gf.XID_COUNT,
    gf.XID_TOTAL,
    gf.CORRECTABLE_ROWS,
    gf.UNCORRECTABLE_ROWS,
    gf.ROW_REMAP_FAILURE,
    gf.CLOCK_EVENTS,
    gf.CLOCK_TOTAL,
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
)
VLLM_METRICS = (gf.VLLM_INFO,)


class GatherScope(msgspec.Struct, frozen=True):
    """What one must-gather covers: a node (or every GPU node), and maybe a target pod."""

    node: str | None = None
    target: tuple[str, str] | None = None  # (namespace, pod)
    target_node: str | None = None  # the target pod's node, once read

    @property
    def series_nodes(self) -> tuple[str, ...] | None:
        """Nodes whose DCGM series are collected; None = every series (no selector)."""
        chosen = self.node or self.target_node
        return (chosen,) if chosen else None

    def pod_selectors(self) -> list[tuple[str, str | None]]:
        """(label selector, field selector) pairs that list the operator and operand pods in scope."""
        field_sel = f"spec.nodeName={self.node}" if self.node else None
        pairs: list[tuple[str, str | None]] = [(sel, field_sel) for sel in OPERATOR_SELECTORS]
        if self.node:
            # The operator's own pod runs on some other node: always bring it.
            pairs.append(("app=gpu-operator", None))
            pairs.append(("app.kubernetes.io/name=gpu-operator", None))
        return pairs

    def scoped_nodes(self, nodes: Iterable[K8sObject]) -> list[K8sObject]:
        """The nodes the readable files describe: the one asked for, else every GPU node."""
        if self.node:
            return [n for n in nodes if o.name(n) == self.node]
        return [n for n in nodes if o.is_gpu_node(n)]

    def want_fleet_gpu_pods(self) -> bool:
        """A target's layer 1 weighs free GPUs on every node, so its replay needs every GPU pod."""
        return self.target is not None or self.node is None


def is_operator_pod(pod: K8sObject) -> bool:
    return component(pod) == "operator"


def is_driver_pod(pod: K8sObject) -> bool:
    lab = o.labels(pod)
    return any(k in lab and (v is None or lab[k] == v) for k, v in DRIVER_POD_LABELS)


def driver_container(pod: K8sObject) -> str | None:
    names = [str(c.get("name")) for c in o.containers(pod)]
    for wanted in DRIVER_CONTAINERS:
        if wanted in names:
            return wanted
    return names[0] if names else None


def log_streams(pod: K8sObject) -> list[tuple[str, bool]]:
    """(container, previous) for every init and regular container: what `logs --all-containers` covers.

    Previous logs are asked for every container, not only restarted ones: a missing one costs
    one 400, a skipped one can hide the crash that explains the incident.
    """
    names = [str(c.get("name")) for c in o.containers(pod, init=True) + o.containers(pod) if c.get("name")]
    return [(name, previous) for name in names for previous in (False, True)]


def requests_gpu(pod: K8sObject) -> bool:
    return any(o.is_gpu_resource(r) and n > 0 for r, n in o.pod_requests(pod).items())


def series_match(
    scope: GatherScope, node_names: Iterable[str], exporter_pods: Iterable[K8sObject]
) -> list[Selector]:
    """Selector alternatives for the DCGM series of the scope (empty = every series)."""
    nodes = scope.series_nodes
    if nodes is None:
        return []
    return hosts.selector_for(nodes, hosts.host_map(node_names, exporter_pods))


def vllm_match(scope: GatherScope) -> list[Selector]:
    return hosts.pod_selector(*scope.target) if scope.target else []


class Manifest(msgspec.Struct):
    """What a bundle holds, for manifest.json: filled in as the collector goes."""

    created: str
    source: str
    scope: dict[str, Any]
    files: list[dict[str, Any]] = msgspec.field(default_factory=list)
    skipped: list[dict[str, str]] = msgspec.field(default_factory=list)
    cut: list[dict[str, Any]] = msgspec.field(default_factory=list)
    errors: list[dict[str, str]] = msgspec.field(default_factory=list)
    caps: dict[str, int] = msgspec.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "created": self.created,
            "source": self.source,
            "scope": self.scope,
            "caps": self.caps,
            "files": self.files,
            "skipped": self.skipped,
            "cut": self.cut,
            "errors": self.errors,
        }
