"""Layer 5 on a DRA node: what the NVIDIA DRA driver's device taints and its kubelet plugin's health
events say about the card (spec/findings.md, DRA: `gpu.nvidia.com/xid=N` is an `L5_XID`, `gpu-lost`
an `L5_DEVICE_UNHEALTHY`, an effect-None taint evidence, the plugin's log read like the device
plugin's)."""

from __future__ import annotations

import re

import msgspec

from layers.dra import DAY_S, cannot, slice_cmd
from layers.facts import drareads as reads
from layers.facts import draslices, podstatus
from layers.facts import logsigs as sig
from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.deployments import dra_plugin_container
from layers.facts.fold import MAX_LISTED
from layers.facts.logs import LogReads
from layers.findings import Finding, finding, unknown
from layers.sources import SourceError


class TaintXids(msgspec.Struct):
    """Xid number -> evidence lines, devices, and whether any taint keeps the device from pods."""

    lines: dict[int, list[str]]
    devices: dict[int, set[str]]
    blocking: dict[int, bool]


def card_evidence(ctx: WalkContext, node: str) -> tuple[TaintXids, list[Finding]]:
    """The node's device taints: `gpu.nvidia.com/xid=N` as Xid N, `gpu-lost` as an unhealthy device,
    `unmonitored` as a check that cannot run. Nothing for a node without DRA slices."""
    xids = TaintXids({}, {}, {})
    try:
        devices = reads.inventory(ctx).on(node)
    except SourceError as err:
        if err.kind == "forbidden":
            return xids, [cannot(5, f"the ResourceSlices of {node} (DRA device taints)", err)]
        return xids, []
    lost: list[str] = []
    unmonitored: list[str] = []
    health = plugin_health_lines(ctx, node) if devices else PluginHealth({}, {}, {}, [])
    heard, log_problems = health.heard, health.problems
    tainted_uuids = {d.attribute("uuid") for d in devices if d.taints}
    for d in devices:
        uuid = d.attribute("uuid") or d.name
        for t in d.taints:
            line = f"[ResourceSlice {d.slice}] {d.label}: taint {t.text}" + (
                f", added {t.time_added}" if t.time_added else ""
            )
            if t.key == draslices.TAINT_XID and t.value.isdigit():
                n = int(t.value)
                xids.lines.setdefault(n, []).append(
                    line + ("" if t.blocking else " (effect None: the driver ignores this Xid)")
                )
                xids.devices.setdefault(n, set()).add(uuid)
                xids.blocking[n] = xids.blocking.get(n, False) or t.blocking
            elif t.key == draslices.TAINT_GPU_LOST:
                lost.append(f"{uuid}: GPU lost — {line}")
            elif t.key == draslices.TAINT_UNMONITORED:
                unmonitored.append(line)
    for number, devs in xids.devices.items():
        for uuid in sorted(devs):
            xids.lines[number] += heard.get(uuid, [])
    out: list[Finding] = list(log_problems)
    unseen = {u: lines for u, lines in heard.items() if u not in tainted_uuids}
    # An Xid the plugin saw but could not publish is still Xid N (spec: the plugin's log is read for
    # Xids as the device plugin's is), fatal or not by the effect it meant to set.
    for uuid in [u for u in unseen if u in health.xid_of]:
        n = health.xid_of[uuid]
        xids.lines.setdefault(n, []).extend(unseen.pop(uuid))
        xids.devices.setdefault(n, set()).add(uuid)
        xids.blocking[n] = xids.blocking.get(n, False) or health.effect_of.get(n, "NoSchedule") != "None"
    if unseen:
        out.append(
            finding(
                "L5_DEVICE_UNHEALTHY",
                f"the DRA kubelet plugin on {node} received health events for {len(unseen)} GPU(s) its "
                "ResourceSlice does not show tainted (the republish may have failed): drain the node and check them",
                evidence=[line for lines in unseen.values() for line in lines][:MAX_LISTED],
                commands=[slice_cmd(node)],
                node=node,
            )
        )
    if lost:
        out.append(
            finding(
                "L5_DEVICE_UNHEALTHY",
                f"the DRA driver on {node} tainted {len(lost)} GPU(s) gpu-lost: the GPU fell off the bus or "
                "stopped answering NVML — drain the node, reset or reseat the GPU",
                evidence=lost,
                commands=[slice_cmd(node), f"kubectl describe node {node}"],
                node=node,
            )
        )
    if unmonitored:
        out.append(
            unknown(
                5,
                f"the DRA driver cannot watch {len(unmonitored)} GPU(s) on {node} for Xids (taint "
                f"{draslices.TAINT_UNMONITORED}): their health is not reported by the driver",
                node=node,
                evidence=unmonitored,
            )
        )
    return xids, out


