"""The device plugin's log on one node: which devices it marked unhealthy and which Xids it saw.

Layer 5 (layers/card.py) and the digest's plugin Xids read it the same way. The plugin's
messages (k8s-device-plugin internal/rm/health.go, server.go) are matched in every spelling it
has had; the log itself is read by time and size through layers/facts/logs.py.
"""

from __future__ import annotations

import re

import msgspec

from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.deployments import plugin_containers, where_looked
from layers.facts.logs import DAY_S, LogReads
from layers.findings import Finding, unknown
from layers.sources import SourceError

LAYER = 5

# Device plugin messages (k8s-device-plugin internal/rm/health.go, server.go): the v0.13+ klog
# format, the <= v0.12 log.Printf one, and a key=value spelling of the same fields.
_XID_CRITICAL = re.compile(
    r"XidCriticalError\b[:\s]*Xid\s*[=:]\s*\"?(?P<xid>\d+)\"?"
    r"(?:(?:(?!XidCriticalError)[^;])*?\b(?:Device|GPU)\s*[=:]\s*\"?(?P<dev>[^\s;,\"]+))?",
    re.IGNORECASE,
)
_MARKED = re.compile(
    r"""['"]?(?<![\w./-])(?P<res>[\w./-]+)['"]?\s+device marked unhealthy:\s*(?P<dev>[^\s;,]+)""",
    re.IGNORECASE,
)
# Every other way the plugin takes devices out: "Marking device X as unhealthy", "Marking it
# unhealthy", "marking device(s) as unhealthy" (ECC / polled checks), "Marking all devices …",
# "the device will go unhealthy". "(correctable; not marking unhealthy)" is the opposite.
_UNHEALTHY = re.compile(
    r"\bmark(?:ing|ed)\b(?:(?!\bhealthy\b).){0,80}?\bunhealthy\b|\bwill\s+go\s+unhealthy\b", re.IGNORECASE
)
_NOT_MARKING = re.compile(r"\bnot\s+mark", re.IGNORECASE)
_ALL_DEVICES = re.compile(r"\ball\s+devices\b", re.IGNORECASE)
# GPU and MIG UUIDs, including the old "MIG-GPU-<uuid>/<gi>/<ci>" form.
_DEVICE_ID = re.compile(r"\b(?:GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*")
UNNAMED_DEVICE = "a device the plugin did not name"
ALL_DEVICES = "all devices"  # "marking all devices as unhealthy": the plugin names none of them
# An Xid the plugin is told to ignore; "Skipping non-nvmlEventTypeXidCriticalError event" is not one.
# GKE's plugin (container-engine-accelerators health_checker.go) says "Health checker is skipping Xid N
# error" for every Xid it does not act on: by default all but 48, 79 included.
_SKIPPING = re.compile(
    r"Skipping event\s*:?\s*\{(?:(?!Skipping event).)*?EventData:\s*(?P<xid>\d+)"
    r"|\bis\s+skipping\s+Xid\s*[=:]?\s*(?P<gke>\d+)",
    re.IGNORECASE,
)
# GKE's plugin names the device by its path and the GPU after it: "on Device=nvidia5, uuid=GPU-…".
_UUID_FIELD = re.compile(r"\buuid\s*[=:]\s*\"?(?P<dev>(?:GPU|MIG)-[0-9A-Za-z][0-9A-Za-z/-]*)", re.IGNORECASE)
# The kernel's own Xid 154 line where a log carries it (a plugin or agent echoing the kernel log, `dmesg -T`
# pasted with a `[time]`): "NVRM: Xid (PCI:0000:ca:00): 154, GPU recovery action changed from … to …".
# It names the recovery action for the Xid it accompanies (layers/xid.py, parse_recovery_action).
_KERNEL_XID154 = re.compile(
    r"NVRM:\s{0,4}Xid\s{0,4}\(PCI:[0-9a-fA-F:.]{1,20}\)\s{0,4}:\s{0,4}154\s{0,4},\s{0,4}GPU recovery action"
)
# "XidCriticalError: Xid=48 on unknown device.": no device matched the event, none was marked.
_UNKNOWN_DEVICE = re.compile(r"\bon\s+unknown\s+device\b", re.IGNORECASE)


def unhealthy_device(line: str) -> str | None:
    """The device a non-Xid line marks unhealthy, "all devices", an unnamed one, or None (not such a line)."""
    m = _MARKED.search(line)
    if m:
        return m.group("dev")
    if not _UNHEALTHY.search(line) or _NOT_MARKING.search(line):
        return None
    m = _DEVICE_ID.search(line)
    if m:
        return m.group(0).rstrip(":.")
    return ALL_DEVICES if _ALL_DEVICES.search(line) else UNNAMED_DEVICE


def xid_event(line: str) -> tuple[int, str | None] | None:
    """(Xid, device or None) of a line where the plugin acted on an Xid; None for any other line.
    The ledger (layers/facts/ledgerfacts.py) records each such line with its own time."""
    m = _XID_CRITICAL.search(line)
    if not m or _UNKNOWN_DEVICE.search(line):
        return None
    named = _UUID_FIELD.search(line)
    device = (named.group("dev") if named else (m.group("dev") or "")).rstrip(".:") or None
    return int(m.group("xid")), device


