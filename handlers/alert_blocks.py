"""Block Kit for alert incidents: the incident's root message and the storm's hourly summary.

Everything an alert carries (names, label values, annotations) is outside
text: escaped, so `<!channel>` in a summary annotation never pings anyone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from handlers.blocks import EMOJI, Message, _button, _context, _section
from handlers.buttons import when
from handlers.digest import DIAGNOSE
from handlers.escape import escape
from handlers.incidents import CLOSED_STALE, CLOSED_SUPERSEDED, Incident
from layers.findings import Finding

SUMMARY_ANNOTATION_MAX = 500
SUMMARY_ROWS_MAX = 40  # rows with a Diagnose button; Slack allows 50 blocks a message
REST_MAX = 2500


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"*{escape(n)}*" for n in names) or "*(no alert)*"


def verdict_of(finding: Finding | None) -> dict[str, Any]:
    """What the root shows of a walk: its verdict, or that every layer that ran was OK."""
    if finding is None:
        return {"ok": True}
    return {
        "layer": finding.layer,
        "code": finding.code,
        "severity": finding.severity.label,
        "summary": finding.summary,
    }


def incident_root(inc: Incident, cluster_name: str | None) -> Message:
    """The incident's root: the alerts, the subject, the cluster, then the walk's verdict."""
    name = inc.subject.name if inc.subject.kind == "node" else f"{inc.subject.namespace}/{inc.subject.name}"
    subject = f"{inc.subject.kind} `{escape(name)}`"
    where = f" · cluster `{escape(cluster_name)}`" if cluster_name else ""
    blocks: list[dict[str, Any]] = [_section(_head(inc, subject, where))]
    if inc.previous:
        blocks.append(_context(f"continues incident `{escape(inc.previous['id'])}`{_link(inc.previous)}"))
    summaries = list(dict.fromkeys(a.summary for a in inc.alerts.values() if a.summary))
    if summaries:
        text = "\n".join(f"> {escape(s[:SUMMARY_ANNOTATION_MAX])}" for s in summaries[:5])
        blocks.append(_section(text[:2900]))
    node = f" · node `{escape(inc.subject.node)}`" if inc.subject.kind == "pod" and inc.subject.node else ""
    blocks.append(
        _context(
            f"opened {when(inc.opened_at)} · {len(inc.alerts)} alert(s){node} · incident `{inc.id}`"
            " · the walk and every update are in the thread"
        )
    )
    v = inc.verdict
    if v is None:
        if inc.open:
            blocks.append(_context("walking the layers…"))
    elif v.get("failed"):
        blocks.append(_section(f":x: The walk could not run: {escape(str(v['failed']))} (see the thread)"))
    elif v.get("ok"):
        blocks.append(_section(":white_check_mark: Every layer that ran is OK."))
    else:
        emoji = next((e for sev, e in EMOJI.items() if sev.label == v.get("severity")), "")
        blocks.append(
            _section(
                f"*Verdict* (layer {v.get('layer')}): {emoji} `{escape(str(v.get('code')))}` {escape(str(v.get('summary')))}"
            )
        )
    state = "firing" if inc.open else (inc.closed_as or "resolved")
    text = f"gpubot alert ({state}): {', '.join(inc.names)} on {inc.subject.label}"
    return Message(text=escape(text)[:3000], blocks=blocks)


def _head(inc: Incident, subject: str, where: str) -> str:
    """The root's first line: firing, or how it ended (resolved, stale, superseded)."""
    if inc.open:
        return f":rotating_light: {_names(inc.firing_names or inc.names)} firing on {subject}{where}"
    assert inc.closed_at is not None
    at, names = when(inc.closed_at), _names(inc.names)
    if inc.closed_as == CLOSED_STALE:
        return (
            f":hourglass: Closed as stale at {at}: Alertmanager said nothing more of {names} on "
            f"{subject}{where} (no resolve arrived)"
        )
    if inc.closed_as == CLOSED_SUPERSEDED:
        return (
            f":arrow_right: Superseded at {at}: {names} on {subject}{where} was open over a day; "
            "new alerts on it go to a new thread"
        )
    return f":white_check_mark: Resolved at {at}: {names} on {subject}{where}"


def _link(root: dict[str, str]) -> str:
    """A link to a root message (Slack's archive URL redirects to the workspace), when it was posted."""
    channel, ts = root.get("channel"), root.get("ts")
    if not channel or not ts:
        return ""
    return f" (<https://slack.com/archives/{escape(channel)}/p{escape(ts.replace('.', ''))}|its thread>)"


class SummaryRow(msgspec.Struct, frozen=True):
    label: str
    names: tuple[str, ...]
    walk_id: str
    resolved: bool
    times: int = 1  # incidents of this subject in the hour (a flapping alert opens one per firing)


def storm_summary(
    rows: Sequence[SummaryRow], max_threads: int, hour_start: float, cluster_name: str | None = None
) -> Message:
    """One message per hour listing the subjects that alerted past the storm threshold; it names its
    cluster, since clusters sharing a channel have nodes of the same names."""
    where = f" on cluster `{escape(cluster_name)}`" if cluster_name else ""
    head = (
        f":cyclone: *Alert storm*{where}: {len(rows)} more subject(s) alerted since {when(hour_start)}, after "
        f"{max_threads} incident thread(s) in the last 60 minutes (GPUBOT_ALERT_MAX_THREADS_PER_HOUR). "
        "They get no thread each and nothing is cordoned: *Diagnose* walks one in this message's thread."
    )
    blocks: list[dict[str, Any]] = [_section(head)]
    for row in rows[:SUMMARY_ROWS_MAX]:
        text = f"`{escape(row.label)}` · {_names(row.names)}"
        if row.times > 1:
            text += f" · {row.times} times"
        if row.resolved:
            text = f"~{text}~ resolved"
        block = _section(text)
        block["accessory"] = _button("Diagnose", DIAGNOSE, row.walk_id)
        blocks.append(block)
    rest = rows[SUMMARY_ROWS_MAX:]
    if rest:
        listed = ", ".join(escape(r.label) for r in rest)
        if len(listed) > REST_MAX:
            listed = listed[:REST_MAX].rsplit(", ", 1)[0] + ", …"
        blocks.append(_context(f"and {len(rest)} more (no buttons: Slack allows 50 blocks): {listed}"))
    on = f" on cluster {cluster_name}" if cluster_name else ""
    return Message(
        text=escape(f"gpubot: alert storm{on}, {len(rows)} subject(s) without a thread"), blocks=blocks
    )
