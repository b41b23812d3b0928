"""The daily digest's data: the three reasons a node is flagged, a flagged node, the digest.

Built by layers/digest.py (the checks) and read by handlers/digest.py (text, blocks, JSON:
spec/interfaces.md, `digest --format json`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec

from layers.facts.hosts import HostMap
from layers.owner_digest import OWNER_REASONS, OwnerFacts

ALLOCATABLE_BELOW_CAPACITY = "ALLOCATABLE_BELOW_CAPACITY"
REMAPPED_ROWS_RISING = "REMAPPED_ROWS_RISING"
ROW_REMAP_FAILURE = "ROW_REMAP_FAILURE"
REASONS = (ALLOCATABLE_BELOW_CAPACITY, REMAPPED_ROWS_RISING, ROW_REMAP_FAILURE)
# Worst first when the list is long: a failed remap means RMA, a lost GPU costs capacity now.
_WEIGHT = {ROW_REMAP_FAILURE: 4, ALLOCATABLE_BELOW_CAPACITY: 2, REMAPPED_ROWS_RISING: 1}
# An owner gave up (a person must act) outranks all; agents' faults and NotReady are a lost node.
_WEIGHT.update(dict(zip(OWNER_REASONS, (5, 3, 3), strict=True)))


class ResourceCount(msgspec.Struct, frozen=True):
    resource: str
    capacity: int
    allocatable: int
    replicas: int = 1  # units per GPU on a time-sliced node (capacity and allocatable count replicas)

    @property
    def gpu_capacity(self) -> int:
        return -(-self.capacity // self.replicas)

    @property
    def gpu_allocatable(self) -> int:
        """GPUs left: a GPU marked unhealthy takes all its replicas, so a partial one is lost."""
        lost = self.capacity - self.allocatable
        return self.gpu_capacity - (-(-lost // self.replicas) if lost > 0 else 0)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "resource": self.resource,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
        }
        if self.replicas > 1:
            out["replicas_per_gpu"] = self.replicas
        return out


class FlaggedNode(msgspec.Struct, frozen=True):
    node: str
    capacity: int  # GPUs (and MIG instances) the node advertises; time-sliced replicas counted as GPUs
    allocatable: int
    reasons: tuple[str, ...]
    correctable_rows_24h: int = 0
    uncorrectable_rows_24h: int = 0
    xids_24h: tuple[int, ...] = ()
    cordoned: bool = False
    row_remap_failure: bool = False
    resources: tuple[ResourceCount, ...] = ()
    gpus: tuple[str, ...] = ()  # the GPUs whose rows rose or whose remap failed, as a person names them
    owners: OwnerFacts = msgspec.field(
        default_factory=OwnerFacts
    )  # the node's owner and state (layers/owner_digest.py)

    @property
    def gaps(self) -> tuple[ResourceCount, ...]:
        return tuple(r for r in self.resources if r.allocatable < r.capacity)

    @property
    def weight(self) -> tuple[int, int]:
        # Reasons added beside the three (the ledger's, layers/digest_ledger.py) weigh as a capacity gap.
        return max(_WEIGHT.get(r, 2) for r in self.reasons), sum(_WEIGHT.get(r, 2) for r in self.reasons)

    def to_dict(self) -> dict[str, object]:
        return {
            "node": self.node,
            "capacity": self.capacity,
            "allocatable": self.allocatable,
            "reasons": list(self.reasons),
            "remapped_rows_24h": {
                "correctable": self.correctable_rows_24h,
                "uncorrectable": self.uncorrectable_rows_24h,
            },
            "xids_24h": list(self.xids_24h),
            "cordoned": self.cordoned,
            "row_remap_failure": self.row_remap_failure,
            "resources": [r.to_dict() for r in self.resources],
            "gpus": list(self.gpus),
            "owner": self.owners.owner.to_dict() if self.owners.owner else None,
            "owner_reason": self.owners.needs_person,
            "health_conditions": list(self.owners.conditions),
        }


@dataclass(frozen=True)
class Digest:
    generated_at: float  # unix seconds
    gpu_nodes: int
    flagged: tuple[FlaggedNode, ...]
    metrics_source: str = ""
    metrics_error: str | None = None  # why remapped rows and Xids could not be read
    notes: tuple[str, ...] = ()
    rows_read: bool = True  # False: remapped rows were not readable, their zeros mean "unknown"
    hostmap: HostMap = field(default_factory=HostMap, compare=False, repr=False)
    offenders: tuple[Any, ...] = ()  # the ledger's rules met (layers/digest_ledger.py Offender)

    @property
    def generated_iso(self) -> str:
        return datetime.fromtimestamp(self.generated_at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def to_dict(self) -> dict[str, object]:
        return {
            "generated_at": self.generated_iso,
            "gpu_nodes": self.gpu_nodes,
            "flagged": [f.to_dict() for f in self.flagged],
            "metrics": {"source": self.metrics_source, "error": self.metrics_error},
            "notes": list(self.notes),
            "offenders": [x.to_dict() for x in self.offenders],
        }


def row_count(value: float) -> int:
    """Remapped rows as a whole number: `increase` extrapolates (6.0027 for 6), but any rise is at least 1."""
    return 0 if value <= 0 else max(1, round(value))
