"""The storm's hourly summary: one row per subject, kept in the state store, posted or updated in place.

Past GPUBOT_ALERT_MAX_THREADS_PER_HOUR threads in the last 60 minutes, new
incidents go into their hour's summary instead of a thread. A row is a
**subject**, not an incident: a node flapping 190 times in the hour is one
row saying "190 times", never 190 rows naming it. The row shows the alert
names it has fired with and whether its latest incident is over; each has a
Diagnose button (a prepared walk, the digest's `digest_diagnose` action).

The threads of the hour are counted per **channel**, across clusters (the
spec's "Slack's pace"): every cluster's agent posting into one alert channel
adds to one count (`alert-storm:<channel>:threads`), so N clusters cannot open
N times the maximum there. The summaries stay per cluster (each names its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from handlers.alert_blocks import SummaryRow, storm_summary
from handlers.alert_subjects import Subject
from handlers.incidents import Incident
from handlers.ports import PostRef, SlackPoster, StateStore
from handlers.walks import WalkService
from handlers.walkstate import new_walk_id

HOUR_S = 3600
LOCK_S = 30.0
STORM = "storm:"  # the sync key of an hour's summary: storm:<unix hour>
CHANNEL_COUNT = "alert-storm:{}"  # + ":threads": the hour's thread times in one channel, every cluster's


class StormSummaries:
    """The summary records of one alert service (its key prefix, its channel)."""

    def __init__(
        self,
        state: StateStore,
        walks: WalkService,
        poster: Callable[[], SlackPoster],
        prefix: str,
        channel: str,
        max_threads: int,
        ttl_s: float,
    ) -> None:
        self.state = state
        self.walks = walks
        self.poster = poster  # read at each post: tests and agents swap the poster of the walk service
        self.prefix = prefix
        self.channel = channel
        self.max_threads = max_threads
        self.ttl_s = ttl_s

    def key(self, hour: int) -> str:
        return f"{self.prefix}summary:{hour}"

    def admit_thread(self, now: float) -> bool:
        """True, and counted, while fewer than the maximum threads opened in this channel in the
        last 60 minutes, whichever cluster opened them; False: the incident goes into the summary."""
        count = CHANNEL_COUNT.format(self.channel.lstrip("#").lower())
        with self.state.lock(count, LOCK_S, wait_s=10.0):
            opened = [t for t in (self.state.get(f"{count}:threads") or []) if now - t < HOUR_S]
            if len(opened) >= self.max_threads:
                return False
            self.state.set(f"{count}:threads", [*opened, now], HOUR_S)
            return True

    def row(self, inc: Incident) -> str:
        """Put the incident's subject row (names, resolved) into its hour's summary record; its sync key."""
        hour = inc.summary_hour if inc.summary_hour is not None else int(inc.opened_at // HOUR_S)
        skey = self.key(hour)
        with self.state.lock(skey, LOCK_S, wait_s=10.0):
            rec: dict[str, Any] = self.state.get(skey) or {"ts": None, "version": 0, "shown": 0, "rows": {}}
            rows: dict[str, Any] = rec["rows"]
            sk = inc.subject.key
            row = rows.get(sk)
            if row is None:
                row = rows[sk] = {
                    "label": inc.subject.label,
                    "target": inc.subject.to_dict(),
                    "walk_id": new_walk_id(),
                    "order": len(rows),
                    "names": [],
                    "incidents": [],
                }
            if inc.id not in row.setdefault("incidents", []):
                row["incidents"].append(inc.id)
            row["names"] = list(dict.fromkeys([*row.get("names", []), *inc.names]))
            # The subject's latest incident says whether it is over: an older one resolving later
            # does not strike through a subject firing again.
            if row["incidents"][-1] == inc.id:
                row["resolved"] = not inc.open
            rec["version"] += 1
            self.state.set(skey, rec, self.ttl_s)
        return f"{STORM}{hour}"

    def post(self, hour: int, cluster_name: str | None) -> None:
        """Post the hour's summary, or update it in place; queued syncs after the first find nothing to do."""
        skey = self.key(hour)
        rec = self.state.get(skey)
        if rec is None or (rec["ts"] is not None and rec["shown"] == rec["version"]):
            return
        shown = sorted(rec["rows"].values(), key=lambda r: int(r["order"]))
        msg = storm_summary(
            [
                SummaryRow(
                    r["label"],
                    tuple(r["names"]),
                    r["walk_id"],
                    bool(r.get("resolved")),
                    len(r.get("incidents") or [1]),
                )
                for r in shown
            ],
            self.max_threads,
            hour * HOUR_S,
            cluster_name,
        )
        poster = self.poster()
        channel, ts = self.channel, rec["ts"]
        if ts is None:
            ref = poster.post(channel, msg.text, msg.blocks, key=f"{skey}:root")
            channel, ts = ref.channel, ref.ts
        else:
            channel = rec.get("channel") or channel
            poster.update(PostRef(channel, ts), msg.text, msg.blocks)
        # Each Diagnose button's walk, started by its first click in the summary's thread.
        for r in shown:
            if not r.get("prepared"):
                self.walks.prepare(r["walk_id"], Subject.from_dict(r["target"]).target, channel, ts)
        version = rec["version"]
        with self.state.lock(skey, LOCK_S, wait_s=10.0):
            now_rec = self.state.get(skey) or rec
            now_rec["channel"], now_rec["ts"] = channel, ts
            now_rec["shown"] = max(int(now_rec.get("shown", 0)), version)
            prepared = {r["walk_id"] for r in shown}
            for row in now_rec["rows"].values():
                if row["walk_id"] in prepared:
                    row["prepared"] = True
            self.state.set(skey, now_rec, self.ttl_s)
