"""The gateway's POST /alertmanager: each alert to its cluster's agent, through the cluster's stream.

The gateway has no cluster to map subjects in, so it only routes. The route
(bot/slack/alert_webhook.py) checks the token and the payload as in the single
process; `receive` then splits the alerts by their `cluster` label (the label
Prometheus' `external_labels` usually add; with one registered cluster, an
alert without it goes there, as a command without a cluster does) and queues
one `alerts` request per cluster (bot/cluster/kinds.py) holding that
cluster's alerts. Its agent records them under its own keys and posts the
threads, so incidents and the storm window are per cluster.

An alert naming a cluster no agent has registered, or naming none while
several are registered, has nowhere to go: it is kept in
`gpubot:alerts:unrouted` with why, logged once per webhook, counted
(`decision="unknown_cluster"`), and said in GPUBOT_ALERT_CHANNEL at most once
an hour per cluster name. So is an alert for a cluster whose agents' heartbeat
lists the request kinds they take without `alerts` (a version from before
alerts): such an agent would acknowledge the request and drop it. Redis
failing answers 503 (Alertmanager sends again; agents take the repeat as a
duplicate delivery).

Alerts for a cluster whose agents have been silent past GPUBOT_AGENT_SILENT_SECONDS
are queued (they run when an agent is back) and, as for a command, that is
said at once: in the alert channel, at most once an hour per cluster.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

from bot.cluster.kinds import ALERTS, alerts_request
from bot.cluster.routing import ago
from bot.cluster.streams import ClusterSeen, ClusterStreams, StreamsUnavailable
from handlers.alert_notes import NOTE_EVERY_S, say_hourly, tell_left_out
from handlers.alert_payload import Alert, AlertBatch, alert_dict
from handlers.alerts import AlertSettings
from handlers.escape import escape
from handlers.incidents import FORWARDED, TRUNCATED, UNKNOWN_CLUSTER
from handlers.ports import AlertObserver, SlackPoster, StateStore, StateUnavailable

log = logging.getLogger("gpubot.gateway")

CLUSTER_LABEL = "cluster"
NO_LABEL = ""  # the unrouted group of alerts without a cluster label
UNKNOWN_NOTE = "alert:unknown-clusters-note"  # the hourly note on cluster names nobody serves
UNKNOWN_NAMES = "alert:unknown-clusters"  # the names seen since it was last said
NAMES_KEPT = 500
NAMES_SHOWN_MAX = 2000


class AlertForwarder:
    """The alert receiver of a gateway: `receive` queues, `catch_up` has nothing to catch up."""

    def __init__(
        self,
        streams: ClusterStreams,
        state: StateStore,
        poster: SlackPoster,
        settings: AlertSettings,
        version: str,
        observer: AlertObserver,
        submit: Callable[..., None],
        *,
        silent_s: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.streams = streams
        self.state = state
        self.poster = poster
        self.settings = settings
        self.version = version
        self.observer = observer
        self.submit = submit
        self.silent_s = silent_s
        self.clock = clock

    def receive(self, batch: AlertBatch) -> list[str]:
        """Queue each cluster's alerts; StateUnavailable (→ 503) when Redis fails."""
        try:
            known = self.streams.clusters()
            by_cluster, unrouted = self._split(batch, known)
            for cluster, alerts in by_cluster.items():
                payload = {
                    "version": "4",
                    "receiver": batch.receiver,
                    "groupKey": batch.group_key,
                    "externalURL": batch.external_url,
                    "alerts": [alert_dict(a) for a in alerts],
                }
                self.streams.queue(cluster, alerts_request(payload, self.settings, self.version))
            for named, alerts in unrouted.items():
                self.streams.keep_unrouted(self._unrouted_fields(batch, named, alerts, known))
        except StreamsUnavailable as err:
            raise StateUnavailable(str(err)) from None
        if batch.truncated:  # the gateway's to say: the alerts left out name no cluster
            self.observer.alert(batch.status, TRUNCATED, batch.truncated)
            self.submit(
                "note on alerts left out",
                tell_left_out,
                self.state,
                self.poster,
                self.settings.channel,
                batch.truncated,
                "alert:",
            )
        now = self.clock()
        for cluster, alerts in by_cluster.items():
            for a in alerts:
                self.observer.alert(a.status, FORWARDED)
            log.info("%d alert(s) queued for cluster %s", len(alerts), cluster)
            silent = known[cluster].silent_for(now)
            if silent > self.silent_s:
                self.submit(
                    f"note on alerts queued for silent {cluster!r}", self._silent, cluster, alerts, silent
                )
        unknown: dict[str, list[Alert]] = {}
        for named, alerts in unrouted.items():
            for a in alerts:
                self.observer.alert(a.status, UNKNOWN_CLUSTER)
            why = self._why(named, known)
            if named in known or len(unrouted) == 1:
                log.error("%d alert(s) kept in gpubot:alerts:unrouted: %s", len(alerts), why)
            if named in known:  # its agents are too old: said per cluster (there are few)
                self.submit(f"note on unrouted alerts of {named!r}", self._note, named, alerts, why, True)
            else:
                unknown[named] = alerts
        if len(unrouted) > 1:  # one line for the webhook, not one per cluster name
            log.error(
                "alerts for %d cluster names kept in gpubot:alerts:unrouted (none served by an agent)",
                len(unknown),
            )
        if unknown:  # 300 cluster names nobody serves: one note listing them, not 300
            self.submit("note on alerts for unknown clusters", self._note_unknown, unknown, sorted(known))
        return []

    def catch_up(self, key: str) -> None:
        """The agents bring Slack in line (receive never names a key)."""

    def _split(
        self, batch: AlertBatch, known: dict[str, ClusterSeen]
    ) -> tuple[dict[str, list[Alert]], dict[str, list[Alert]]]:
        """(alerts by the cluster they go to, alerts kept by the cluster name `_why` explains)."""
        routed: dict[str, list[Alert]] = {}
        unrouted: dict[str, list[Alert]] = {}
        only = next(iter(known)) if len(known) == 1 else None
        for alert in batch.alerts:
            named = alert.labels.get(CLUSTER_LABEL, NO_LABEL)
            target = named if named in known else only if named == NO_LABEL else None
            if target is not None and takes_alerts(known[target]):
                routed.setdefault(target, []).append(alert)
            else:
                unrouted.setdefault(target or named, []).append(alert)
        return routed, unrouted

    def _why(self, named: str, known: dict[str, ClusterSeen]) -> str:
        listed = ", ".join(f"`{escape(k)}`" for k in sorted(known)) or "none yet"
        if named in known:
            return (
                f"cluster `{escape(named)}`'s agent (gpubot {escape(known[named].version)}) does not take "
                f"alerts: upgrade it to the gateway's version (gpubot {escape(self.version)})"
            )
        if named == NO_LABEL:
            return f"the alert has no `{CLUSTER_LABEL}` label and several clusters are registered ({listed})"
        return f"no agent of cluster `{escape(named[:63])}` has registered (registered: {listed})"

    def _unrouted_fields(
        self, batch: AlertBatch, named: str, alerts: list[Alert], known: dict[str, ClusterSeen]
    ) -> dict[str, str]:
        return {
            "cluster": named[:63],
            "reason": self._why(named, known),
            "receiver": batch.receiver,
            "alerts": json.dumps([alert_dict(a) for a in alerts], separators=(",", ":")),
        }

    def _note(self, named: str, alerts: list[Alert], why: str, registered: bool) -> None:
        """Said in the alert channel once an hour per cluster name: nobody reads gateway logs daily."""
        fix = (
            ""
            if registered  # its agents are too old: `why` says to upgrade them
            else "; set the alert's `cluster` label (Prometheus `external_labels`) to a cluster whose agent runs"
        )
        text = (
            f":warning: {len(alerts)} alert(s) ({_names(alerts)}) went to no cluster: {why}. They are kept "
            f"in `gpubot:alerts:unrouted`{fix}. Said at most once an hour per cluster name."
        )
        say_hourly(self.state, self.poster, self.settings.channel, f"alert:unrouted-note:{named[:63]}", text)

    def _note_unknown(self, unknown: dict[str, list[Alert]], known: list[str]) -> None:
        """One note at most an hour for every cluster name nobody serves, listing the names (those
        that arrived while the last note was fresh are kept for the next one)."""
        with self.state.lock(UNKNOWN_NAMES, 10.0, wait_s=5.0):
            names = list(dict.fromkeys([*(self.state.get(UNKNOWN_NAMES) or []), *unknown]))[:NAMES_KEPT]
            self.state.set(UNKNOWN_NAMES, names, 2 * NOTE_EVERY_S)
        count = sum(len(a) for a in unknown.values())
        shown = ", ".join("(no `cluster` label)" if n == NO_LABEL else f"`{escape(n[:63])}`" for n in names)
        if len(shown) > NAMES_SHOWN_MAX:
            shown = shown[:NAMES_SHOWN_MAX].rsplit(", ", 1)[0] + ", …"
        listed = ", ".join(f"`{escape(k)}`" for k in known) or "none yet"
        text = (
            f":warning: {count} alert(s) went to no cluster: they name {len(names)} cluster(s) no agent "
            f"serves ({shown}; registered: {listed}). They are kept in `gpubot:alerts:unrouted`; set each "
            "alert's `cluster` label (Prometheus `external_labels`) to a cluster whose agent runs. Said at "
            "most once an hour for all such names."
        )
        if self.state.set_if_absent(UNKNOWN_NOTE, 1, NOTE_EVERY_S):
            self.state.delete(UNKNOWN_NAMES)
            self.poster.post(
                self.settings.channel, text, [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
            )

    def _silent(self, cluster: str, alerts: list[Alert], silent_s: float) -> None:
        """Said in the alert channel once an hour per cluster, as a command for it is answered at once."""
        text = (
            f":warning: cluster `{escape(cluster)}`'s agent was last seen {ago(silent_s)} ago: "
            f"{len(alerts)} alert(s) ({_names(alerts)}) are queued and open their threads as soon as an "
            "agent of that cluster is back. Said at most once an hour per cluster."
        )
        say_hourly(self.state, self.poster, self.settings.channel, f"alert:silent-note:{cluster[:63]}", text)


def takes_alerts(seen: ClusterSeen) -> bool:
    """Whether the cluster's agents run `alerts` requests; a heartbeat listing no kinds says nothing."""
    return not seen.kinds or ALERTS in seen.kinds


def _names(alerts: list[Alert]) -> str:
    return ", ".join(f"`{escape(n)}`" for n in dict.fromkeys(a.name for a in alerts))[:1500]
