"""Bringing Slack in line with the stored incidents: `sync(key)` posts what an incident says.

The root in GPUBOT_ALERT_CHANNEL, the queued lines in its thread, the root
again when it changed, and the walk (the same WalkService as `/gpu why`, in
the thread: the walk's own root and one message per layer with its buttons).
A key names a subject's current incident, a replaced one (`was:<id>`: its
root is still recorded and brought to say how it ended), an hour's storm
summary, the note on alerts Alertmanager left out, or a due stale sweep.
Nothing here ever cordons. A replica that dies midway leaves the work in the
store: the next webhook about that subject (or the sweep) finds it there.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from typing import Any

from handlers.alert_blocks import incident_root, verdict_of
from handlers.alert_notes import tell_left_out
from handlers.alert_payload import AlertBatch
from handlers.alert_records import ARCHIVE, IncidentRecords
from handlers.alert_storm import STORM
from handlers.incidents import Incident
from handlers.ports import LockNotAcquired, PostRef, StateUnavailable
from handlers.walkstate import WalkGone, new_walk_id

log = logging.getLogger("gpubot.alerts")

LEFT_OUT = "left-out:"  # the sync key of the note on alerts Alertmanager left out: left-out:<count>
SWEEP = "sweep"  # the sync key of a stale sweep that is due


class SlackSync(IncidentRecords, ABC):
    """The Slack side of an alert service (handlers/alerts.py adds the webhook's side)."""

    @abstractmethod
    def sweep_and_catch_up(self) -> None:
        """Close what went stale and bring Slack in line with it (handlers/alerts.py)."""

    @abstractmethod
    def _post_summary(self, hour: int) -> None:
        """Post or update the hour's storm summary (handlers/alerts.py, through its StormSummaries)."""

    def catch_up(self, key: str) -> None:
        """`sync`, with a failure counted and logged (the next webhook about the subject retries it)."""
        try:
            self.sync(key)
        except Exception as err:
            self.observer.incident("slack_failed")
            log.error("incident of %s: Slack not brought up to date: %s", key, err)

    def sync(self, key: str) -> None:
        """Post what the incident of `key` says and Slack does not show yet; run its walk when due."""
        if key == SWEEP:
            self.sweep_and_catch_up()
            return
        lock = key
        if key.startswith(ARCHIVE):
            # The same lock as its subject's: a root post in flight for it before it was replaced
            # finishes first, and is found here rather than posted twice.
            archived = self._load(key)
            if archived is None:
                return
            lock = archived.subject.key
        try:
            with self.state.lock(f"{self.prefix}slack:{lock}", 15 * 60, wait_s=60.0):
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

    @abstractmethod
    def _subject_keys(self, batch: AlertBatch) -> set[str]:
        """The subjects the batch's alerts are about now (handlers/alerts.py)."""

    def finish_walks(self, batch: AlertBatch) -> None:
        """After a takeover (an agent died handling this batch): finish the walks it began for the
        batch's incidents and show their verdicts. Layers posted stand; nothing is posted twice."""
        for key in sorted(self._subject_keys(batch)):
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


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}
