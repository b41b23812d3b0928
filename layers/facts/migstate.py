"""Did the MIG manager apply a node's `nvidia.com/mig.config`? (spec/findings.md, L1_MIG_CONFIG_FAILED)

The MIG manager sets `nvidia.com/mig.config.state` to `pending` when it starts applying the layout
the `nvidia.com/mig.config` label names, then `success` or `failed` (mig-parted's reconfigure
script: "Changing the 'nvidia.com/mig.config.state' node label to 'failed'"). A `failed` node keeps
advertising its old layout. A state stuck at `pending` is a failure too once it has lasted over
15 minutes, as told by the node's events or the MIG manager's own log ("Updating to MIG config: …"
with its logrus time, and no "Successfully updated" since).
"""

from __future__ import annotations

import re
from datetime import datetime

import msgspec

from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.owners import MIG_CONFIG_STATE
from layers.facts.placement import label_value
from layers.sources import K8sObject

STATE_LABEL = MIG_CONFIG_STATE  # the owners' mark (layers/facts/owners.py); `failed` is read here
CONFIG_LABEL = "nvidia.com/mig.config"
PENDING_LIMIT_S = 15 * 60
MIG_MANAGER_CONTAINER = "nvidia-mig-manager"

_LOGRUS_TIME = re.compile(r'\btime="(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))"')
_UPDATING = re.compile(r"Updating to MIG config:\s*(\S+)")
_STATE_CHANGE = re.compile(r"nvidia\.com/mig\.config\.state'?\s+node label to\s+'?(\w+)'?", re.IGNORECASE)
_DONE = re.compile(r"Successfully updated to MIG config", re.IGNORECASE)
_ERROR = re.compile(r"\b(?:error|fatal|failed|unable)\b", re.IGNORECASE)
# Lines of every reconfiguration, failed or not: the "not applied yet" check and label read-backs.
_ROUTINE = re.compile(
    r"Assertion failure: selected configuration not currently applied|^Current value of", re.IGNORECASE
)
_EVIDENCE_LINES = 6


def state(node: K8sObject) -> str | None:
    return label_value(o.labels(node).get(STATE_LABEL))


def layout(node: K8sObject) -> str | None:
    return label_value(o.labels(node).get(CONFIG_LABEL))


def not_applied(node: K8sObject) -> bool:
    """The MIG manager has not (yet) applied the requested layout: state failed or pending."""
    return state(node) in ("failed", "pending")


def _time(line: str, now: float) -> float | None:
    m = _LOGRUS_TIME.search(line)
    if m:
        try:
            return datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return sig.line_time(line, now)


class ManagerLog(msgspec.Struct, frozen=True):
    """What the MIG manager's log says about its last reconfiguration."""

    pending_since: float | None  # when the reconfiguration still unfinished began; None: none unfinished
    state: str | None  # the last state it set ("pending", "success", "failed")
    errors: tuple[str, ...]  # its error lines of the last reconfiguration


def read_manager_log(text: str | None, now: float) -> ManagerLog:
    pending_since: float | None = None
    last_state: str | None = None
    errors: list[str] = []
    clock: float | None = None  # the latest time a line carried: echo lines carry none
    for line in sig.lines_of(text):
        clock = _time(line, now) or clock
        if _UPDATING.search(line):
            pending_since, errors = clock, []
            continue
        m = _STATE_CHANGE.search(line)
        if m:
            last_state = m.group(1).lower()
            if last_state == "pending":
                pending_since = pending_since or clock
            elif last_state in ("success", "failed"):
                pending_since = None
            continue
        if _DONE.search(line):
            pending_since = None
        elif _ERROR.search(line) and not _ROUTINE.search(sig.strip_prefixes(line)):
            errors.append(line[: sig.EVIDENCE_CHARS])
    return ManagerLog(pending_since, last_state, tuple(errors[-_EVIDENCE_LINES:]))


def pending_since_events(events: list[K8sObject]) -> float | None:
    """When a node event last said its MIG state became pending (and nothing said it left it)."""
    since: float | None = None
    for ev in sorted(events, key=sig.event_time):
        msg = sig.event_message(ev)
        if STATE_LABEL not in msg and STATE_LABEL.rsplit("/", 1)[-1] not in msg:
            continue
        when = sig.event_time(ev)
        try:
            ts = datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp() if when else None
        except ValueError:
            ts = None
        if re.search(r"\bpending\b", msg, re.IGNORECASE):
            since = since or ts
        elif re.search(r"\b(?:success|failed)\b", msg, re.IGNORECASE):
            since = None
    return since
