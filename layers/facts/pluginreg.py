"""Did the device plugin register again after the kubelet last restarted? (L2_DEVICE_PLUGIN_NOT_REGISTERED)

A kubelet restart wipes its device-plugin sockets; a plugin that does not notice (k8s-device-plugin
issue 58, kubernetes issue 60176, bottlerocket issue 4250) keeps serving a socket nobody calls, and
the node keeps its GPUs in capacity with allocatable 0. Told apart from GPUs marked unhealthy by:
allocatable 0 for every GPU resource, no unhealthy mark and no Xid in the plugin's log, and a kubelet
start (the `Ready` condition's `KubeletReady` transition, a `Starting` "Starting kubelet." or a
`Rebooted` event) after the plugin's last `Registered device plugin for '…' with Kubelet` line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import msgspec

from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.deployments import plugin_containers
from layers.facts.logs import LogReads
from layers.facts.pluginlog import read_plugin_log
from layers.sources import K8sObject, SourceError

# k8s-device-plugin's "Registered device plugin for 'nvidia.com/gpu' with Kubelet" (every release), and
# any spelling that starts the same ("Registered device plugin with Kubelet", the resource as a field).
_REGISTERED = re.compile(r"\bRegistered device plugin\b", re.IGNORECASE)
# The kubelet's own events at start: reason Starting ("Starting kubelet."), Rebooted ("Node … has been
# rebooted, boot id: …").
_KUBELET_START_REASONS = ("Starting", "Rebooted")
_STARTING_KUBELET = re.compile(r"\bStarting kubelet\b|\brebooted\b", re.IGNORECASE)
MAX_NODES = 10  # plugin logs read per walk for this check


class Unregistered(msgspec.Struct, frozen=True):
    node: str
    capacity: dict[str, int]
    registered: str  # the plugin's last registration line
    registered_at: float
    kubelet_start: str  # what says the kubelet started, and when
    kubelet_at: float
    plugin: str  # "namespace/pod"

    def evidence(self) -> list[str]:
        return [
            *(f"capacity {r}={c}, allocatable {r}=0" for r, c in sorted(self.capacity.items())),
            f"device plugin's last registration ({_iso(self.registered_at)}): {self.registered}",
            f"kubelet started after it ({_iso(self.kubelet_at)}): {self.kubelet_start}",
            "device plugin log: no device marked unhealthy, no Xid",
        ]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(when: object) -> float | None:
    try:
        return datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp() if when else None
    except ValueError:
        return None


def all_gpus_unallocatable(node: K8sObject) -> dict[str, int]:
    """GPU resource -> capacity, when the node advertises GPUs and allocatable is 0 for every one."""
    cap = {r: q for r, q in o.gpu_resources(node, "capacity").items() if q > 0}
    alloc = o.gpu_resources(node, "allocatable")
    return cap if cap and not any(alloc.get(r, 0) for r in cap) else {}


def kubelet_started(ctx: WalkContext, node: K8sObject) -> tuple[float, str] | None:
    """The kubelet's latest start on the node: its Ready transition by KubeletReady, its start events."""
    found: list[tuple[float, str]] = []
    for cond in (node.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == "Ready"
            and cond.get("status") == "True"
            and cond.get("reason") == "KubeletReady"
        ):
            ts = _parse(cond.get("lastTransitionTime"))
            if ts is not None:
                found.append(
                    (ts, f"condition Ready=True, reason KubeletReady, since {cond.get('lastTransitionTime')}")
                )
    try:
        events = ctx.events("Node", None, o.name(node))
    except SourceError:
        events = []
    for ev in events:
        if str(ev.get("reason")) in _KUBELET_START_REASONS and _STARTING_KUBELET.search(
            sig.event_message(ev)
        ):
            ts = _parse(sig.event_time(ev))
            if ts is not None:
                found.append((ts, sig.event_line(ev)))
    return max(found) if found else None


def unregistered(ctx: WalkContext, node: K8sObject) -> Unregistered | None:
    """The node's plugin did not register with the kubelet that runs now; None when that is not shown."""
    capacity = all_gpus_unallocatable(node)
    if not capacity:
        return None
    return ctx.cached(("plugin_unregistered", o.name(node)), lambda: _judge(ctx, node, capacity))


def _judge(ctx: WalkContext, node: K8sObject, capacity: dict[str, int]) -> Unregistered | None:
    name = o.name(node)
    started = kubelet_started(ctx, node)
    if started is None:
        return None
    log, problems = read_plugin_log(ctx, name)
    if log is None or problems or log.unhealthy or log.xids:
        return None  # unread, or GPUs marked unhealthy: layer 5's question
    last: tuple[float, str, str] | None = None  # (time, line, plugin pod)
    now = ctx.telemetry.now()
    try:
        pods = ctx.operator_pods_on(name, "device-plugin")
    except SourceError:
        return None
    for pod in pods:
        for text in _plugin_texts(ctx, pod):
            for line in sig.lines_of(text):
                if _REGISTERED.search(line):
                    ts = sig.line_time(line, now)
                    if ts is not None and (last is None or ts >= last[0]):
                        last = (ts, line.strip()[:300], f"{o.namespace(pod)}/{o.name(pod)}")
    if last is None or started[0] <= last[0]:
        return None
    return Unregistered(name, capacity, last[1], last[0], started[1], started[0], last[2])


def _plugin_texts(ctx: WalkContext, pod: K8sObject) -> list[str]:
    reads = LogReads(ctx, 2)
    out: list[str] = []
    for container in plugin_containers(pod):
        window = reads.window(pod, container, False)
        if window is not None:
            out += list(window.texts)
    return out
