"""What a node's objects, logs and series say for its ledger: events with their own times.

Read through the walk context, so a live cluster, a scenario and a must-gather bundle
give the ledger the same things (spec/interfaces.md, "Node history, repeat offenders
and RMA"):

- the device plugin's log: each line where it acted on an Xid, and each GPU it marked
  unhealthy, at the line's own timestamp;
- DCGM's series over 7 days: the last-Xid gauge's changes (a 5-minute grid: two reads
  land within the ledger's same-event tolerance), the rises of the exporter's Xid counter
  (`DCGM_EXP_XID_ERRORS_TOTAL`: a drop is a restart's reset, never an event) and of its
  windowed count (`DCGM_EXP_XID_ERRORS_COUNT`, on a 1-minute grid: each rise is an Xid at that
  time, a fall the window passing) — these outlive the plugin's restarts and name the GPU of
  an Xid the plugin skips (13, 31) — the row-remap failure and pending flags, remapped rows
  that rose; and Prometheus's per-GPU count (`increase(…[24h])` of the exporter's Xid counter),
  which fills what the bot did not see;
- which GPUs the node has now (their last-Xid series answer at the end of the range): a GPU
  no longer there was replaced, and leaves the node's rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

import msgspec

from layers.facts import logsigs as sig
from layers.facts.context import WalkContext
from layers.facts.deployments import plugin_containers
from layers.facts.gpufacts import (
    CORRECTABLE_ROWS,
    LAST_XID,
    ROW_REMAP_FAILURE,
    UNCORRECTABLE_ROWS,
    XID_COUNT,
    XID_TOTAL,
)
from layers.facts.hosts import HostMap, host_map, selector_for
from layers.facts.ledgerevents import DAY_S, WEEK_S, Event, WindowCount
from layers.facts.logs import LogReads
from layers.facts.pluginlog import unhealthy_device, xid_event
from layers.sources import SourceError, Telemetry, TelemetryError

ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
XID_STEP_S = 300  # the last-Xid gauge's grid: finer than the ledger's same-event tolerance (600 s)
# The exporter's windowed Xid count holds each Xid for its window (5 minutes by default): a 1-minute
# grid sees every one (10,080 points over 7 d, under Prometheus's 11,000 per series).
XID_COUNT_STEP_S = 60
# A GPU whose last-Xid series has a point this close to the end of the range is on the node now.
PRESENT_S = 2 * XID_STEP_S
ROWS_STEP_S = 3600
STATE_WINDOW_S = 3600  # the digest's look at the remap flags: states held until a reset or a new card


class GpuId(msgspec.Struct, frozen=True):
    uuid: str
    index: str = ""
    serial: str = ""
    model: str = ""


class Observation(msgspec.Struct):
    """One node's ledger as its sources show it now."""

    node: str
    gpus: dict[str, GpuId] = msgspec.field(default_factory=dict)  # uuid -> identity
    events: list[Event] = msgspec.field(default_factory=list)
    windows: list[WindowCount] = msgspec.field(default_factory=list)
    problems: list[str] = msgspec.field(default_factory=list)
    present: set[str] | None = None  # the GPUs on the node now (None: DCGM's series did not say)

    def gpu(self, labels: Mapping[str, str]) -> str:
        uuid = labels.get("UUID") or labels.get("uuid") or ""
        if uuid and uuid not in self.gpus:
            self.gpus[uuid] = GpuId(uuid, labels.get("gpu", ""), "", labels.get("modelName", ""))
        return uuid


def plugin_events(ctx: WalkContext, node: str, obs: Observation) -> None:
    """Xid and unhealthy lines of the node's device plugin log(s), each at its own time."""
    try:
        pods = ctx.operator_pods_on(node, "device-plugin")
    except SourceError as err:
        obs.problems.append(f"device plugin pods on {node} not listed: {err.message}")
        return
    reads = LogReads(ctx, 5)
    now = ctx.telemetry.now()
    for pod in pods:
        for container in plugin_containers(pod):
            for previous in (False, True):
                window = reads.window(pod, container, previous)
                if window is None:
                    continue
                for text in window.texts:
                    for line in sig.lines_of(text):
                        _plugin_line(node, line, now, obs)
    obs.problems += [f.summary for f in reads.unknowns("its Xids are not in the ledger")]


