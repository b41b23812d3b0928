"""Findings: what each layer concludes, as plain data.

A finding never holds Slack markup or terminal colour: renderers decide how
it looks. Codes are public (JSON output, docs, tests): see spec/findings.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Literal

import msgspec

if TYPE_CHECKING:
    from layers.nodeactions import NodePolicy

STOP: Literal["stop"] = "stop"
# A finding's `next`: a layer number, STOP (cause found, walk ends) or None
# (names none: the walk goes on to the following layer).
Next = int | Literal["stop"] | None

LAYER_NAMES: dict[int, str] = {
    1: "scheduling",
    2: "container runtime",
    3: "versions",
    4: "memory",
    5: "the card",
}


class Severity(IntEnum):
    """Ordered best to worst, so max() picks the worst."""

    OK = 0
    INFO = 1
    UNKNOWN = 2
    WARN = 3
    FAULT = 4

    @property
    def label(self) -> str:
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        return cls[text.upper()]


class CodeSpec(msgspec.Struct, frozen=True):
    """The registry entry of a finding code: its layer, default severity and next."""

    code: str
    layer: int
    severity: Severity
    next: Next
    # Among equally severe findings of one layer, the verdict prefers the more
    # specific cause (an Xid over the capacity gap it explains).
    specificity: int = 1


def _spec(code: str, sev: Severity, nxt: Next, specificity: int = 1) -> CodeSpec:
    return CodeSpec(code, int(code[1]), sev, nxt, specificity)


F, W, I, U, O = Severity.FAULT, Severity.WARN, Severity.INFO, Severity.UNKNOWN, Severity.OK  # noqa: E741

# Order inside each layer is the spec's table order: it breaks ties for `next`.
CODES: dict[str, CodeSpec] = {
    s.code: s
    for s in [
        # Layer 1 — scheduling
        _spec("L1_ALLOCATABLE_BELOW_CAPACITY", F, 5),
        _spec("L1_NO_GPU_ADVERTISED", F, 2),
        _spec("L1_GPU_NODE_NOT_ADVERTISING", F, 2),
        _spec("L1_MIG_CONFIG_FAILED", F, 2, 3),  # outranks L1_RESOURCE_MISMATCH: the user asked right
        _spec("L1_SCHEDULING_GATED", W, STOP, 2),
        _spec("L1_NO_GPU_LABELS", F, 2),
        _spec("L1_RESOURCE_MISMATCH", F, STOP, 2),
        _spec("L1_POD_SCHEDULED", O, 2),
        _spec("L1_POD_PENDING", W, None),
        # Bound, then refused by the kubelet (spec: fault, stop; TopologyAffinityError is so). For
        # OutOf<resource> and UnexpectedAdmissionError layers/admission.py keeps warn and goes on to
        # the runtime (layer 2): the node's device plugin state is the question there.
        _spec("L1_ADMISSION_REJECTED", F, STOP, 2),
        _spec("L1_UNTOLERATED_TAINT", W, STOP, 2),
        _spec("L1_SELECTOR_MISMATCH", W, STOP, 2),
        _spec("L1_NODES_UNSCHEDULABLE", W, STOP, 2),
        _spec("L1_VOLUME_NODE_AFFINITY", W, STOP, 3),
        _spec("L1_TOPOLOGY_SPREAD", W, STOP, 3),
        _spec("L1_GPU_EXHAUSTED", I, STOP, 2),
        # Noise on nodes the pod could not use: one line, never the verdict's equal (specificity 0).
        _spec("L1_ELSEWHERE_IN_FLEET", I, None, 0),
        # The pod's node (or candidates) in another controller's flow, and health agents' verdicts
        # there, said first (spec: "Who else acts on a node"); never a reason to stop or jump.
        _spec("L1_NODE_OWNER", I, None, 0),
        # Layer 1 for pods that use DRA GPUs (spec: "Dynamic Resource Allocation (DRA)")
        _spec("L1_DRA_DEVICE_TAINTED", F, 5),
        _spec("L1_DRA_DEVICECLASS_MISSING", F, 2, 2),
        _spec("L1_DRA_CLAIM_TEMPLATE_MISSING", W, STOP, 3),
        _spec("L1_DRA_NO_DEVICES", F, 2),
        _spec("L1_DRA_CLAIM_PENDING", W, None, 2),
        _spec("L1_DRA_SELECTOR_UNSATISFIED", W, STOP, 3),
        _spec("L1_DRA_DEVICES_EXHAUSTED", I, STOP, 2),
        _spec("L1_UNKNOWN", U, None),
        # Layer 2 — container runtime
        _spec("L2_OPERATOR_NOT_FOUND", F, STOP),
        _spec("L2_NO_RUNTIME_NVIDIA", F, 3, 2),
        _spec("L2_WAITING_FOR_DRIVER", F, 3),
        _spec("L2_VALIDATOR_STUCK", F, None),  # 3 when the stage is driver-validation
        _spec("L2_DEVICE_PLUGIN_NVML_FAILED", F, 3, 2),  # the cause; a stuck validator is its symptom
        _spec("L2_CONTAINER_START_FAILED", F, None, 2),  # 3 when the message names the driver or CUDA
        _spec("L2_APP_SEES_NO_GPU", F, None),
        _spec("L2_DEVICE_PLUGIN_NOT_REGISTERED", F, STOP, 2),  # the cause of layer 1's capacity gap
        _spec("L2_OPERAND_FAILING", W, None),
        _spec("L2_COMPUTE_DOMAIN_NOT_READY", F, STOP, 2),
        # A pod imitating an operand (its labels, not its owner or namespace): said, never evidence.
        _spec("L2_OPERAND_IMPOSTOR", I, None, 0),
        _spec("L2_OK", O, 3),
        _spec("L2_UNKNOWN", U, None),
        # Layer 3 — versions (a fault stops the walk, anything else goes on to 4)
        _spec("L3_DRIVER_BUILD_FAILED", F, STOP, 2),
        _spec("L3_DRIVER_IMAGE_UNAVAILABLE", F, STOP, 2),
        _spec("L3_PREINSTALLED_DRIVER_CONFLICT", F, STOP, 2),
        _spec("L3_FABRIC_MANAGER", F, STOP, 2),
        _spec("L3_DRIVER_VERSION_SKEW", W, None),
        _spec("L3_KERNEL_SKEW", W, None),
        _spec("L3_DRIVER_UPGRADE_FAILED", W, None, 2),  # explains the version skew it leaves behind
        _spec("L3_DRIVER_TOO_OLD", F, STOP, 3),  # the cause of the start failure layer 2 reports
        _spec("L3_OK", O, None),
        _spec("L3_UNKNOWN", U, None),
        # Layer 4 — memory
        _spec("L4_OOMKILLED", F, None, 2),
        _spec("L4_FB_SATURATED", F, None),
        _spec("L4_FB_RESERVED_NORMAL", I, None),
        _spec("L4_PREEMPTIONS", F, None),
        _spec("L4_RETRACTIONS", F, None),  # SGLang's form of L4_PREEMPTIONS
        _spec("L4_QUEUE_BACKLOG", W, None),
        _spec("L4_GPU_OOM_IN_LOGS", F, None),
        _spec("L4_TIME_SLICING", W, None),
        _spec("L4_NO_TELEMETRY", U, None),
        _spec("L4_OK", O, None),
        _spec("L4_UNKNOWN", U, None),
        # Layer 5 — the card
        _spec("L5_ALLOCATABLE_BELOW_CAPACITY", F, None, 1),
        _spec("L5_DEVICE_UNHEALTHY", F, None, 2),
        _spec("L5_XID", W, None, 3),  # severity set per Xid from the catalog
        _spec("L5_ROW_REMAP_FAILURE", F, None, 3),
        _spec("L5_HEALTH_AGENT_CONDITION", F, None, 3),
        _spec("L5_ROW_REMAP_PENDING", W, None, 2),
        _spec("L5_REMAPPED_ROWS_RISING", W, None, 2),
        _spec("L5_CLOCK_EVENTS", W, None),
        _spec("L5_OK", O, None),
        _spec("L5_UNKNOWN", U, None),
    ]
}
del F, W, I, U, O

_ORDER = {code: i for i, code in enumerate(CODES)}


class Finding(msgspec.Struct, frozen=True):
    code: str
    severity: Severity
    summary: str
    evidence: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    node: str | None = None
    next: Next = None

    @property
    def layer(self) -> int:
        return CODES[self.code].layer

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity.label,
            "node": self.node,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "commands": list(self.commands),
        }


def finding(
    code: str,
    summary: str,
    *,
    evidence: Iterable[str] = (),
    commands: Iterable[str] = (),
    node: str | None = None,
    severity: Severity | None = None,
    next: Next | Literal["default"] = "default",
) -> Finding:
    """Build a finding with its code's registered severity and next unless overridden."""
    spec = CODES.get(code)
    if spec is None:
        raise ValueError(f"unknown finding code {code!r}")
    return Finding(
        code=code,
        severity=spec.severity if severity is None else severity,
        summary=summary,
        evidence=tuple(evidence),
        commands=tuple(commands),
        node=node,
        next=spec.next if next == "default" else next,
    )


