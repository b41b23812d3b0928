"""The fleet's versions and their majority (layer 3, and the digest).

Which driver, CUDA runtime, kernel and OS image each GPU node runs (GFD labels
and status.nodeInfo), how those values are spread over the fleet, and which
nodes differ from the majority.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.fold import MAX_LISTED, shown
from layers.facts.logs import LogReads
from layers.findings import Finding, finding
from layers.sources import K8sObject, SourceError

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"  # only upgrade-failed is a finding


def _joined(lab: dict[str, str], prefix: str, parts: tuple[str, ...]) -> str | None:
    """`major.minor[.rev]` from split labels; None without a major."""
    values = [(lab.get(f"{prefix}.{p}") or "").strip() for p in parts]
    if not values[0]:
        return None
    return ".".join(v for v in values if v)


def driver_version(node: K8sObject) -> str | None:
    """GFD's driver version: `.full`, else its split labels, else the deprecated cuda.driver.* of older GFD."""
    lab = o.labels(node)
    full = (lab.get("nvidia.com/cuda.driver-version.full") or "").strip()
    return (
        full
        or _joined(lab, "nvidia.com/cuda.driver-version", ("major", "minor", "revision"))
        or _joined(lab, "nvidia.com/cuda.driver", ("major", "minor", "rev"))
    )


def runtime_version(node: K8sObject) -> str | None:
    """GFD's CUDA runtime version: `.full`, else its split labels, else the deprecated cuda.runtime.*."""
    lab = o.labels(node)
    full = (lab.get("nvidia.com/cuda.runtime-version.full") or "").strip()
    return (
        full
        or _joined(lab, "nvidia.com/cuda.runtime-version", ("major", "minor"))
        or _joined(lab, "nvidia.com/cuda.runtime", ("major", "minor"))
    )


def kernel_version(node: K8sObject) -> str | None:
    return str(o.node_info(node).get("kernelVersion") or "").strip() or None


def os_image(node: K8sObject) -> str | None:
    return str(o.node_info(node).get("osImage") or "").strip() or None


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


def spread(nodes: list[K8sObject], what: str, read: Callable[[K8sObject], str | None]) -> Spread:
    """How the values `read` gives are spread over these nodes (nodes without one are left out)."""
    by_node: dict[str, str] = {}
    for n in nodes:
        value = read(n)
        if value:
            by_node[o.name(n)] = value
    return Spread(what, tuple(Counter(by_node.values()).most_common()), by_node)


def skew(code: str, spreads: list[Spread], examined: list[str], command: str, advice: str) -> list[Finding]:
    """One finding per examined node whose values differ from the fleet majority in any of `spreads`."""
    out: list[Finding] = []
    for node in examined:
        odd = [s for s in spreads if s.odd(node)]
        if odd:
            out.append(
                finding(
                    code,
                    f"{node} runs " + " and ".join(s.describe(node) for s in odd) + f": {advice}",
                    evidence=[s.table() for s in odd]
                    + [f"odd nodes ({s.what}): {shown(s.odd_nodes)}" for s in odd],
                    commands=[command],
                    node=node,
                )
            )
    return out


def skews(spreads: list[Spread], examined: list[str]) -> list[Finding]:
    """L3's skew findings from the (driver, runtime, kernel, OS image) spreads."""
    driver, runtime, kernel, image = spreads
    return skew(
        "L3_DRIVER_VERSION_SKEW",
        [driver, runtime],
        examined,
        "kubectl get nodes -L nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full",
        "upgrade or roll back this node's driver so the fleet matches (GFD labels per node)",
    ) + skew(
        "L3_KERNEL_SKEW",
        [kernel, image],
        examined,
        "kubectl get nodes -o wide",
        "check that the driver image fits this kernel/OS (a kernel update needs a matching driver build)",
    )


def upgrade_failed(node: str, node_obj: K8sObject | None, events: Sequence[str] = ()) -> list[Finding]:
    """L3_DRIVER_UPGRADE_FAILED when the operator's upgrade controller labelled the node upgrade-failed.

    `events` are the node's upgrade event lines: they say why (a drain blocked by a PodDisruptionBudget,
    a driver pod that never came up), which the label alone does not.
    """
    state = o.labels(node_obj or {}).get(UPGRADE_STATE, "")
    if state.strip().lower() != "upgrade-failed":
        return []
    return [
        finding(
            "L3_DRIVER_UPGRADE_FAILED",
            f"The operator's driver upgrade failed on {node}: fix what stopped it (the driver pod's error or a "
            f"blocked drain, see the node's events), then relabel the node {UPGRADE_STATE}=upgrade-required "
            "to retry",
            evidence=[f"{UPGRADE_STATE}={state}", *events],
            commands=[
                f"kubectl get nodes -l {UPGRADE_STATE}=upgrade-failed",
                f"kubectl get events -A --field-selector involvedObject.kind=Node,involvedObject.name={node}",
                f"kubectl label node {node} {UPGRADE_STATE}=upgrade-required --overwrite",
            ],
            node=node,
        )
    ]


def upgrade_event_lines(events: Sequence[K8sObject]) -> list[str]:
    """A node's events about the driver upgrade (the controller's GPUDriverUpgrade, drain failures)."""
    out: list[str] = []
    for ev in events:
        msg = " ".join(str(ev.get("message") or "").split())
        reason = str(ev.get("reason") or "")
        if "upgrade" in reason.lower() or "drain" in msg.lower() or "upgrade" in msg.lower():
            out.append(f"event {reason}: {msg}")
    return list(dict.fromkeys(out))[:MAX_LISTED]


def upgrade_events(reads: LogReads, node: str, node_obj: K8sObject | None) -> list[str]:
    """The node's driver-upgrade events, read only for an upgrade-failed node: they say why it failed."""
    if not upgrade_failed(node, node_obj):
        return []
    try:
        return upgrade_event_lines(reads.ctx.events("Node", None, node))
    except SourceError as err:
        reads.refused(f"events of node {node}", err, node)
        return []


def fleet_spreads(ctx: WalkContext) -> list[Spread]:
    """The GPU nodes' (driver, CUDA runtime, kernel, OS image) spreads, once per walk."""

    def compute() -> list[Spread]:
        gpu = ctx.gpu_nodes()
        return [
            spread(gpu, "driver", driver_version),
            spread(gpu, "CUDA runtime", runtime_version),
            spread(gpu, "kernel", kernel_version),
            spread(gpu, "OS image", os_image),
        ]

    return ctx.cached("l3_fleet_spread", compute)
