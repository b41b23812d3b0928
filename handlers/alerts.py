"""Alertmanager's alerts → incident threads: record in the state store first, then bring Slack in line.

`receive(batch)` is the webhook's work and all of it touches only the state
store: each alert is mapped to its subject (an alert of an open incident
keeps that incident's subject, so a pod deleted before its alert resolves
still closes the pod's incident; a new incident maps the labels afresh, so a
guess made while the cluster could not be read, or a node address since
reused, does not outlive its incident), the alerts of one subject change its incident under a
per-subject lock (handlers/incidents.py says how), and a new incident passes
the storm gate. It returns the incidents whose Slack side is behind; a store
that fails raises StateUnavailable before or without anything being posted,
so the webhook answers 503 and Alertmanager sends again.

`sync(key)` then posts what the incident says: the root in
GPUBOT_ALERT_CHANNEL, the queued lines in its thread, the root again when it
changed, and the walk (the same WalkService as `/gpu why`, in the thread:
the walk's own root and one message per layer with its buttons). Storm
incidents go into the hour's summary message instead, each subject with a
Diagnose button (a prepared walk, the digest's `digest_diagnose` action),
and nothing here ever cordons. A replica that dies between the two leaves
the work in the store: the next webhook about that subject finds it there.
`receive` followed by `sync` is all a queue consumer needs too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from handlers.alert_blocks import SummaryRow, incident_root, storm_summary, verdict_of
from handlers.alert_notes import tell_left_out
from handlers.alert_payload import Alert, AlertBatch
from handlers.alert_subjects import Directory, Subject, subject_of
from handlers.incidents import TRUNCATED, UNKNOWN_SUBJECT, Change, Incident, Policy, apply
from handlers.ports import (
    AlertObserver,
    LockNotAcquired,
    NoAlertObserver,
    PostRef,
    StateStore,
    StateUnavailable,
)
from handlers.walks import WalkService
from handlers.walkstate import WalkGone, new_walk_id

log = logging.getLogger("gpubot.alerts")

HOUR_S = 3600
# An incident nobody resolves is forgotten after this (Alertmanager resends firing).
INCIDENT_TTL_S = 30 * 86400
# A storm's summary lists incidents that may resolve days later: it is kept as long as they are,
# so their rows change in place instead of a new summary appearing about a storm long over.
SUMMARY_TTL_S = INCIDENT_TTL_S
STORM = "storm:"  # the sync key of an hour's summary: storm:<unix hour>
LEFT_OUT = "left-out:"  # the sync key of the note on alerts Alertmanager left out: left-out:<count>
LOCK_S = 30.0  # a subject's record is held for milliseconds; the Slack work for seconds


@dataclass(frozen=True)
class AlertSettings:
    channel: str
    rewalk_s: float = 30 * 60
    max_threads_per_hour: int = 10
    duplicate_s: float = 60.0


class AlertService:
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
    ) -> None:
        self.state = state
        # Many clusters share one Redis: a cluster's agent keeps its incidents, fingerprints, storm
        # window and summaries under its own prefix (node gpu-7 of two clusters: two incidents).
        # The single process keeps the unprefixed keys it always had.
        self.prefix = f"alert:{cluster}:" if cluster else "alert:"
        self.walks = walks
        self.poster = walks.poster
        self.directory = directory
        self.settings = settings
        self.policy = Policy(rewalk_s=settings.rewalk_s, duplicate_s=settings.duplicate_s)
        self.clock = clock
        self.observer: AlertObserver = observer or NoAlertObserver()

    # --- keys -------------------------------------------------------------------------------

    def _incident_key(self, subject_key: str) -> str:
        return f"{self.prefix}incident:{subject_key}"

    def _fingerprint_key(self, fp: str) -> str:
        return f"{self.prefix}fp:{fp}"

    def _summary_key(self, hour: int) -> str:
        return f"{self.prefix}summary:{hour}"

    # --- the webhook's part: the store only -------------------------------------------------

    def receive(self, batch: AlertBatch) -> list[str]:
        """Record the batch; the subject keys whose incident Slack must catch up with (for `sync`)."""
        if not self.state.ping():
            raise StateUnavailable("the state store did not answer PING")
        by_subject: dict[str, tuple[Subject, list[Alert]]] = {}  # by subject key, in arrival order
        loaded: dict[str, Incident | None] = {}  # the incidents known fingerprints point at
        for alert in batch.alerts:
            subject = self._subject(alert, loaded)
            if subject is None:
                self.observer.alert(alert.status, UNKNOWN_SUBJECT)
                continue
            by_subject.setdefault(subject.key, (subject, []))[1].append(alert)
        behind: dict[str, None] = {}
        if batch.truncated:
            for _ in range(batch.truncated):
                self.observer.alert(batch.status, TRUNCATED)
            behind[f"{LEFT_OUT}{batch.truncated}"] = None
        for subject, alerts in by_subject.values():
            change, key = self._record(subject, alerts)
            for alert, decision in zip(alerts, change.decisions, strict=True):
                self.observer.alert(alert.status, decision)
            if key is not None:
                behind[key] = None
        return list(behind)

    def _subject(self, alert: Alert, loaded: dict[str, Incident | None] | None = None) -> Subject | None:
        """The subject of the open incident holding this alert, else what its labels name now."""
        known = self.state.get(self._fingerprint_key(alert.fingerprint))
        if known is not None:
            subject = Subject.from_dict(known)
            loaded = {} if loaded is None else loaded
            if subject.key not in loaded:
                loaded[subject.key] = self._load(subject.key)
            inc = loaded[subject.key]
            if inc is not None and inc.open and alert.fingerprint in inc.alerts:
                return subject
        return subject_of(alert.labels, self.directory)

    def _load(self, key: str) -> Incident | None:
        raw = self.state.get(self._incident_key(key))
        return None if raw is None else Incident.from_dict(raw)

    def _store(self, inc: Incident) -> None:
        self.state.set(self._incident_key(inc.subject.key), inc.to_dict(), INCIDENT_TTL_S)

    def _record(self, subject: Subject, alerts: list[Alert]) -> tuple[Change, str | None]:
        """Apply the alerts to the subject's incident; (the change, the sync key when Slack is behind)."""
        now = self.clock()
        key: str | None = None
        try:
            with self.state.lock(f"{self.prefix}{subject.key}", LOCK_S, wait_s=10.0):
                before = self._load(subject.key)
                change = apply(before, subject, alerts, now, self.policy)
                inc = change.incident
                if inc is None:
                    # Nothing new, but a replica that died before Slack caught up left work behind.
                    stale = before is not None and before.kind == "thread" and before.needs_slack()
                    return change, subject.key if stale else None
                if change.opened:
                    self._gate(inc, now)
                known = set(before.alerts) if before is not None and before.open else set()
                for fp in set(inc.alerts) - known:
                    self.state.set(self._fingerprint_key(fp), subject.to_dict(), INCIDENT_TTL_S)
                if inc.kind == "summary":
                    if change.opened or change.closed or change.shown_changed:
                        key = self._summary_row(inc)
                elif inc.needs_slack():
                    key = subject.key
                self._store(inc)
        except LockNotAcquired as err:  # the store answers but a holder is stuck: Alertmanager retries
            raise StateUnavailable(str(err)) from None
        if change.opened:
            self.observer.incident("thread_opened" if inc.kind == "thread" else "summarized")
        if change.closed:
            self.observer.incident("closed")
        if change.rewalk:
            self.observer.incident("rewalk")
        return change, key

    def _gate(self, inc: Incident, now: float) -> None:
        """Storm control: a thread while fewer than the maximum opened in the last 60 minutes."""
        with self.state.lock(f"{self.prefix}storm", LOCK_S, wait_s=10.0):
            opened = [t for t in (self.state.get(f"{self.prefix}threads") or []) if now - t < HOUR_S]
            if len(opened) < self.settings.max_threads_per_hour:
                self.state.set(f"{self.prefix}threads", [*opened, now], HOUR_S)
                return
        inc.kind = "summary"
        inc.summary_hour = int(now // HOUR_S)
        inc.walk_due = False  # a storm walks nothing by itself: its Diagnose buttons do

    def _update(self, key: str, incident_id: str, change: Callable[[Incident], None]) -> Incident | None:
        """Change the stored incident (unless another one has replaced it meanwhile)."""
        with self.state.lock(f"{self.prefix}{key}", LOCK_S, wait_s=10.0):
            inc = self._load(key)
            if inc is None or inc.id != incident_id:
                return None
            change(inc)
            self._store(inc)
            return inc

    # --- Slack's part --------------------------------------------------------------------------

    def catch_up(self, key: str) -> None:
        """`sync`, with a failure counted and logged (the next webhook about the subject retries it)."""
        try:
            self.sync(key)
        except Exception as err:
            self.observer.incident("slack_failed")
            log.error("incident of %s: Slack not brought up to date: %s", key, err)

    def sync(self, key: str) -> None:
        """Post what the incident of `key` says and Slack does not show yet; run its walk when due."""
        try:
            with self.state.lock(f"{self.prefix}slack:{key}", 15 * 60, wait_s=60.0):
                if key.startswith(STORM):
                    self._post_summary(int(key.removeprefix(STORM)))
                    return
                if key.startswith(LEFT_OUT):
                    tell_left_out(
                        self.state,
                        self.poster,
                        self.settings.channel,
                        int(key.removeprefix(LEFT_OUT)),
                        self.prefix,
                    )
                    return
                walk = self._catch_up(key)
        except LockNotAcquired as err:
            # The lock is a renewed lease (a dead holder's lapses within 30 s): a holder still at it
            # after the wait is alive. Raised, not dropped: a queue consumer leaves its entry pending.
            raise StateUnavailable(f"incident of {key}: {err}") from None
        if walk is not None:
            self._walk(key, *walk)

    def _catch_up(self, key: str) -> tuple[Incident, str] | None:
        inc = self._load(key)
        if inc is None:
            return None
        if inc.kind == "summary":
            return None
        if inc.root is None:
            msg = incident_root(inc, self.walks.cluster_name)
            # Keyed: an agent taking over a webhook whose agent died after this post finds it.
            ref = self.poster.post(self.settings.channel, msg.text, msg.blocks, key=f"{inc.id}:root")
            version = inc.version

            def rooted(i: Incident) -> None:
                i.root = {"channel": ref.channel, "ts": ref.ts}
                i.shown = version

            got = self._update(key, inc.id, rooted)
            if got is None:
                return None
            inc = got
        assert inc.root is not None
        root = PostRef(inc.root["channel"], inc.root["ts"])
        if inc.dropped:
            lost = inc.dropped
            note = (
                f":warning: {lost} earlier update(s) of this incident were not kept while Slack refused them"
            )
            self.poster.post(root.channel, note, [_context(note)], thread_ts=root.ts)
            inc = self._update(key, inc.id, lambda i: setattr(i, "dropped", max(0, i.dropped - lost))) or inc
        posted = []
        for line in inc.outbox:
            self.poster.post(
                root.channel,
                line["text"],
                [_context(line["text"])],
                thread_ts=root.ts,
                key=f"{inc.id}:line:{line['n']}",
            )
            posted.append(line["n"])
        if posted:
            done = set(posted)
            inc = (
                self._update(
                    key, inc.id, lambda i: setattr(i, "outbox", [x for x in i.outbox if x["n"] not in done])
                )
                or inc
            )
        if inc.shown != inc.version:
            msg = incident_root(inc, self.walks.cluster_name)
            self.poster.update(root, msg.text, msg.blocks)
            version = inc.version
            inc = self._update(key, inc.id, lambda i: setattr(i, "shown", max(i.shown, version))) or inc
        if not (inc.walk_due and inc.open):
            return None
        walk_id = new_walk_id()

        def taken(i: Incident) -> None:
            i.walk_due, i.walk_id, i.walked_at = False, walk_id, self.clock()

        inc = self._update(key, inc.id, taken) or inc
        return inc, walk_id

    def _walk(self, key: str, inc: Incident, walk_id: str) -> None:
        """The walk `/gpu why` runs (a node walk for a node subject), in the incident's thread."""
        assert inc.root is not None
        walk = self.walks.start(
            inc.root["channel"], None, inc.subject.target, thread_ts=inc.root["ts"], walk_id=walk_id
        )
        if walk is None:
            verdict: dict[str, Any] = {
                "failed": f"no layer ran (walk {walk_id}): {inc.subject.label} could not be read"
            }
        else:
            verdict = verdict_of(self.walks.walk_result(walk).verdict)
        self._walked(key, inc.id, walk_id, verdict)

    def _walked(self, key: str, incident_id: str, walk_id: str, verdict: dict[str, Any]) -> None:
        def walked(i: Incident) -> None:
            i.verdict, i.verdict_walk = verdict, walk_id
            i.version += 1

        self._update(key, incident_id, walked)
        self.sync(key)

    def finish_walks(self, batch: AlertBatch) -> None:
        """After a takeover (an agent died handling this batch): finish the walks it began for the
        batch's incidents and show their verdicts. Layers posted stand; nothing is posted twice."""
        keys = {s.key for s in (self._subject(a) for a in batch.alerts) if s is not None}
        for key in sorted(keys):
            inc = self._load(key)
            if inc is None or inc.root is None or not inc.walk_id or inc.verdict_walk == inc.walk_id:
                continue
            try:
                walk = self.walks.load(inc.walk_id)
            except WalkGone:
                walk = None
            if walk is None or walk.root_ts is None:
                self._walk(key, inc, inc.walk_id)  # its root, if Slack has it, is found, not posted again
                continue
            log.info("incident of %s: finishing walk %s, begun by an agent that died", key, inc.walk_id)
            self.walks.resume(walk)
            self._walked(key, inc.id, inc.walk_id, verdict_of(self.walks.walk_result(walk).verdict))

    # --- the storm's summary ---------------------------------------------------------------------

    def _summary_row(self, inc: Incident) -> str:
        """Put the incident's row (names, resolved) into its hour's summary record; its sync key."""
        hour = inc.summary_hour if inc.summary_hour is not None else int(inc.opened_at // HOUR_S)
        skey = self._summary_key(hour)
        with self.state.lock(skey, LOCK_S, wait_s=10.0):
            rec: dict[str, Any] = self.state.get(skey) or {"ts": None, "version": 0, "shown": 0, "rows": {}}
            rows: dict[str, Any] = rec["rows"]
            row = rows.get(inc.id)
            if row is None:
                row = rows[inc.id] = {
                    "label": inc.subject.label,
                    "target": inc.subject.to_dict(),
                    "walk_id": new_walk_id(),
                    "order": len(rows),
                }
            row["names"], row["resolved"] = inc.names, not inc.open
            rec["version"] += 1
            self.state.set(skey, rec, SUMMARY_TTL_S)
        return f"{STORM}{hour}"

    def _post_summary(self, hour: int) -> None:
        """Post the hour's summary, or update it in place; queued syncs after the first find nothing to do."""
        skey = self._summary_key(hour)
        rec = self.state.get(skey)
        if rec is None or (rec["ts"] is not None and rec["shown"] == rec["version"]):
            return
        shown = sorted(rec["rows"].values(), key=lambda r: int(r["order"]))
        msg = storm_summary(
            [SummaryRow(r["label"], tuple(r["names"]), r["walk_id"], r["resolved"]) for r in shown],
            self.settings.max_threads_per_hour,
            hour * HOUR_S,
            self.walks.cluster_name,
        )
        channel, ts = self.settings.channel, rec["ts"]
        if ts is None:
            ref = self.poster.post(channel, msg.text, msg.blocks, key=f"{skey}:root")
            channel, ts = ref.channel, ref.ts
        else:
            channel = rec.get("channel") or channel
            self.poster.update(PostRef(channel, ts), msg.text, msg.blocks)
        # Each Diagnose button's walk, started by its first click in the summary's thread.
        for r in shown:
            if not r.get("prepared"):
                self.walks.prepare(r["walk_id"], Subject.from_dict(r["target"]).target, channel, ts)
        version = rec["version"]
        with self.state.lock(skey, LOCK_S, wait_s=10.0):
            now_rec = self.state.get(skey) or rec
            now_rec["channel"], now_rec["ts"] = channel, ts
            now_rec["shown"] = max(int(now_rec.get("shown", 0)), version)
            for wid in {r["walk_id"] for r in shown}:
                for row in now_rec["rows"].values():
                    if row["walk_id"] == wid:
                        row["prepared"] = True
            self.state.set(skey, now_rec, SUMMARY_TTL_S)


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}