def _plugin_line(node: str, line: str, now: float, obs: Observation) -> None:
    at = sig.line_time(line, now)
    if at is None:
        return  # a line without its time cannot be told from the same line read again
    shown = sig.clip(line, 300)
    hit = xid_event(line)
    if hit is not None:
        xid, device = hit
        gpu = device if device and device.startswith(("GPU-", "MIG-")) else ""
        obs.events.append(Event(node, "xid", at, gpu=gpu, xid=xid, source="device-plugin", detail=shown))
        return
    marked = unhealthy_device(line)
    if marked and marked.startswith(("GPU-", "MIG-")):
        obs.events.append(Event(node, "unhealthy", at, gpu=marked, source="device-plugin", detail=shown))


def _first_rise(points: Sequence[tuple[float, float]]) -> tuple[float, float] | None:
    """When a counter first rose in the range, and by how much in all."""
    if len(points) < 2:
        return None
    base = points[0][1]
    for t, v in points[1:]:
        if v > base:
            return t, points[-1][1] - base
    return None


def count_rises(points: Sequence[tuple[float, float]]) -> list[float]:
    """When a count rose from one point to the next: each is an Xid at that time. A fall is a counter's
    reset (the exporter restarted with the node) or a window passing, never an event; the first point
    after a gap in the series is not compared across it."""
    out: list[float] = []
    for (t0, before), (t, v) in pairwise(points):
        if v > before and v > 0 and t - t0 <= 2 * XID_STEP_S:
            out.append(t)
    return out


def series_events(
    telemetry: Telemetry, hostmap: HostMap, nodes: Sequence[str], by_node: Mapping[str, Observation]
) -> None:
    """DCGM's 7 days for these nodes: Xid gauge changes, remap failure and pending, rows that rose.
    Raises TelemetryError when the source is down."""
    match = selector_for(nodes, hostmap)
    end = telemetry.now()
    for s in telemetry.range(LAST_XID, WEEK_S, XID_STEP_S, match):
        obs = by_node.get(hostmap.node_of(s.labels) or "")
        if obs is None:
            continue
        gpu = obs.gpu(s.labels)
        if obs.present is None:
            obs.present = set()
        if gpu and s.points and s.points[-1][0] >= end - PRESENT_S:
            obs.present.add(gpu)
        # The gauge holds the last Xid and never resets: only a change within the range is a
        # moment; a value it had from the start is older than the range, its time unknown.
        for (_, before), (t, v) in zip(s.points, s.points[1:], strict=False):
            if v > 0 and v != before:
                obs.events.append(
                    Event(
                        obs.node,
                        "xid",
                        t,
                        gpu=gpu,
                        xid=int(v),
                        source="dcgm",
                        detail="DCGM_FI_DEV_XID_ERRORS changed",
                    )
                )
    for metric, step in ((XID_TOTAL, XID_STEP_S), (XID_COUNT, XID_COUNT_STEP_S)):
        for s in telemetry.range(metric, WEEK_S, step, match):
            obs = by_node.get(hostmap.node_of(s.labels) or "")
            xid = s.labels.get("xid") or s.labels.get("XID") or ""
            if obs is not None and xid.isdigit():
                gpu = obs.gpu(s.labels)
                obs.events += [
                    Event(obs.node, "xid", t, gpu=gpu, xid=int(xid), source="dcgm", detail=f"{metric} rose")
                    for t in count_rises(s.points)
                ]
    for metric, kind, detail in (
        (ROW_REMAP_FAILURE, "row_remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE=1"),
        (ROW_REMAP_PENDING, "remapped_rows", "pending: DCGM_FI_DEV_ROW_REMAP_PENDING=1"),
    ):
        for s in telemetry.range(metric, WEEK_S if kind != "remapped_rows" else DAY_S, ROWS_STEP_S, match):
            obs = by_node.get(hostmap.node_of(s.labels) or "")
            first = next((t for t, v in s.points if v > 0), None)
            if obs is not None and first is not None:
                obs.events.append(
                    Event(obs.node, kind, first, gpu=obs.gpu(s.labels), source="dcgm", detail=detail)
                )
    rows: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for metric, what in ((CORRECTABLE_ROWS, "correctable"), (UNCORRECTABLE_ROWS, "uncorrectable")):
        for s in telemetry.range(metric, WEEK_S, ROWS_STEP_S, match):
            obs = by_node.get(hostmap.node_of(s.labels) or "")
            rise = _first_rise(s.points)
            if obs is not None and rise is not None:
                rows.setdefault((obs.node, obs.gpu(s.labels)), []).append(
                    (rise[0], f"{what} +{round(rise[1])}")
                )
    for (node, gpu), rises in rows.items():
        # One entry per GPU: correctable and uncorrectable rows rising are one memory event.
        detail = ", ".join(what for _, what in rises) + " rows in 7 d"
        by_node[node].events.append(
            Event(node, "remapped_rows", min(t for t, _ in rises), gpu=gpu, source="dcgm", detail=detail)
        )


