"""kube-scheduler's FailedScheduling message, parsed into counted reasons.

"0/N nodes are available: <count> <reason>, …. <PostFilter notes>" (kube-scheduler
framework/types.go), in its old and new spellings; any whitespace and case. The PostFilter notes
follow the histogram: `preemption: …` and, since DRA is on by default (1.34+), the DRA plugin's
`no new claims to deallocate`, `still not schedulable` or `deallocation of ResourceClaim completed`
before it (reference/real-control-plane.md §4): notes, not per-node reasons.
"""

from __future__ import annotations

import re

import msgspec

_AVAILABLE = re.compile(r"(?<!\d)(\d+)\s*/\s*(\d+)\s+nodes?\s+(?:are|is)\s+available\s*:?\s*", re.IGNORECASE)
_PREEMPTION = re.compile(r"(?:\.|(?<![\s.]))\s*preemption\s*:", re.IGNORECASE)
# DynamicResources' PostFilter notes, joined to the next note by ", ": they start the PostFilter part.
_DRA_NOTE = re.compile(
    r"(?:\.|,|(?<![\s.]))\s*(?:no\s+new\s+claims\s+to\s+deallocate|still\s+not\s+schedulable"
    r"|deallocation\s+of\s+ResourceClaim\s+completed)\b",
    re.IGNORECASE,
)
# Reasons are "<count> <text>" joined by ", "; a comma inside a reason (the old
# "had taint {k: v}, that the pod didn't tolerate") is not followed by a count.
_REASON_SPLIT = re.compile(r",\s*(?=\d+\s)")
_COUNTED = re.compile(r"^(\d+)\s+(.+)$", re.DOTALL)
_SELECTOR = re.compile(
    r"didn'?t\s+match\s+(?:the\s+)?(?:node\s+selector|pod'?s\s+node\s+affinity|node\s+affinity)"
    r"|didn'?t\s+satisfy\s+plugin\(s\)\s*\[\s*NodeAffinity",
    re.IGNORECASE,
)
# NodeUnschedulable says "were unschedulable"; where TaintToleration saw the cordon first it names
# the taint "{node.kubernetes.io/unschedulable: }": the same cordon.
_UNSCHEDULABLE = re.compile(
    r"(?:were|was|is|are)\s+unschedulable|node\.kubernetes\.io/unschedulable", re.IGNORECASE
)
_TAINTED = re.compile(r"untolerated\s+taint|had\s+taints?\b|didn'?t\s+tolerate", re.IGNORECASE)
# VolumeBinding's "node(s) had volume node affinity conflict"; since 1.33 (PR 129887)
# "node(s) didn't match PersistentVolume's node affinity".
_VOLUME = re.compile(
    r"volume\s+node\s+affinity\s+conflict|didn'?t\s+match\s+PersistentVolume'?s\s+node\s+affinity",
    re.IGNORECASE,
)
# PodTopologySpread's "node(s) didn't match pod topology spread constraints" (and "… (missing required label)").
_SPREAD = re.compile(r"didn'?t\s+match\s+pod\s+topology\s+spread\s+constraints", re.IGNORECASE)


class SchedulerReason(msgspec.Struct, frozen=True):
    count: int | None
    text: str


class SchedulingFailure(msgspec.Struct, frozen=True):
    """A parsed `0/N nodes are available: …` message (kube-scheduler framework/types.go)."""

    message: str
    reasons: tuple[SchedulerReason, ...]  # of the filter phase; the PostFilter part is split off

    @property
    def selector_mismatch(self) -> bool:
        return any(_SELECTOR.search(r.text) for r in self.reasons)

    @property
    def unschedulable(self) -> bool:
        return any(_UNSCHEDULABLE.search(r.text) for r in self.reasons)

    @property
    def untolerated_taint(self) -> bool:
        return any(_TAINTED.search(r.text) for r in self.reasons)

    @property
    def volume_conflict(self) -> bool:
        return any(_VOLUME.search(r.text) for r in self.reasons)

    @property
    def topology_spread(self) -> bool:
        return any(_SPREAD.search(r.text) for r in self.reasons)


def _split_reasons(body: str) -> tuple[SchedulerReason, ...]:
    body = body.strip().rstrip(".").strip()
    reasons: list[SchedulerReason] = []
    # PreFilter messages ("pod has unbound immediate PersistentVolumeClaims") end with a
    # period before the counted filter reasons; split on ". " first.
    for sentence in re.split(r"\.\s+(?=\d|[A-Za-z])", body):
        for piece in _REASON_SPLIT.split(sentence.strip()):
            piece = piece.strip().strip(",").strip().rstrip(".").strip()
            if not piece:
                continue
            m = _COUNTED.match(piece)
            reasons.append(
                SchedulerReason(int(m.group(1)), m.group(2)) if m else SchedulerReason(None, piece)
            )
    return tuple(reasons)


def parse_failed_scheduling(message: str) -> SchedulingFailure:
    """Split a FailedScheduling message into counted reasons; unknown shapes keep the whole text."""
    text = " ".join(message.split())
    m = _AVAILABLE.search(text)
    if not m:
        return SchedulingFailure(text, _split_reasons(text))
    rest = text[m.end() :]
    cut = post_filter_start(rest)
    return SchedulingFailure(text, _split_reasons(rest[:cut]))


def post_filter_start(text: str) -> int:
    """Where the PostFilter notes begin in a message (its length when there are none): the first of
    DRA's notes or `preemption:`."""
    starts = [m.start() for m in (_DRA_NOTE.search(text), _PREEMPTION.search(text)) if m]
    return min(starts, default=len(text))
