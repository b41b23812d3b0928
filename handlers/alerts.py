"""Alertmanager's alerts → incident threads: record in the state store first, then bring Slack in line.

`receive(batch)` is the webhook's work and all of it touches only the state
store (and the cluster, through a cached, batched directory): each alert is
mapped to its subject (an alert of an open incident keeps that incident's
subject, so a pod deleted before its alert resolves still closes the pod's
incident; a new incident maps the labels afresh, so a guess made while the
cluster could not be read, or a node address since reused, does not outlive
its incident), the alerts of one subject change its incident under a
per-subject lock (handlers/incidents.py says how), and a new incident passes
the storm gate. It returns the sync keys whose Slack side is behind; a store
that fails raises StateUnavailable before or without anything being posted,
so the webhook answers 503 and Alertmanager sends again. `sync(key)`
(handlers/alert_sync.py) then posts; `receive` followed by `sync` is all a
queue consumer needs too.

Incidents end (shared/spec/interfaces.md, "Incidents end"):
- a *resolved* of no open incident is remembered by fingerprint and startsAt
  for a day, so its firing arriving late opens nothing (`late_firing`);
- an incident a newer one replaces (it resolved and fired again, or it was
  open over a day and is superseded) is archived, not overwritten: its root
  is still recorded and updated to say how it ended;
- the stale sweep: at most once per `sweep_every_s` across every replica (a
  key in the state store decides, so it survives restarts), the open-incident
  index is walked and each incident Alertmanager has said nothing of for
  GPUBOT_ALERT_STALE_HOURS closes as stale under its subject's lock (so it
  closes once). It runs off the request path: from the bot's timer
  (bot/slack/alert_sweeper.py) and, for agents that have no timer of their
  own, as a sync key any webhook hands out when a sweep is due.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from handlers.alert_inbox import AlertInbox
from handlers.alert_payload import Alert, AlertBatch
from handlers.alert_records import EARLY_TTL_S, INCIDENT_TTL_S, INDEX_SHARDS, LOCK_S, AlertSettings
from handlers.alert_storm import HOUR_S, STORM, StormSummaries
from handlers.alert_subjects import Directory, Subject, subject_of
from handlers.alert_sync import LEFT_OUT, SWEEP, SlackSync
from handlers.incidents import (
    CLOSED_SUPERSEDED,
    LATE_FIRING,
    TRUNCATED,
    UNKNOWN_SUBJECT,
    Change,
    Incident,
    apply,
    stale,
)
from handlers.ports import AlertObserver, JSONValue, LockNotAcquired, StateStore, StateUnavailable
from handlers.walks import WalkService

__all__ = ["HOUR_S", "INCIDENT_TTL_S", "STORM", "AlertService", "AlertSettings"]

log = logging.getLogger("gpubot.alerts")

# A storm's summary lists incidents that may resolve days later: it is kept as long as they are,
# so their rows change in place instead of a new summary appearing about a storm long over.
SUMMARY_TTL_S = INCIDENT_TTL_S


class AlertService(SlackSync):
    def __init__(
        self,
        state: StateStore,
        walks: WalkService,
        directory: Directory,
        settings: AlertSettings,
        *,
        clock: Callable[[], float] = time.time,
        observer: AlertObserver | None = None,
        cluster: str | None = None,
        sweep_on_receive: bool = False,
    ) -> None:
        super().__init__(
            state,
            walks,
            directory,
            settings,
            clock=clock,
            observer=observer,
            cluster=cluster,
        )
        # An agent has no timer of its own (bot/slack/alert_sweeper.py runs in the single process):
        # its webhooks hand out the sweep when one is due.
        self.sweep_on_receive = sweep_on_receive
        # Large notifications, recorded off the request path; a dead replica's are taken over at
        # the sweep timer's next tick (the timings shrink with the stale time, for tests).
        every = self.sweep_every_s
        self.inbox = AlertInbox(self, claim_s=min(60.0, max(5.0, 4 * every)), orphan_s=min(60.0, every))
        self.storm = StormSummaries(
            self.state,
            walks,
            lambda: self.poster,
            self.prefix,
            settings.channel,
            settings.max_threads_per_hour,
            SUMMARY_TTL_S,
        )

    @property
    def sweep_every_s(self) -> float:
        """How often the stale sweep runs: an eighth of the stale time, within 1 s and 10 minutes."""
        return max(1.0, min(600.0, self.settings.stale_s / 8))

    # --- the webhook's part: the store only -------------------------------------------------

    def receive(self, batch: AlertBatch) -> list[str]:
        """Record the batch; the sync keys whose Slack side must catch up (for `sync`)."""
        if not self.state.ping():
            raise StateUnavailable("the state store did not answer PING")
        self._prefetch(batch)
        # Fingerprints looked up in one round trip: 10,000 alerts are not 10,000 serial GETs.
        fps = list(dict.fromkeys(a.fingerprint for a in batch.alerts))
        known = dict(zip(fps, self._get_many([self._fingerprint_key(fp) for fp in fps]), strict=True))
        mapped: list[tuple[Alert, Subject]] = []
        loaded: dict[str, Incident | None] = {}  # the incidents known fingerprints point at
        fresh: list[Alert] = []  # firing alerts no open incident holds: was their resolve first?
        for alert in batch.alerts:
            subject, held = self._mapped(alert, loaded, known.get(alert.fingerprint))
            if subject is None:
                self.observer.alert(alert.status, UNKNOWN_SUBJECT)
                continue
            mapped.append((alert, subject))
            if alert.firing and not held:
                fresh.append(alert)
        early = {
            _when(a)
            for a, seen in zip(
                fresh, self._get_many([self._early_key(*_when(a)) for a in fresh]), strict=True
            )
            if seen is not None
        }
        by_subject: dict[str, tuple[Subject, list[Alert]]] = {}  # by subject key, in arrival order
        for alert, subject in mapped:
            if alert.firing and _when(alert) in early:
                self.observer.alert(alert.status, LATE_FIRING)  # its resolve came first: it is over
                continue
            by_subject.setdefault(subject.key, (subject, []))[1].append(alert)
        behind: dict[str, None] = {}
        if batch.truncated:
            self.observer.alert(batch.status, TRUNCATED, batch.truncated)
            behind[f"{LEFT_OUT}{batch.truncated}"] = None
        remember: dict[str, JSONValue] = {}
        for subject, alerts in by_subject.values():
            change, keys = self._record(subject, alerts)
            for alert, decision in zip(alerts, change.decisions, strict=True):
                self.observer.alert(alert.status, decision)
                if decision == "no_incident":
                    remember[self._early_key(*_when(alert))] = 1
            behind.update(dict.fromkeys(keys))
        self._set_many(remember, EARLY_TTL_S)
        if self.sweep_on_receive and self.sweep_due():
            behind[SWEEP] = None
        return list(behind)

    def _prefetch(self, batch: AlertBatch) -> None:
        """Let the directory read the batch's pods in bulk (one list per namespace) before mapping."""
        prefetch = getattr(self.directory, "prefetch", None)
        if prefetch is not None and len(batch.alerts) > 1:
            prefetch([a.labels for a in batch.alerts])

    def _mapped(
        self, alert: Alert, loaded: dict[str, Incident | None], known: JSONValue | None
    ) -> tuple[Subject | None, bool]:
        """(The subject, whether an open incident holds the alert): the open incident's subject when
        one holds it (`known`: what its fingerprint's key says), else what its labels name now."""
        if known is not None:
            subject = Subject.from_dict(known)
            if subject.key not in loaded:
                loaded[subject.key] = self._load(subject.key)
            inc = loaded[subject.key]
            if inc is not None and inc.open and alert.fingerprint in inc.alerts:
                return subject, True
        return subject_of(alert.labels, self.directory), False

    def _subject_keys(self, batch: AlertBatch) -> set[str]:
        loaded: dict[str, Incident | None] = {}
        keys = []
        for a in batch.alerts:
            subject = self._mapped(a, loaded, self.state.get(self._fingerprint_key(a.fingerprint)))[0]
            if subject is not None:
                keys.append(subject.key)
        return set(keys)

    def _record(self, subject: Subject, alerts: list[Alert]) -> tuple[Change, list[str]]:
        """Apply the alerts to the subject's incident; (the change, the sync keys Slack is behind on)."""
        now = self.clock()
        keys: list[str] = []
        try:
            with self.state.lock(f"{self.prefix}{subject.key}", LOCK_S, wait_s=10.0):
                before = self._load(subject.key)
                change = apply(before, subject, alerts, now, self.policy)
                inc = change.incident
                if inc is None:
                    # Nothing new, but a replica that died before Slack caught up left work behind.
                    behind = before is not None and before.kind == "thread" and before.needs_slack()
                    return change, [subject.key] if behind else []
                if change.opened:
                    self._gate(inc, now)
                    keys += self._replace(change.replaced or before)
                known = (
                    set(before.alerts) if before is not None and before.open and not change.opened else set()
                )
                self._set_many(
                    {self._fingerprint_key(fp): subject.to_dict() for fp in sorted(set(inc.alerts) - known)},
                    INCIDENT_TTL_S,
                )
                if inc.kind == "summary":
                    if change.opened or change.closed or change.shown_changed:
                        keys.append(self.storm.row(inc))
                elif inc.needs_slack():
                    keys.append(subject.key)
                self._store(inc)
                if change.opened or (inc.open and before is not None and before.heard_at is None):
                    # Opened, or open since before this version kept the index: the sweep sees it.
                    self._index(subject.key, inc.id)
                elif change.closed:
                    self._index(subject.key, None)
        except LockNotAcquired as err:  # the store answers but a holder is stuck: Alertmanager retries
            raise StateUnavailable(str(err)) from None
        if change.opened:
            self.observer.incident("thread_opened" if inc.kind == "thread" else "summarized")
        if change.closed or change.replaced is not None:
            self.observer.incident("closed")
        if change.rewalk:
            self.observer.incident("rewalk")
        return change, keys

    def _replace(self, old: Incident | None) -> list[str]:
        """A new incident replaces the subject's record: keep the old one's (archived), and its sync
        key when Slack does not show how it ended yet (its root in flight, or never updated)."""
        if old is None:
            return []
        if old.kind == "summary":
            return [self.storm.row(old)] if old.closed_as == CLOSED_SUPERSEDED else []
        self._archive(old)
        return [f"was:{old.id}"] if old.needs_slack() else []

    def _gate(self, inc: Incident, now: float) -> None:
        """Storm control: a thread while fewer than the maximum opened in the channel in the last
        60 minutes, across clusters (handlers/alert_storm.py)."""
        if self.storm.admit_thread(now):
            return
        inc.kind = "summary"
        inc.summary_hour = int(now // HOUR_S)
        inc.walk_due = False  # a storm walks nothing by itself: its Diagnose buttons do

    def _post_summary(self, hour: int) -> None:
        self.storm.post(hour, self.walks.cluster_name)

    # --- incidents end: the stale sweep -----------------------------------------------------------

    def sweep_due(self) -> bool:
        """True for one caller per sweep period across every replica (and across restarts)."""
        every = self.sweep_every_s
        slot = int(self.clock() // every)
        return self.state.set_if_absent(f"{self.prefix}sweep:{slot}", 1, every * 2)

    def sweep(self) -> list[str]:
        """Close as stale every open incident Alertmanager has said nothing of for the stale time;
        the sync keys of those whose root must now say so."""
        now = self.clock()
        keys: list[str] = []
        for shard in range(INDEX_SHARDS):
            shard_key = f"{self.prefix}open:{shard}"
            gone: dict[str, str] = {}
            for subject_key, incident_id in dict(self.state.get(shard_key) or {}).items():
                with self.state.lock(f"{self.prefix}{subject_key}", LOCK_S, wait_s=10.0):
                    inc = self._load(subject_key)
                    if inc is None or inc.id != incident_id or not inc.open:
                        gone[subject_key] = incident_id
                        continue
                    closed = stale(inc, now, self.settings.stale_s)
                    if closed is None:
                        continue
                    self._store(closed)
                    gone[subject_key] = incident_id
                    keys.append(self.storm.row(closed) if closed.kind == "summary" else subject_key)
                self.observer.incident("stale")
                log.info("incident %s of %s closed as stale", incident_id, subject_key)
            if gone:
                self._unindex(shard_key, gone)
        return list(dict.fromkeys(keys))

    def sweep_and_catch_up(self) -> None:
        for key in self.sweep():
            self.catch_up(key)


def _when(alert: Alert) -> tuple[str, str]:
    """What identifies one firing of an alert: its fingerprint and when it started."""
    return alert.fingerprint, alert.starts_at