def window_counts(telemetry: Telemetry, hostmap: HostMap, nodes: Sequence[str] | None) -> list[WindowCount]:
    """Prometheus's Xid counts per GPU over 24 h (the exporter's DCGM_EXP_XID_ERRORS_TOTAL; `increase`
    ignores its resets), fleet-wide when `nodes` is None. Raises TelemetryError when the source is down."""
    match = [] if nodes is None else selector_for(nodes, hostmap)
    counts: dict[tuple[str, str, int], int] = {}
    for s in telemetry.increase(XID_TOTAL, DAY_S, match, above=0):
        node = hostmap.node_of(s.labels)
        xid = s.labels.get("xid") or s.labels.get("XID") or ""
        gpu = s.labels.get("UUID") or s.labels.get("uuid") or ""
        if node is not None and xid.isdigit() and gpu:
            counts[(node, gpu, int(xid))] = max(0, round(s.value))
    return [WindowCount(n, g, x, d) for (n, g, x), d in sorted(counts.items())]


def observe_node(ctx: WalkContext, node: str) -> Observation:
    """Everything the sources show for one node's ledger. A node that does not exist raises
    SourceError (not_found); unreadable logs or series are problems, the rest still counts."""
    ctx.cluster.get_node(node)  # a node that does not exist is bad input, not an empty ledger
    obs = Observation(node)
    plugin_events(ctx, node, obs)
    hostmap = host_map([node], [])
    try:
        series_events(ctx.telemetry, hostmap, [node], {node: obs})
        obs.windows = window_counts(ctx.telemetry, hostmap, [node])
    except TelemetryError as err:
        obs.problems.append(f"DCGM series not read from {ctx.telemetry.source}: {err}")
    for ev in obs.events:
        if ev.gpu and ev.gpu not in obs.gpus:
            obs.gpus[ev.gpu] = GpuId(ev.gpu)
    return obs


def fleet_state_events(telemetry: Telemetry, hostmap: HostMap, now: float) -> list[Event]:
    """The digest's witness for the ledger: every GPU whose row-remap failure flag, or pending remaps, its
    series show in the last hour (two fleet-wide reads of the few non-zero series). Both are states the
    GPU holds until it is reset or replaced: a card replaced yesterday has no series in the hour, so its
    old UUID's flag is not written again. Raises TelemetryError when the source is down."""
    events: list[Event] = []
    for metric, kind, detail in (
        (ROW_REMAP_FAILURE, "row_remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE=1"),
        (ROW_REMAP_PENDING, "remapped_rows", "pending: DCGM_FI_DEV_ROW_REMAP_PENDING=1"),
    ):
        for s in telemetry.max_over_time(metric, STATE_WINDOW_S, above=0):
            node = hostmap.node_of(s.labels)
            gpu = s.labels.get("UUID") or s.labels.get("uuid") or ""
            if node and gpu:
                events.append(Event(node, kind, now, gpu=gpu, source="dcgm", detail=detail))
    return events