def unknown(layer: int, summary: str, *, node: str | None = None, evidence: Iterable[str] = ()) -> Finding:
    """A check that could not run: never silent, always says what and why."""
    return finding(f"L{layer}_UNKNOWN", summary, node=node, evidence=evidence)


class LayerResult(msgspec.Struct, frozen=True):
    layer: int
    status: Severity
    next: Next
    findings: tuple[Finding, ...] = msgspec.field(default_factory=tuple)
    # The decision table's answer for the nodes this layer's message may offer actions on
    # (layers/nodepolicy.py): its buttons and confirmations ask these, never the findings' text.
    policies: tuple[NodePolicy, ...] = msgspec.field(default_factory=tuple)

    @property
    def name(self) -> str:
        return LAYER_NAMES[self.layer]

    def policy_for(self, node: str | None) -> NodePolicy | None:
        """The node's policy as the layer ran, else None (not examined, or stored before policies)."""
        return next((p for p in self.policies if p.node == node), None) if node else None

    @classmethod
    def build(
        cls, layer: int, findings: Sequence[Finding], policies: Sequence[NodePolicy] = ()
    ) -> LayerResult:
        """Status is the worst severity; next follows the spec's rule.

        next comes from the most severe finding that names one; among equally
        severe ones the first in the spec's table wins; when none names one the
        walk goes on to the following layer (after 5 it ends).
        """
        ordered = sorted(findings, key=lambda f: (-f.severity, _ORDER.get(f.code, 999)))
        status = ordered[0].severity if ordered else Severity.OK
        nxt: Next = None
        for f in ordered:
            if f.next is not None:
                nxt = f.next
                break
        if nxt is None:
            nxt = layer + 1 if layer < 5 else None
        return cls(layer=layer, status=status, next=nxt, findings=tuple(ordered), policies=tuple(policies))

    @property
    def next_layer(self) -> int | None:
        """The layer the walk goes to, or None when it ends here."""
        return self.next if isinstance(self.next, int) else None

    def to_dict(self) -> dict[str, object]:
        return {
            "layer": self.layer,
            "name": self.name,
            "status": self.status.label,
            "next": self.next_layer,
            "findings": [f.to_dict() for f in self.findings],
        }


