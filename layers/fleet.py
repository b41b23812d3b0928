"""The fleet's versions and their majority (layer 3, and the digest).

Which driver, CUDA runtime, kernel and OS image each GPU node runs (GFD labels
and status.nodeInfo), how those values are spread over the fleet, and which
nodes differ from the majority. Also how findings about many nodes are folded
so a pending pod examining every GPU node does not drown the thread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from layers import objects as o
from layers.findings import Finding, finding
from layers.sources import K8sObject

MAX_PER_CODE = 10


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


def spread(nodes: list[K8sObject], what: str, read: Callable[[K8sObject], str | None]) -> Spread:
    """How the values `read` gives are spread over these nodes (nodes without one are left out)."""
    by_node: dict[str, str] = {}
    for n in nodes:
        value = read(n)
        if value:
            by_node[o.name(n)] = value
    return Spread(what, tuple(Counter(by_node.values()).most_common()), by_node)


def odd_list(nodes: list[str]) -> str:
    """Up to ten node names, then how many more."""
    shown = ", ".join(nodes[:10])
    return shown + (f" … and {len(nodes) - 10} more" if len(nodes) > 10 else "")


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
                    + [f"odd nodes ({s.what}): {odd_list(s.odd_nodes)}" for s in odd],
                    commands=[command],
                    node=node,
                )
            )
    return out


def fold(findings: list[Finding]) -> list[Finding]:
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
                evidence=[*rest[0].evidence, f"nodes: {odd_list(nodes)}"],
                commands=rest[0].commands,
                severity=rest[0].severity,
            )
        )
    return out