# The kubelet plugin's own words (cmd/gpu-kubelet-plugin/driver.go, device_health.go; -v=4, the
# chart's default, prints the Xid and the taint it republishes).
_HEALTH_EVENT = re.compile(
    r"Received (?P<type>[\w-]+) health event for device (?P<uuid>(?:GPU|MIG)-[0-9A-Za-z-]+)"
)
_XID_EVENT = re.compile(
    r"Sending XID=(?P<xid>\d{1,4}) health event for device (?P<uuid>(?:GPU|MIG)-[0-9A-Za-z-]+)"
)
_REPUBLISH = re.compile(
    r"tainted with gpu\.nvidia\.com/xid=\\?\"?(?P<xid>\d{1,4})\\?\"?\s*\(effect=(?P<effect>\w+)\)"
)
_PUBLISH_FAILED = re.compile(r"Failed to publish resources after taint update")


class PluginHealth(msgspec.Struct):
    """What the DRA kubelet plugin's log of the last 24 h says about the node's GPUs."""

    heard: dict[str, list[str]]  # GPU UUID -> its health-event lines
    xid_of: dict[str, int]  # GPU UUID -> the Xid it was sent for
    effect_of: dict[int, str]  # Xid -> the taint effect the plugin republished it with
    problems: list[Finding]


def plugin_health_lines(ctx: WalkContext, node: str) -> PluginHealth:
    """The DRA kubelet plugin's health-event lines of the last 24 h (its GPU container)."""
    try:
        pods = ctx.operator_pods_on(node, "dra-kubelet-plugin")
    except SourceError as err:
        return PluginHealth({}, {}, {}, [cannot(5, f"the DRA kubelet plugin pod on {node}", err)])
    now = ctx.telemetry.now()
    heard: dict[str, list[str]] = {}
    xid_of: dict[str, int] = {}
    effect_of: dict[int, str] = {}
    logs = LogReads(ctx, 5)
    for pod in pods:
        name = o.name(pod)
        container = dra_plugin_container(pod, draslices.DRIVER)
        if container is None:
            continue  # this plugin pod serves no GPUs (the chart's gpu plugin disabled)
        for previous in (False, True) if podstatus.restarted(pod, container) else (False,):
            text = logs.log(pod, container, previous)
            for line in sig.lines_of(text):
                ts = sig.line_time(line, now)
                if ts is not None and ts < now - DAY_S:
                    continue
                where = f"[{name}/{container}{' previous' if previous else ''}] "
                if x := _XID_EVENT.search(line):
                    xid_of[x.group("uuid")] = int(x.group("xid"))
                    heard.setdefault(x.group("uuid"), []).append(where + sig.clip(line))
                elif m := _HEALTH_EVENT.search(line):
                    heard.setdefault(m.group("uuid"), []).append(where + sig.clip(line))
                elif r := _REPUBLISH.search(line):
                    effect_of[int(r.group("xid"))] = r.group("effect")
                elif _PUBLISH_FAILED.search(line):
                    for lines in heard.values():
                        lines.append(where + sig.clip(line))
    return PluginHealth(
        heard, xid_of, effect_of, logs.unknowns("the DRA kubelet plugin's health events were not read")
    )
