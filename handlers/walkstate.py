"""A walk's stored state: what the state store keeps under the walk id.

Plain JSON so any replica, after any restart, reads the same walk: its
target, thread and requester, and each layer's result with when it ran; and,
from the layers done, where each navigation button goes next.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import msgspec

from layers.findings import Finding, LayerResult, Severity, Target
from layers.nodeactions import NodePolicy
from layers.walk import LAYERS


def walk_key(walk_id: str) -> str:
    """Where the state store keeps a walk (its layers and claims live under the same prefix)."""
    return f"walk:{walk_id}"


class WalkGone(LookupError):
    """The walk id is unknown: expired past the retention, or never existed."""


class Walk(msgspec.Struct, frozen=True):
    walk_id: str
    target: Target
    channel: str
    requester: str | None
    root_ts: str | None
    thread_ts: str | None  # the digest's node walks live in the digest message's thread
    created_at: float
    cluster: str | None = None  # the cluster it walks: buttons are routed back to that cluster's agents

    @property
    def thread(self) -> str | None:
        """Where layer messages go: the root's thread, or the digest message's."""
        return self.thread_ts or self.root_ts

    def to_dict(self) -> dict[str, Any]:
        return {
            "walk_id": self.walk_id,
            "target": self.target.to_dict(),
            "channel": self.channel,
            "requester": self.requester,
            "root_ts": self.root_ts,
            "thread_ts": self.thread_ts,
            "created_at": self.created_at,
            "cluster": self.cluster,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Walk:
        t = d["target"]
        return cls(
            walk_id=d["walk_id"],
            target=Target(namespace=t.get("namespace"), pod=t.get("pod"), node=t.get("node")),
            channel=d["channel"],
            requester=d.get("requester"),
            root_ts=d.get("root_ts"),
            thread_ts=d.get("thread_ts"),
            created_at=float(d.get("created_at") or 0.0),
            cluster=d.get("cluster"),
        )


# --- layer results in the store (to_dict() drops `next` per finding; this keeps it all) ---------------


def layer_to_dict(result: LayerResult, at: float) -> dict[str, Any]:
    return {
        "layer": result.layer,
        "status": result.status.label,
        "next": result.next,
        "at": at,
        "findings": [
            {
                "code": f.code,
                "severity": f.severity.label,
                "summary": f.summary,
                "evidence": list(f.evidence),
                "commands": list(f.commands),
                "node": f.node,
                "next": f.next,
            }
            for f in result.findings
        ],
        "policies": [p.to_dict() for p in result.policies],
    }


def layer_from_dict(d: dict[str, Any]) -> tuple[LayerResult, float]:
    findings = tuple(
        Finding(
            code=f["code"],
            severity=Severity.parse(f["severity"]),
            summary=f["summary"],
            evidence=tuple(f.get("evidence") or ()),
            commands=tuple(f.get("commands") or ()),
            node=f.get("node"),
            next=f.get("next"),
        )
        for f in d["findings"]
    )
    result = LayerResult(
        layer=d["layer"],
        status=Severity.parse(d["status"]),
        next=d["next"],
        findings=findings,
        policies=tuple(NodePolicy.from_dict(p) for p in d.get("policies") or ()),
    )
    return result, float(d.get("at") or 0.0)


def new_walk_id() -> str:
    return uuid.uuid4().hex[:16]


# --- where a click goes next, from the layers done (`done`: WalkService.results) -------------------


def next_after(done: Mapping[int, LayerResult], from_layer: int | None) -> int | None:
    """`layer_descend`: the layer below the clicked one (or below the deepest done)."""
    base = from_layer if from_layer is not None else max(done, default=0)
    return base + 1 if base + 1 in LAYERS else None


def suggested(done: Mapping[int, LayerResult], from_layer: int | None) -> int | None:
    """`layer_jump`: the layer the clicked layer's findings point to."""
    if from_layer is not None and from_layer in done:
        return done[from_layer].next_layer
    for result in reversed(list(done.values())):
        if result.next_layer is not None and result.next_layer not in done:
            return result.next_layer
    return None


def remaining(done: Mapping[int, LayerResult]) -> list[int]:
    """`walk_all`: every layer not done yet, in order."""
    return [n for n in sorted(LAYERS) if n not in done]
