"""The bundle's events table (bot/actions/bundle_text.py) on the events.k8s.io/v1 shape the scheduler's
recorder leaves in the core/v1 view: first/lastTimestamp null, eventTime set, repeats in series.count
(reference/real-control-plane.md §4.1). Ordered by the latest occurrence, counted by the series."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.actions.bundle_text import events_table

NOW = datetime(2026, 11, 29, 10, 12, tzinfo=UTC).timestamp()


def _v1(name: str, first: str, last: str | None, count: int | None, note: str) -> dict[str, object]:
    ev: dict[str, object] = {
        "metadata": {"name": name}, "type": "Warning", "reason": "FailedScheduling", "firstTimestamp": None,
        "lastTimestamp": None, "eventTime": first, "note": note, "reportingComponent": "default-scheduler",
        "involvedObject": {"kind": "Pod", "name": "p"},
    }  # fmt: skip
    if count:
        ev["series"] = {"count": count, "lastObservedTime": last}
    return ev


def test_series_events_sort_by_their_last_occurrence_and_show_their_count() -> None:
    older_series = _v1("a", "2026-11-29T09:00:00.1Z", "2026-11-29T10:11:00.5Z", 12, "newest by its series")
    single = _v1("b", "2026-11-29T10:02:00.2Z", None, None, "one occurrence in between")
    rows = events_table([older_series, single], NOW).splitlines()[1:]
    assert "one occurrence in between" in rows[0] and rows[0].split()[0] == "9m"
    assert "newest by its series" in rows[1] and "x12" in rows[1] and rows[1].split()[0] == "59s"
