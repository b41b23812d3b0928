"""Ledger entries: one thing that happened to a GPU or a node, keyed by its natural identity.

An Xid, a row-remap failure, remapped rows, an unhealthy mark, a cordon, a bundle, a
diagnostic (spec/interfaces.md, "Node history, repeat offenders and RMA"). Two walks and an
alert that saw the same Xid write one entry: the identity is the GPU (by UUID: the ledger follows
the card; the node is where it was seen), kind and Xid — the node, kind and time for a node's own
entries — and the source's time within SAME_EVENT_S (witnesses stamp the same Xid minutes apart:
the plugin's line at once, DCGM's series on a grid, an alert after its `for:`).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec.structs import replace

DAY_S = 86400
WEEK_S = 7 * DAY_S

# The same Xid reported by two witnesses (the plugin's log line, DCGM's gauge, an alert's startsAt)
# lands within minutes: within this much of an entry it is that entry, seen again.
SAME_EVENT_S = 600
# Kinds that are a state, not a moment: one entry per GPU, whenever it was first seen.
STATE_KINDS = frozenset({"row_remap_failure"})
# Kinds read from series on an hourly grid: one entry per GPU and day (a grid shifts between reads).
DAY_KINDS = frozenset({"remapped_rows"})
# A fault's cascade (Xid 48 then 64 a second later, marked unhealthy at once) is one fault of the
# node: REPEAT_NODE_FAULTS counts faults at least this far apart, or with a repair between them.
CASCADE_S = 600


def parse_time(text: str | None) -> float | None:
    """Unix seconds of an RFC 3339 time as Kubernetes and Alertmanager write them
    (`2026-11-29T09:29:30Z`, fractions and offsets too); None when it is not one."""
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None and when.year > 1 else None


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Event(msgspec.Struct, frozen=True):
    """One ledger entry. `gpu` is the GPU's UUID ("" for a node's own event: a cordon, a bundle)."""

    node: str
    kind: str
    at: float  # unix seconds, as the source stamped it (the log line's time, the alert's startsAt)
    gpu: str = ""
    xid: int | None = None
    source: str = ""  # who saw it: dcgm, device-plugin, health-agent, alert, gpubot, diag
    detail: str = ""
    actor: str = ""  # who did it (cordon, uncordon, bundle, diag)
    seen_by: tuple[str, ...] = ()  # every source that reported it (the first is `source`)

    @property
    def pending(self) -> bool:
        return self.kind == "remapped_rows" and self.detail.startswith("pending")

    @property
    def identity(self) -> tuple[str, str, str, int | None, bool]:
        """What makes two reports one entry: a GPU's by its UUID wherever it was seen, a node's by the node."""
        return ("" if self.gpu else self.node, self.gpu, self.kind, self.xid, self.pending)

    @property
    def event_id(self) -> str:
        """Stable id: the natural identity, plus the source's time for moments (its day for daily
        kinds, nothing for states)."""
        if self.kind in STATE_KINDS:
            when = ""
        elif self.kind in DAY_KINDS:
            when = f"d{int(self.at // DAY_S)}"
        else:
            when = str(int(self.at))
        parts = (
            self.node,
            self.gpu,
            self.kind,
            "" if self.xid is None else str(self.xid),
            str(self.pending),
            when,
        )
        return hashlib.sha1("|".join(parts).encode(), usedforsecurity=False).hexdigest()[:20]

    def same_as(self, other: Event) -> bool:
        """The same happening told twice: same node, GPU, kind and Xid, at (about) the same time."""
        if self.identity != other.identity:
            return False
        if self.kind in STATE_KINDS:
            return True
        if self.kind in DAY_KINDS:
            return int(self.at // DAY_S) == int(other.at // DAY_S)
        return abs(self.at - other.at) <= SAME_EVENT_S

    def merged(self, other: Event) -> Event:
        """This entry with another witness's report of it: the earliest time, every source."""
        sources = tuple(dict.fromkeys((*self.witnesses, *other.witnesses)))
        first = self if self.at <= other.at else other
        return replace(
            self,
            at=first.at,
            source=first.source or self.source,
            detail=self.detail or other.detail,
            actor=self.actor or other.actor,
            seen_by=sources,
        )

    @property
    def witnesses(self) -> tuple[str, ...]:
        return self.seen_by or ((self.source,) if self.source else ())

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": iso(self.at),
            "node": self.node,
            "kind": self.kind,
            "xid": self.xid,
            "source": self.source,
            "detail": self.detail,
            "actor": self.actor or None,
            "seen_by": list(self.witnesses),
        }

    def to_record(self) -> dict[str, Any]:
        """What the store keeps (times as numbers, so retention compares without parsing)."""
        return {
            "node": self.node,
            "gpu": self.gpu,
            "kind": self.kind,
            "at": self.at,
            "xid": self.xid,
            "source": self.source,
            "detail": self.detail,
            "actor": self.actor,
            "seen_by": list(self.witnesses),
        }

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Event:
        xid = rec.get("xid")
        return cls(
            node=str(rec["node"]),
            kind=str(rec["kind"]),
            at=float(rec["at"]),
            gpu=str(rec.get("gpu") or ""),
            xid=int(xid) if xid is not None else None,
            source=str(rec.get("source") or ""),
            detail=str(rec.get("detail") or ""),
            actor=str(rec.get("actor") or ""),
            seen_by=tuple(str(s) for s in rec.get("seen_by") or ()),
        )


def coalesce(events: Iterable[Event]) -> list[Event]:
    """Events with every duplicate folded into its first report, in time order."""
    kept: list[Event] = []
    by_identity: dict[tuple[str, str, str, int | None, bool], list[int]] = defaultdict(list)
    for ev in sorted(events, key=lambda e: (e.at, e.source)):
        for i in by_identity[ev.identity]:
            if kept[i].same_as(ev):
                kept[i] = kept[i].merged(ev)
                break
        else:
            by_identity[ev.identity].append(len(kept))
            kept.append(ev)
    return kept


class WindowCount(msgspec.Struct, frozen=True):
    """What Prometheus counted for one GPU and Xid over the per-GPU rules' window (`increase(…[24h])`): it
    fills what the bot did not witness, never adds to what it did, and is never summed over a node."""

    node: str
    gpu: str
    xid: int
    day: int
