"""What the alert channel is told besides incidents, at most once an hour: here, that Alertmanager
left alerts out (the gateway's notes on unrouted and queued alerts go through `say_hourly` too).

Alertmanager cuts a notification to `max_alerts` alerts when the receiver sets
it and says how many it left out (`truncatedAlerts`); those alerts name
subjects gpubot never sees, so they can open no thread. The single process and
a gateway (whose alerts left out name no cluster either) say it here, at most
once an hour, and count them (`decision="truncated"`).
"""

from __future__ import annotations

import logging

from handlers.ports import SlackPoster, StateStore

log = logging.getLogger("gpubot.alerts")
NOTE_EVERY_S = 3600


def say_hourly(state: StateStore, poster: SlackPoster, channel: str, key: str, text: str) -> None:
    """Post `text` in the alert channel unless `key` was said within the hour (the store decides, so
    replicas and gateways say it once between them)."""
    # Logged either way: a note that was not said again looks, in the channel alone, like one lost.
    if not state.set_if_absent(key, 1, NOTE_EVERY_S):
        log.info("note %s not said again: said within the hour", key)
        return
    poster.post(channel, text, [{"type": "section", "text": {"type": "mrkdwn", "text": text}}])
    log.info("note %s said in the alert channel", key)


def tell_left_out(state: StateStore, poster: SlackPoster, channel: str, count: int, prefix: str) -> None:
    """Say once an hour that Alertmanager left alerts out of its notifications: they open no thread."""
    text = (
        f":warning: Alertmanager left {count} alert(s) out of a notification to gpubot (`truncatedAlerts`: "
        "the group is larger than `max_alerts` on gpubot's receiver). Those alerts open no thread and "
        "their incidents close as stale if their resolve is left out too; raise `max_alerts` (within "
        "GPUBOT_ALERT_MAX_BODY_MIB, see docs/alerts.md) if groups this large are normal for you. Said at "
        "most once an hour."
    )
    say_hourly(state, poster, channel, f"{prefix}left-out-note", text)
