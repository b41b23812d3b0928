"""An alert incident's state and how each alert changes it: pure data, no I/O.

One incident per subject (a node or a pod) while any of its alerts fires. It
is stored as JSON (handlers/alerts.py keeps it in the state store) and holds
what Slack should show: the alerts by Alertmanager fingerprint, the root
message once posted, an outbox of thread lines not yet posted, a version the
root is rendered at, and the walk's state. Slack is brought in line with it
afterwards, so a replica that dies between the webhook and Slack leaves the
work in the store for the next one.

How an alert changes an incident (`apply`):
- no open incident and something fires: a new incident (the caller decides
  thread or storm summary); resolved alerts of no open incident are ignored.
- a fingerprint seen before, firing again: a repeat, unless one was noted
  within `duplicate_s` (two replicas or two Alertmanagers delivering the same
  notification); after it had resolved: "firing again".
- a new fingerprint: "firing too", and its name joins the root.
- resolved: when every alert of the incident has resolved, the incident
  closes and the root says so in place, at the alerts' `endsAt` (Alertmanager
  sends resolved at the group's next flush, minutes later) when that lies
  between the incident's opening and now.
- the thread gets one line per alert name and event of a notification, naming
  the GPUs (dcgm-exporter's `gpu`) it concerns: an NVSwitch tray failing on
  eight GPUs is "firing too · 4 alerts: GPU 4, 5, 6, 7", not four identical
  lines; and a notification that brings news (an alert new, firing again or
  resolved) says no "still firing" besides.
- a walk at most every `rewalk_s`: a repeat or a new alert past that re-runs it.
- an open incident older than `renew_s` (a day) that a new alert (or one firing again) comes to is
  closed as *superseded* and a new one opens, linking it: nobody watches a thread a week old.
  Alertmanager's repeats of what has been firing all along stay in the old thread.
- `stale(...)`: an open incident Alertmanager has said nothing of (`heard_at`) for `stale_s`
  closes as *stale* (a resolve lost to a silence, a restart or a renamed rule).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec
from msgspec.structs import replace

from handlers.alert_payload import Alert
from handlers.alert_subjects import Subject
from handlers.buttons import when
from handlers.escape import escape

OUTBOX_MAX = 100  # lines kept for a thread Slack is refusing; beyond, the oldest are counted, not kept

# Per-alert decisions (the `decision` label of gpubot_alerts_total).
OPENED = "opened"
NEW_ALERT = "new_alert"
REPEAT = "repeat"
REFIRED = "refired"
DUPLICATE = "duplicate"
RESOLVED = "resolved"
NO_INCIDENT = "no_incident"  # resolved, but no open incident has it
UNKNOWN_SUBJECT = "unknown_subject"
TRUNCATED = "truncated"  # left out of the notification by Alertmanager (`truncatedAlerts`)
# A gateway's (bot/cluster/alert_forward.py): queued for its cluster's agent, or no cluster to go to.
FORWARDED = "forwarded"
UNKNOWN_CLUSTER = "unknown_cluster"
# A firing whose resolve (same fingerprint and startsAt) came first: remembered, it opens nothing.
LATE_FIRING = "late_firing"
DECISIONS = (
    OPENED,
    NEW_ALERT,
    REPEAT,
    REFIRED,
    DUPLICATE,
    RESOLVED,
    NO_INCIDENT,
    UNKNOWN_SUBJECT,
    TRUNCATED,
    FORWARDED,
    UNKNOWN_CLUSTER,
    LATE_FIRING,
)

# How an incident closed (the root says which).
CLOSED_RESOLVED = "resolved"
CLOSED_STALE = "stale"
CLOSED_SUPERSEDED = "superseded"
DAY_S = 86400.0
HEARD_EVERY_S = 60.0  # how precisely an incident's last word from Alertmanager is kept


class Policy(msgspec.Struct, frozen=True):
    rewalk_s: float
    duplicate_s: float
    renew_s: float = DAY_S  # an open incident older than this gets a new root for new alerts


class AlertState(msgspec.Struct):
    name: str
    status: str
    summary: str
    severity: str
    line_at: float  # when a line about it was last written (the duplicate window runs from here)


class Incident(msgspec.Struct):
    id: str
    subject: Subject
    opened_at: float
    alerts: dict[str, AlertState]
    kind: str = "thread"  # or "summary": past the storm threshold, a line in the hour's summary
    summary_hour: int | None = None
    closed_at: float | None = None
    root: dict[str, str] | None = None  # {"channel", "ts"} once posted
    version: int = 1  # bumped by every change the root shows
    shown: int = 0  # the version Slack shows
    outbox: list[dict[str, Any]] = msgspec.field(default_factory=list)  # [{"n", "text"}], oldest first
    lines: int = 0  # lines ever queued (their numbers)
    dropped: int = 0  # lines that did not fit the outbox
    walk_due: bool = True
    walk_id: str | None = None
    walked_at: float | None = None
    verdict: dict[str, Any] | None = None
    verdict_walk: str | None = None  # the walk the verdict is from: walk_id differs while one runs
    heard_at: float | None = None  # when Alertmanager last said anything of it (stale past this)
    closed_as: str | None = None  # CLOSED_RESOLVED, CLOSED_STALE or CLOSED_SUPERSEDED
    previous: dict[str, str] | None = None  # the superseded incident: {"id", "channel", "ts"}
    next_id: str | None = None  # a superseded incident's successor

    @property
    def open(self) -> bool:
        return self.closed_at is None

    @property
    def names(self) -> list[str]:
        """Alert names in the order they joined, each once."""
        return list(dict.fromkeys(a.name for a in self.alerts.values()))

    @property
    def firing_names(self) -> list[str]:
        return list(dict.fromkeys(a.name for a in self.alerts.values() if a.status == "firing"))

    def needs_slack(self) -> bool:
        """A thread incident Slack does not show as stored (storm incidents live in the summary)."""
        return (
            self.root is None
            or bool(self.outbox)
            or self.shown != self.version
            or (self.walk_due and self.open)
        )

    def queue_line(self, text: str) -> None:
        self.lines += 1
        self.outbox.append({"n": self.lines, "text": text})
        if len(self.outbox) > OUTBOX_MAX:
            self.outbox.pop(0)
            self.dropped += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "subject": self.subject.to_dict(),
            "opened_at": self.opened_at,
            "alerts": {fp: msgspec.structs.asdict(a) for fp, a in self.alerts.items()},
            "kind": self.kind,
            "summary_hour": self.summary_hour,
            "closed_at": self.closed_at,
            "root": self.root,
            "version": self.version,
            "shown": self.shown,
            "outbox": self.outbox,
            "lines": self.lines,
            "dropped": self.dropped,
            "walk_due": self.walk_due,
            "walk_id": self.walk_id,
            "walked_at": self.walked_at,
            "verdict": self.verdict,
            "verdict_walk": self.verdict_walk,
            "heard_at": self.heard_at,
            "closed_as": self.closed_as,
            "previous": self.previous,
            "next_id": self.next_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Incident:
        return cls(
            id=d["id"],
            subject=Subject.from_dict(d["subject"]),
            opened_at=float(d["opened_at"]),
            alerts={fp: AlertState(**a) for fp, a in d["alerts"].items()},
            kind=d.get("kind", "thread"),
            summary_hour=d.get("summary_hour"),
            closed_at=d.get("closed_at"),
            root=d.get("root"),
            version=int(d.get("version", 1)),
            shown=int(d.get("shown", 0)),
            outbox=list(d.get("outbox") or []),
            lines=int(d.get("lines", 0)),
            dropped=int(d.get("dropped", 0)),
            walk_due=bool(d.get("walk_due", False)),
            walk_id=d.get("walk_id"),
            walked_at=d.get("walked_at"),
            verdict=d.get("verdict"),
            verdict_walk=d.get("verdict_walk"),
            heard_at=d.get("heard_at"),
            closed_as=d.get("closed_as"),
            previous=d.get("previous"),
            next_id=d.get("next_id"),
        )

    @property
    def last_heard(self) -> float:
        return self.opened_at if self.heard_at is None else self.heard_at


class Change(msgspec.Struct, frozen=True):
    incident: Incident | None  # what to store (None: nothing changed)
    decisions: tuple[str, ...]  # one per alert
    opened: bool = False
    closed: bool = False
    rewalk: bool = False
    shown_changed: bool = False  # the root (or the storm summary's row) shows something new
    replaced: Incident | None = None  # an open incident this one superseded (closed, to be stored apart)


def _state(alert: Alert, now: float) -> AlertState:
    summary = alert.annotations.get("summary") or alert.annotations.get("description") or ""
    return AlertState(alert.name, alert.status, summary[:500], alert.labels.get("severity", ""), now)


def _line(emoji: str, name: str, what: str, now: float) -> str:
    return f"{emoji} `{escape(name)}` {what} · {when(now)}"


# What a thread line says of an event (the decision of its alerts).
_SAID = {
    NEW_ALERT: (":rotating_light:", "is firing too"),
    REFIRED: (":rotating_light:", "is firing again"),
    REPEAT: (":repeat:", "still firing (Alertmanager repeat)"),
    RESOLVED: (":white_check_mark:", "resolved"),
}
WHICH_MAX = 16  # GPU indices listed on one line; a longer list ends in "…"


def ended(alerts: Iterable[Alert], opened_at: float, now: float) -> float:
    """When these resolved alerts ended: the latest `endsAt` that lies between opening and now, else now."""
    times = []
    for a in alerts:
        try:
            times.append(datetime.fromisoformat(a.ends_at).timestamp())
        except (ValueError, OverflowError, OSError):
            continue
    last = max(times, default=now)
    return last if opened_at <= last <= now else now


def _gpu(alert: Alert) -> str:
    """The GPU an alert names as dcgm-exporter does: `gpu`, and its MIG instance (`GPU_I_ID`) if any."""
    gpu, mig = alert.labels.get("gpu", "").strip()[:8], alert.labels.get("GPU_I_ID", "").strip()[:8]
    return f"{gpu} (MIG {mig})" if gpu and mig else gpu


def _which(alerts: list[Alert]) -> str:
    """Which alerts of one name a line is about: the GPUs when dcgm-exporter says, else how many."""
    gpus = [_gpu(a) for a in alerts]
    named = list(dict.fromkeys(gpus))
    listed = ", ".join(escape(g) for g in named[:WHICH_MAX]) + (", …" if len(named) > WHICH_MAX else "")
    if len(alerts) == 1:
        return f" · GPU {listed}" if gpus[0] else ""
    count = f" · {len(alerts)} alerts"
    return f"{count}: GPU {listed}" if all(gpus) else count


def new_incident_id() -> str:
    return "inc-" + uuid.uuid4().hex[:12]


def apply(
    current: Incident | None, subject: Subject, alerts: Iterable[Alert], now: float, policy: Policy
) -> Change:
    """How these alerts (all about `subject`) change its incident."""
    alerts = list(alerts)
    replaced: Incident | None = None
    old = current is not None and current.open and now - current.opened_at >= policy.renew_s
    if old and current is not None and any(_news(current, a) for a in alerts):
        replaced = supersede(current, now)
        current = None
    if current is None or not current.open:
        firing = [a for a in alerts if a.firing]
        if not firing:
            return Change(None, tuple(NO_INCIDENT for _ in alerts))
        inc = Incident(new_incident_id(), subject, now, {a.fingerprint: _state(a, now) for a in firing})
        inc.heard_at = now
        if replaced is not None:
            replaced.next_id = inc.id
            inc.previous = {"id": replaced.id, **(replaced.root or {})}
        return Change(
            inc, tuple(OPENED if a.firing else NO_INCIDENT for a in alerts), opened=True, replaced=replaced
        )
    inc = replace(current, alerts=dict(current.alerts), outbox=list(current.outbox))
    if now - current.last_heard >= HEARD_EVERY_S:
        inc.heard_at = now  # to the minute: a stale time is hours, and duplicates stay writes-free
    decisions: list[str] = []
    events: dict[tuple[str, str], list[Alert]] = {}  # (decision, alert name) → its alerts, in order
    shown_change = False
    wants_walk = False
    for a in alerts:
        st = inc.alerts.get(a.fingerprint)
        if st is None:
            if not a.firing:
                decisions.append(NO_INCIDENT)
                continue
            inc.alerts[a.fingerprint] = _state(a, now)
            decisions.append(NEW_ALERT)
            shown_change = wants_walk = True
        elif a.firing:
            if st.status != "firing":
                st.status, st.line_at = "firing", now
                decisions.append(REFIRED)
                shown_change = wants_walk = True
            elif now - st.line_at < policy.duplicate_s:
                decisions.append(DUPLICATE)
                continue
            else:
                st.line_at = now
                decisions.append(REPEAT)
                wants_walk = True
        elif st.status == "firing":
            st.status, st.line_at = "resolved", now
            decisions.append(RESOLVED)
            shown_change = True
        else:
            decisions.append(DUPLICATE)
            continue
        events.setdefault((decisions[-1], a.name), []).append(a)
    news = any(decision != REPEAT for decision, _name in events)
    for (decision, name), group in events.items():
        if decision == REPEAT and news:
            continue
        emoji, what = _SAID[decision]
        at = ended(group, inc.opened_at, now) if decision == RESOLVED else now
        inc.queue_line(_line(emoji, name, what + _which(group), at))
    closed = all(s.status == "resolved" for s in inc.alerts.values())
    if closed:
        inc.closed_at = ended((a for a in alerts if not a.firing), inc.opened_at, now)
        inc.closed_as = CLOSED_RESOLVED
    rewalk = (
        wants_walk
        and not closed
        and not inc.walk_due
        and inc.walked_at is not None
        and now - inc.walked_at >= policy.rewalk_s
    )
    if rewalk:
        inc.walk_due = True
    if shown_change or closed:
        inc.version += 1
    if inc.kind == "summary":
        inc.outbox.clear()  # no thread to write to: the hour's summary shows names and resolution only
    changed = inc.to_dict() != current.to_dict()
    return Change(
        inc if changed else None, tuple(decisions), closed=closed, rewalk=rewalk, shown_changed=shown_change
    )


def _news(current: Incident, alert: Alert) -> bool:
    """A firing that is not the incident's own still firing: a new alert, or one firing again (a
    repeat of what has been firing all along stays in the thread that has followed it)."""
    st = current.alerts.get(alert.fingerprint)
    return alert.firing and (st is None or st.status != "firing")


def supersede(current: Incident, now: float) -> Incident:
    """The open incident a new root replaces (it is more than a day old): closed, the root says so."""
    old = replace(current, alerts=dict(current.alerts), outbox=list(current.outbox))
    old.closed_at, old.closed_as, old.walk_due = now, CLOSED_SUPERSEDED, False
    old.version += 1
    old.queue_line(f":arrow_right: new alerts on this subject go to a new thread · {when(now)}")
    return old


def stale(current: Incident, now: float, stale_s: float) -> Incident | None:
    """The incident closed as stale when Alertmanager has said nothing of it for `stale_s`, else None."""
    if not current.open or now - current.last_heard < stale_s:
        return None
    inc = replace(current, alerts=dict(current.alerts), outbox=list(current.outbox))
    inc.closed_at, inc.closed_as, inc.walk_due = now, CLOSED_STALE, False
    inc.version += 1
    hours = (now - current.last_heard) / 3600
    inc.queue_line(
        f":hourglass: Alertmanager has said nothing of this incident for {hours:.1f} h "
        f"(GPUBOT_ALERT_STALE_HOURS): closed as stale · {when(now)}"
    )
    if inc.kind == "summary":
        inc.outbox.clear()
    return inc
