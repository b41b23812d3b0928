"""The incident state machine (handlers/incidents.py), alert by alert, on a clock the test holds."""

from __future__ import annotations

from handlers.alert_payload import Alert
from handlers.alert_subjects import Subject
from handlers.incidents import (
    DUPLICATE,
    NEW_ALERT,
    NO_INCIDENT,
    OPENED,
    OUTBOX_MAX,
    REFIRED,
    REPEAT,
    RESOLVED,
    Incident,
    Policy,
    apply,
)

NODE = Subject("node", "gpu-7")
POLICY = Policy(rewalk_s=1800, duplicate_s=60)


def a(name: str, status: str = "firing", fp: str = "") -> Alert:
    return Alert(
        status,
        {"alertname": name, "Hostname": "gpu-7"},
        {"summary": f"{name} on gpu-7"},
        fp or name.lower()[:16],
        "",
        "",
    )


def opened(now: float = 1000.0) -> Incident:
    change = apply(None, NODE, [a("GPUXidError")], now, POLICY)
    assert change.opened and change.decisions == (OPENED,) and change.incident is not None
    return change.incident


def test_resolved_without_an_open_incident_changes_nothing() -> None:
    change = apply(None, NODE, [a("GPUXidError", "resolved")], 1000, POLICY)
    assert change.incident is None and change.decisions == (NO_INCIDENT,)


def test_duplicates_repeats_new_alerts_refires_and_the_close() -> None:
    inc = opened()
    assert inc.walk_due and inc.needs_slack()
    dup = apply(inc, NODE, [a("GPUXidError")], 1030, POLICY)
    assert dup.decisions == (DUPLICATE,) and dup.incident is None  # nothing to store
    rep = apply(inc, NODE, [a("GPUXidError")], 1100, POLICY)
    assert rep.decisions == (REPEAT,) and rep.incident is not None
    inc = rep.incident
    assert [x["text"] for x in inc.outbox][-1].startswith(":repeat:")
    shown = inc.version
    more = apply(inc, NODE, [a("GPURowRemapFailure")], 1200, POLICY)
    assert more.decisions == (NEW_ALERT,) and more.incident is not None
    inc = more.incident
    assert inc.version == shown + 1 and inc.names == ["GPUXidError", "GPURowRemapFailure"]
    one = apply(inc, NODE, [a("GPUXidError", "resolved")], 1300, POLICY)
    assert one.decisions == (RESOLVED,) and one.incident is not None and one.incident.open
    inc = one.incident
    back = apply(inc, NODE, [a("GPUXidError")], 1400, POLICY)
    assert back.decisions == (REFIRED,) and back.incident is not None
    inc = back.incident
    done = apply(inc, NODE, [a("GPUXidError", "resolved"), a("GPURowRemapFailure", "resolved")], 1500, POLICY)
    assert done.closed and done.incident is not None and not done.incident.open
    again = apply(done.incident, NODE, [a("GPUXidError")], 1600, POLICY)
    assert again.opened and again.incident is not None and again.incident.id != inc.id


def test_at_most_one_walk_per_rewalk_interval() -> None:
    inc = opened()
    inc.walk_due, inc.walked_at = False, 1000.0  # the first walk ran
    soon = apply(inc, NODE, [a("GPUXidError")], 1000 + 600, POLICY)
    assert not soon.rewalk and soon.incident is not None and not soon.incident.walk_due
    later = apply(soon.incident, NODE, [a("GPUXidError")], 1000 + 1800, POLICY)
    assert later.rewalk and later.incident is not None and later.incident.walk_due


def test_a_storm_incident_queues_no_thread_lines() -> None:
    inc = opened()
    inc.kind, inc.walk_due = "summary", False
    change = apply(inc, NODE, [a("GPURowRemapFailure")], 1100, POLICY)
    assert change.shown_changed and change.incident is not None and change.incident.outbox == []


def test_a_long_slack_outage_keeps_the_newest_lines_and_counts_the_rest() -> None:
    inc = opened()
    inc.root = {"channel": "C0", "ts": "1.0"}
    now = 1000.0
    for _ in range(OUTBOX_MAX + 7):
        now += 61
        change = apply(inc, NODE, [a("GPUXidError")], now, POLICY)
        assert change.incident is not None
        inc = change.incident
    assert len(inc.outbox) == OUTBOX_MAX and inc.dropped == 7
    assert inc.outbox[-1]["n"] == inc.lines


def test_the_record_round_trips_through_json() -> None:
    import json

    inc = opened()
    assert Incident.from_dict(json.loads(json.dumps(inc.to_dict()))).to_dict() == inc.to_dict()