class PluginLog(msgspec.Struct):
    """What the device plugin's log says about one node."""

    unhealthy: dict[str, tuple[int | None, str]] = msgspec.field(
        default_factory=dict
    )  # device -> (xid, line)
    xids: dict[int, list[str]] = msgspec.field(default_factory=dict)  # Xid -> lines within 24 h
    xid_devices: dict[int, set[str]] = msgspec.field(default_factory=dict)  # Xid -> devices named within 24 h
    read: list[str] = msgspec.field(default_factory=list)  # "pod/container[ previous]" read
    gaps: list[str] = msgspec.field(
        default_factory=list
    )  # what a byte cap left unread (layers/facts/logs.py)
    commands: list[str] = msgspec.field(default_factory=list)

    def scan(self, text: str, where: str, now: float, previous: bool, seen: set[str] | None = None) -> None:
        """Add one text's marks and Xids; `seen` skips lines an overlapping read of the same log gave."""
        for line in sig.lines_of(text):
            if seen is not None:
                if line in seen:
                    continue
                seen.add(line)
            ts = sig.line_time(line, now)
            recent = ts is None or ts >= now - DAY_S
            shown = f"[{where}] {line[:300]}"
            # The current instance's marks stand until the plugin restarts; a previous one's are history.
            counts_unhealthy = not previous or recent
            m = _XID_CRITICAL.search(line)
            if m:
                number = int(m.group("xid"))
                named = _UUID_FIELD.search(line)
                device = (named.group("dev") if named else (m.group("dev") or "")).rstrip(".:") or None
                if recent:
                    self.xids.setdefault(number, []).append(shown)
                    if device:
                        self.xid_devices.setdefault(number, set()).add(device)
                if counts_unhealthy and not _UNKNOWN_DEVICE.search(line):
                    self.unhealthy.setdefault(device or ALL_DEVICES, (number, shown))
                continue
            if _KERNEL_XID154.search(line):
                if recent:
                    self.xids.setdefault(154, []).append(shown)
                continue
            m = _SKIPPING.search(line)
            if m:
                number = int(m.group("xid") or m.group("gke"))
                if number and recent:
                    self.xids.setdefault(number, []).append(
                        shown + " (Xid ignored by the plugin's health check)"
                    )
                continue
            marked = unhealthy_device(line)
            if marked and counts_unhealthy:
                self.unhealthy.setdefault(marked, (None, shown))


def read_plugin_log(ctx: WalkContext, node: str) -> tuple[PluginLog | None, list[Finding]]:
    """The node's device plugin log, read by time and size (layers/facts/logs.py, window): the
    current instance from its start, the previous over 24 h. `unknown` findings say what was not
    read: a refused read, no plugin pod, or the part a byte cap left out."""
    now = ctx.telemetry.now()
    try:
        pods = ctx.operator_pods_on(node, "device-plugin")
    except SourceError as err:
        return None, [_log_unknown(node, f"could not list the operator pods: {err.message}", err.hint())]
    if not pods and ctx.operator_pods_on(node, "dra-kubelet-plugin"):
        # A DRA node: its kubelet plugin's log is read with its device taints (layers/dra/devicehealth.py).
        return None, []
    if not pods:
        return None, [
            _log_unknown(
                node, "no device plugin pod found on the node", f"looked for pods labelled {where_looked()}"
            )
        ]
    log = PluginLog()
    reads = LogReads(ctx, LAYER)
    for pod in pods:
        ns, name = o.namespace(pod) or "default", o.name(pod)
        for container in plugin_containers(pod):
            log.commands.append(f"kubectl logs -n {ns} {name} -c {container} | grep -iE 'unhealthy|Xid'")
            # The previous instance is asked for whatever the status says: its marks of the last
            # 24 h still stand for a GPU, and a missing one is no error.
            for previous in (False, True):
                window = reads.window(pod, container, previous)
                if window is None:
                    continue
                where = f"{name}/{container}{' previous' if previous else ''}"
                log.read.append(where)
                seen: set[str] = set()
                for text in window.texts:
                    log.scan(text, where, now, previous, seen)
                log.gaps += window.gaps
    problems = reads.unknowns(UNCHECKED)
    if log.gaps:
        problems.append(
            unknown(
                LAYER,
                f"device plugin log on {node} read only in part (a read stops at "
                f"{ctx.settings.log_window_bytes >> 20} MiB): {UNCHECKED} in what was left out",
                evidence=[
                    *(f"not read: {g}" for g in log.gaps),
                    *(
                        f"read the last 24 h: {c.replace(' | grep', ' --since=24h | grep')}"
                        for c in log.commands
                    ),
                ],
                node=node,
            )
        )
    if not log.read and not problems:
        problems.append(
            _log_unknown(node, "the device plugin pod has no log yet", "check that it is running")
        )
    return log, problems


UNCHECKED = "unhealthy devices and the Xids DCGM cannot report (79, 119, 120) were not checked"


def _log_unknown(node: str, what: str, fix: str) -> Finding:
    return unknown(
        LAYER,
        f"device plugin log on {node} not read ({what}): {UNCHECKED}" + (f" — {fix}" if fix else ""),
        node=node,
    )
