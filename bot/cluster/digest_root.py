"""The many-cluster digest: one root message a day from the gateway, one part per cluster under it.

The gateway posts the root (exactly once a day across gateway replicas: the
same lock and per-day done key as the single process, bot/slack/scheduler.py), then
queues a `digest_part` request on every registered cluster's stream; one
agent of each cluster posts that cluster's digest in the root's thread, once
(bot/cluster/kinds.py). A cluster whose agents are silent when the root is
posted is named missing in the root at once; after GPUBOT_DIGEST_PART_WAIT_SECONDS
the root is updated with the parts that came and those still missing. A
silent cluster's part stays queued: it is posted late rather than lost.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

from bot.cluster.kinds import PART_KEY, digest_part_request
from bot.cluster.routing import ago
from bot.cluster.streams import ClusterSeen, ClusterStreams, StreamsUnavailable
from bot.ops.config import Config
from bot.slack.scheduler import Outcome, digest_day, digest_trigger, last_fire, run_digest_once
from handlers.escape import escape
from handlers.ports import PostFailed, PostRef, SlackPoster, StateStore, StateUnavailable

log = logging.getLogger("gpubot.digest")

ROOT_KEY = "digest:root:{}"


class DigestRoots:
    def __init__(
        self,
        cfg: Config,
        state: StateStore,
        streams: ClusterStreams,
        poster: SlackPoster,
        version: str = "",
        clock: Any = time.time,
    ) -> None:
        self.cfg = cfg
        self.state = state
        self.streams = streams
        self.poster = poster
        self.version = version
        self.clock = clock
        self._timers: list[threading.Timer] = []
        self._lock = threading.Lock()

    # --- the root ----------------------------------------------------------------------------

    def post_root(self, channel: str, run: str, day: str) -> PostRef:
        """Post the root, queue one part per cluster, and schedule the check for missing parts."""
        seen = self.streams.clusters()
        now = self.streams.now()  # heartbeats are in Redis's clock
        silent = {c: i for c, i in seen.items() if i.silent_for(now) > self.cfg.agent_silent_s}
        text, blocks = root_message(day, seen, silent, now)
        ref = self.poster.post(channel, text, blocks)
        names = sorted(seen)
        self.state.set(
            ROOT_KEY.format(run),
            {"channel": ref.channel, "ts": ref.ts, "day": day, "clusters": names},
            self.cfg.state_retention_days * 86400,
        )
        for name in names:
            self.streams.queue(name, digest_part_request(run, day, ref.channel, ref.ts, self.version))
        log.info("digest %s: root posted in %s (ts %s), parts queued for %s", run, channel, ref.ts, names)
        if names:
            timer = threading.Timer(self.cfg.digest_part_wait_s, self.check, (run, ref, day, seen))
            timer.daemon = True
            with self._lock:
                self._timers = [t for t in self._timers if t.is_alive()] + [timer]
            timer.start()
        return ref

    def check(self, run: str, ref: PostRef, day: str, seen: dict[str, ClusterSeen]) -> list[str]:
        """Update the root with the clusters whose part has not come; returns them."""
        try:
            missing = [c for c in sorted(seen) if self.state.get(PART_KEY.format(run, c)) is None]
        except StateUnavailable as err:
            log.error("digest %s: parts not checked: %s", run, err)
            return []
        text, blocks = root_message(day, seen, {}, self.clock(), missing=missing, checked=True)
        try:
            self.poster.update(ref, text, blocks)
        except PostFailed as err:
            log.error("digest %s: root not updated with the missing parts: %s", run, err.reason)
        if missing:
            log.warning("digest %s: no part from %s", run, ", ".join(missing))
        return missing

    def cancel(self) -> None:
        with self._lock:
            for t in self._timers:
                t.cancel()
            self._timers.clear()

    # --- on demand and daily ---------------------------------------------------------------------

    def post_now(self, channel: str, user: str | None, run: str) -> None:
        """`/gpu digest` at the gateway: a root now in this channel; what failed is told to the asker."""
        try:
            self.post_root(channel, run, digest_day(self.clock(), self.cfg.tz))
        except (PostFailed, StreamsUnavailable, StateUnavailable) as err:
            reason = err.reason if isinstance(err, PostFailed) else str(err)
            log.error("digest %s for %s in %s was not posted: %s", run, user, channel, reason)
            if user:
                try:
                    self.poster.ephemeral(
                        channel, user, f":x: the GPU fleet digest was not posted: {escape(reason)}"
                    )
                except PostFailed as again:
                    log.error("could not tell %s about the digest: %s", user, again.reason)

    def daily(self) -> Outcome:
        """The scheduled run: the root of the day of the latest fire time, once across gateways."""
        assert self.cfg.digest_channel is not None
        now = self.clock()
        trigger = digest_trigger(self.cfg.digest_hour, self.cfg.digest_minute, self.cfg.tz)
        fired = last_fire(trigger, datetime.fromtimestamp(now, tz=self.cfg.tz))
        day = digest_day(fired.timestamp() if fired else now, self.cfg.tz)
        channel = self.cfg.digest_channel
        try:
            outcome = run_digest_once(day, self.state, lambda: self.post_root(channel, day, day))
        except (PostFailed, StreamsUnavailable, StateUnavailable) as err:
            log.error("digest %s: root not posted: %s", day, err)
            return Outcome.FAILED
        log.info("digest %s: %s", day, outcome.value)
        return outcome


def root_message(
    day: str,
    seen: dict[str, ClusterSeen],
    silent: dict[str, ClusterSeen],
    now: float,
    *,
    missing: list[str] | None = None,
    checked: bool = False,
) -> tuple[str, list[dict[str, Any]]]:
    """The root: which clusters' parts follow in the thread, and which are missing."""
    title = f"GPU digest · {day}"
    head = f"{len(seen)} cluster(s): one part per cluster in this thread"
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        _context(head + ": " + ", ".join(f"`{escape(c)}`" for c in sorted(seen)) if seen else head),
    ]
    if not seen:
        blocks.append(_context(":grey_question: no cluster has registered: no agent has ever heartbeated."))
    gone = sorted(set(silent) | set(missing or ()))
    if gone:
        why = [
            f"`{escape(c)}` (agent last seen {ago(seen[c].silent_for(now))} ago)"
            if c in silent
            else f"`{escape(c)}`"
            for c in gone
        ]
        when = "no part came in time" if checked else "its agents are silent"
        blocks.append(_context(f":warning: missing: {', '.join(why)}: {when}"))
    elif checked:
        blocks.append(_context(f":white_check_mark: every cluster's part is in the thread ({len(seen)})"))
    text = f"{title}: {head}" + (f"; missing: {', '.join(gone)}" if gone else "")
    return text, blocks


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}
