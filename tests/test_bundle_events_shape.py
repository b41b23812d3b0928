"""must-gather's events table reads events as the real scheduler writes them (events.k8s.io/v1
recorder, core/v1 view, as kube-scheduler v1.36.3 wrote it in tests/controlplane): no
firstTimestamp/lastTimestamp, `source: {}`, repeats in `series`. LAST SEEN is the series' latest
occurrence, not the first (eventTime)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.actions.bundle_text import events_table

NOW = datetime(2026, 12, 7, 18, 0, 0, tzinfo=UTC).timestamp()
SCHEDULER_EVENT = {
    "metadata": {"name": "big.18800000000000aa", "namespace": "sched"},
    "involvedObject": {"kind": "Pod", "namespace": "sched", "name": "big", "apiVersion": "v1"},
    "reason": "FailedScheduling",
    "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. no new claims to deallocate, "
    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    "source": {},
    "firstTimestamp": None,
    "lastTimestamp": None,
    "type": "Warning",
    "eventTime": "2026-12-07T16:00:00.123456Z",
    "series": {"count": 24, "lastObservedTime": "2026-12-07T17:59:50.000000Z"},
    "action": "Scheduling",
    "reportingComponent": "default-scheduler",
    "reportingInstance": "default-scheduler-cp-01",
}


def test_last_seen_is_the_series_latest_and_the_count_its_count() -> None:
    [_, row] = events_table([SCHEDULER_EVENT], NOW).splitlines()
    assert row.split()[:5] == ["10s", "Warning", "FailedScheduling", "pod/big", "x24"], row


def test_a_series_event_sorts_by_its_latest_occurrence() -> None:
    older = {
        **SCHEDULER_EVENT,
        "metadata": {"name": "old"},
        "involvedObject": {"kind": "Pod", "name": "old"},
        "series": None,
        "eventTime": "2026-12-07T17:00:00.000000Z",
    }
    lines = events_table([SCHEDULER_EVENT, older], NOW).splitlines()[1:]
    assert [line.split()[3] for line in lines] == ["pod/old", "pod/big"], lines
