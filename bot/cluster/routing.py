"""Which cluster a request goes to, and what the asker is told about it.

A command names its cluster (`CLUSTER/NS/POD`, `--cluster C`) or, with one
registered cluster, may leave it out. A missing or unknown cluster with
several registered gets the list. A cluster whose agents have not
heartbeated for `silent_s` still gets the request queued (it runs when an
agent is back), and the asker is told at once how long it has been.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.cluster.streams import ClusterSeen
from handlers.escape import escape


class NoRoute(Exception):
    """The request names no cluster it can go to; the message lists the clusters (Slack mrkdwn)."""


@dataclass(frozen=True)
class Route:
    cluster: str
    silent_for_s: float | None  # set when the cluster's agents are silent

    def note(self) -> str | None:
        if self.silent_for_s is None:
            return None
        return (
            f":warning: cluster `{escape(self.cluster)}`'s agent was last seen {ago(self.silent_for_s)} ago: "
            "the request is queued and runs as soon as an agent of that cluster is back."
        )


def ago(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "an unknown time"
    s = int(seconds)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h"
    return f"{s // 86400} days"


def clusters_text(seen: dict[str, ClusterSeen], now: float, silent_s: float) -> str:
    """`/gpu clusters`: each cluster, its agents' version and last heartbeat."""
    if not seen:
        return (
            "No cluster has registered yet: start `gpubot serve --role agent` with GPUBOT_CLUSTER_NAME in "
            "each cluster, pointed at this gateway's Redis."
        )
    lines = [f"*Clusters* ({len(seen)})"]
    for name, info in sorted(seen.items()):
        silent = info.silent_for(now)
        state = f":warning: silent for {ago(silent)}" if silent > silent_s else f"last seen {ago(silent)} ago"
        lines.append(f"• `{escape(name)}` · gpubot {escape(info.version)} · {state}")
    return "\n".join(lines)


def route(asked: str | None, seen: dict[str, ClusterSeen], now: float, silent_s: float) -> Route:
    if asked is None:
        if len(seen) == 1:
            asked = next(iter(seen))
        elif not seen:
            raise NoRoute(clusters_text(seen, now, silent_s))
        else:
            raise NoRoute(
                "This bot serves several clusters: name one, as `/gpu why <cluster>/<namespace>/<pod>` or "
                "`--cluster <cluster>`.\n" + clusters_text(seen, now, silent_s)
            )
    elif asked not in seen:
        raise NoRoute(
            f":warning: no cluster `{escape(asked)}` is registered.\n" + clusters_text(seen, now, silent_s)
        )
    silent = seen[asked].silent_for(now)
    return Route(asked, silent if silent > silent_s else None)
