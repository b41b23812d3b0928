"""kube-scheduler's newer FailedScheduling wording (issue 30 item 6; reference/real-control-plane.md §4):
each parsed as its older form, the PostFilter notes split from the per-node histogram."""

from __future__ import annotations

import pytest

from layers.facts.schedmsg import parse_failed_scheduling, post_filter_start
from layers.scheduling import scheduler_gist

PREEMPT = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."


@pytest.mark.parametrize(
    ("message", "reasons"),
    [
        # 1.35 and 1.34 patches: no key, no value; DRA's note before preemption's.
        ("0/17 nodes are available: 17 node(s) had untolerated taint(s). no new claims to deallocate, "
         + PREEMPT.format(n=17), [(17, "node(s) had untolerated taint(s)")]),
        ("0/2 nodes are available: 1 cannot allocate all claims, 1 node(s) didn't match Pod's node "
         "affinity/selector. still not schedulable, " + PREEMPT.format(n=2),
         [(1, "cannot allocate all claims"), (1, "node(s) didn't match Pod's node affinity/selector")]),
        ("0/3 nodes are available: 3 node(s) didn't match PersistentVolume's node affinity. deallocation of "
         "ResourceClaim completed, " + PREEMPT.format(n=3), [(3, "node(s) didn't match PersistentVolume's node affinity")]),
        # The older forms are untouched.
        ("0/1 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. "
         + PREEMPT.format(n=1), [(1, "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }")]),
        ("0/4 nodes are available: 4 node(s) had volume node affinity conflict. " + PREEMPT.format(n=4),
         [(4, "node(s) had volume node affinity conflict")]),
    ],
)  # fmt: skip
def test_histogram_is_split_from_the_post_filter_notes(message: str, reasons: list[tuple[int, str]]) -> None:
    parsed = parse_failed_scheduling(message)
    assert [(r.count, r.text) for r in parsed.reasons] == reasons
    gist = scheduler_gist(message)
    assert not any(w in gist for w in ("preemption", "deallocat", "still not schedulable")), gist


def test_both_volume_wordings_are_a_volume_conflict() -> None:
    for wording in ("had volume node affinity conflict", "didn't match PersistentVolume's node affinity"):
        parsed = parse_failed_scheduling(
            f"0/5 nodes are available: 5 node(s) {wording}. " + PREEMPT.format(n=5)
        )
        assert parsed.volume_conflict and not parsed.selector_mismatch


def test_all_taint_wordings_are_an_untolerated_taint() -> None:
    for wording in (
        "had taints that the pod didn't tolerate",
        "had untolerated taint {nvidia.com/gpu: present}",
        "had untolerated taint(s)",
    ):
        parsed = parse_failed_scheduling(f"0/5 nodes are available: 5 node(s) {wording}. no new claims to deallocate, "
                                         + PREEMPT.format(n=5))  # fmt: skip
        assert parsed.untolerated_taint, wording


def test_a_message_without_notes_keeps_every_reason() -> None:
    text = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert post_filter_start(text) == len(text)
    assert scheduler_gist(text) == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu"
