"""The must-gather's DCGM and vLLM series: dcgm/<node>.openmetrics and the series of scenario.yaml."""

from __future__ import annotations

import io
from collections.abc import Sequence

from bot.actions.archive import name_part
from bot.actions.gather import Collector
from layers import remedy as rm
from layers.facts import objects as o
from layers.sources import K8sObject, Selector, TelemetryError

# What `Telemetry.changed` looks back on before a window (layers/sources.py), and the recent window
# kept at a scrape's step for rates over 5 minutes (spec L4_PREEMPTIONS).
CHANGED_LOOKBACK_S = 3600
RECENT_WINDOW_S, RECENT_STEP_S = 900, 15


def telemetry_files(c: Collector, nodes: list[K8sObject], operands: list[K8sObject]) -> None:
    from bot.sources.openmetrics import write_openmetrics
    from bot.sources.series import SeriesData
    from layers.facts import hosts

    c.progress(f"DCGM series over 24 h from {c.telemetry.source}")
    exporters = [p for p in operands if rm.component(p) == "dcgm-exporter"]
    match = rm.series_match(c.scope, [o.name(n) for n in nodes], exporters)
    hostmap = hosts.host_map([o.name(n) for n in nodes], exporters)
    wanted = [(m, match) for m in rm.DCGM_METRICS] + [
        (m, rm.vllm_match(c.scope)) for m in rm.VLLM_METRICS if c.scope.target
    ]
    by_node: dict[str, list[SeriesData]] = {}
    for metric, sel in wanted:
        try:
            got = _series(c, metric, sel)
        except TelemetryError as err:
            c.manifest.skipped.append({"what": "DCGM and vLLM series", "why": str(err) or type(err).__name__})
            return
        for labels, points in got:
            labels.setdefault("__name__", metric.split("|")[0])
            by_node.setdefault(hostmap.node_of(labels) or "pods", []).append(SeriesData(labels, points))
            c.series.append({"metric": labels, "values": [[round(t - c.now, 3), v] for t, v in points]})
    for node, series in sorted(by_node.items()):
        out = io.StringIO()
        write_openmetrics(series, out)
        c.archive.add(f"dcgm/{name_part(node)}.openmetrics", out.getvalue(), reserve=len(out.getvalue()))
    if not by_node:
        c.manifest.skipped.append(
            {"what": "DCGM series", "why": f"no series for the scope in {c.telemetry.source}"}
        )


def _series(
    c: Collector, metric: str, sel: Sequence[Selector]
) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
    """A metric's series as the replayed walk must read them: 24 h and the hour before at the
    bundle's step (a last-Xid gauge is news only when it changed in 24 h or began in them, which
    `changed` tells by that hour), and the last minutes at a scrape's step (`rate(…[5m])` of vLLM's
    preemptions needs more than one point in five minutes), merged per series."""
    merged: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
    for window, step in (
        (rm.SERIES_WINDOW_S + CHANGED_LOOKBACK_S, c.archive.caps.series_step_s),
        (RECENT_WINDOW_S, RECENT_STEP_S),
    ):
        for rs in c.telemetry.range(metric, window, step, sel):
            merged.setdefault(tuple(sorted(rs.labels.items())), {}).update(rs.points)
    return [(dict(key), sorted(points.items())) for key, points in merged.items()]