class Target(msgspec.Struct, frozen=True):
    namespace: str | None
    pod: str | None
    node: str | None = None

    @property
    def label(self) -> str:
        if self.pod:
            return f"{self.namespace}/{self.pod}"
        return f"node {self.node}"

    def to_dict(self) -> dict[str, object]:
        return {"namespace": self.namespace, "pod": self.pod, "node": self.node}


class WalkResult(msgspec.Struct, frozen=True):
    target: Target
    layers: tuple[LayerResult, ...]

    @property
    def verdict(self) -> Finding | None:
        """The worst finding of the walk; None when everything is ok.

        Ties go to the deeper layer (closer to the root cause), then to the
        more specific code (an Xid explains the capacity gap it caused).
        """
        best: tuple[int, int, int, int] | None = None
        chosen: Finding | None = None
        for result in self.layers:
            for i, f in enumerate(result.findings):
                if f.severity == Severity.OK:
                    continue
                key = (int(f.severity), result.layer, CODES[f.code].specificity, -i)
                if best is None or key > best:
                    best, chosen = key, f
        return chosen

    def policy_for(self, node: str | None) -> NodePolicy | None:
        """The node's policy as the latest layer that examined it decided it (the verdict line's
        holder, the walk's buttons), else None."""
        return next((p for r in reversed(self.layers) if (p := r.policy_for(node)) is not None), None)

    def to_dict(self) -> dict[str, object]:
        v = self.verdict
        return {
            "target": self.target.to_dict(),
            "layers": [r.to_dict() for r in self.layers],
            "verdict": None if v is None else {"layer": v.layer, "code": v.code, "summary": v.summary},
        }
