"""The digest's chart: flagged nodes' remapped rows over 7 days, and their capacity gaps.

People look at trends rather than read numbers. Two range queries (one per
remapped-rows metric) for the drawn nodes, summed per node over its GPUs;
matplotlib's Agg backend renders a PNG in memory. The figure is a bare
`Figure` on its own `FigureCanvasAgg`, never pyplot: pyplot's global figure
manager is not thread-safe, and the scheduler and several pool workers may
draw at once.
"""

from __future__ import annotations

import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import matplotlib.dates as mdates
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from layers.digest import Digest, FlaggedNode
from layers.facts.gpufacts import CORRECTABLE_ROWS, UNCORRECTABLE_ROWS, HostMap, selector_for
from layers.sources import RangeSeries, Telemetry, TelemetryError

WEEK_S = 7 * 86400
STEP_S = 3600
MAX_NODES = 10  # more lines than this is a hairball: the rest are in the attached list

Points = list[tuple[float, float]]


@dataclass
class ChartData:
    day: str
    nodes: list[FlaggedNode]
    correctable: dict[str, Points] = field(default_factory=dict)
    uncorrectable: dict[str, Points] = field(default_factory=dict)
    error: str | None = None
    hidden: int = 0  # flagged nodes not drawn


def _per_node(series: Sequence[RangeSeries], hostmap: HostMap, wanted: set[str]) -> dict[str, Points]:
    sums: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for s in series:
        node = hostmap.node_of(s.labels)
        if node is None or node not in wanted:
            continue
        for t, v in s.points:
            sums[node][t] += v
    return {n: sorted(p.items()) for n, p in sums.items()}


def read_chart_data(telemetry: Telemetry, digest: Digest, day: str | None = None) -> ChartData:
    """Two Telemetry.range calls for the drawn nodes; a failure is kept as a note on the chart."""
    drawn = list(digest.flagged[:MAX_NODES])
    data = ChartData(
        day=day or digest.generated_iso[:10], nodes=drawn, hidden=len(digest.flagged) - len(drawn)
    )
    if not drawn:
        return data
    if digest.metrics_error:
        data.error = "metrics could not be read"
        return data
    names = [f.node for f in drawn]
    match = selector_for(names, digest.hostmap)
    try:
        for metric, into in ((CORRECTABLE_ROWS, data.correctable), (UNCORRECTABLE_ROWS, data.uncorrectable)):
            into.update(_per_node(telemetry.range(metric, WEEK_S, STEP_S, match), digest.hostmap, set(names)))
    except TelemetryError as err:
        data.error = f"remapped rows could not be read: {str(err)[:120]}"
    return data


def render_chart(data: ChartData) -> bytes:
    """A PNG: remapped rows per node (left) and GPU capacity vs allocatable (right)."""
    fig = Figure(figsize=(13, 5.2), dpi=100)
    canvas = FigureCanvasAgg(fig)  # this figure's own renderer: nothing shared between threads
    rows_ax, gap_ax = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    more = f" (+{data.hidden} more in the attached list)" if data.hidden else ""
    fig.suptitle(f"GPU digest {data.day}: flagged nodes{more}", fontsize=13, fontweight="bold")
    colours = colormaps["tab10"]
    drew = False
    for i, f in enumerate(data.nodes):
        colour = colours(i % 10)
        for points, style, kind in (
            (data.correctable.get(f.node), "-", "correctable"),
            (data.uncorrectable.get(f.node), "--", "uncorrectable"),
        ):
            if not points or not any(v for _, v in points):
                continue
            times = [datetime.fromtimestamp(t, tz=UTC) for t, _ in points]
            rows_ax.plot(
                times,
                [v for _, v in points],
                style,
                color=colour,
                linewidth=2,
                marker="o",
                markersize=3,  # sparse history still shows as points
                label=f"{f.node} {kind}",
            )
            drew = True
    rows_ax.set_title("Remapped rows, last 7 days (solid: correctable, dashed: uncorrectable)", fontsize=10)
    rows_ax.set_ylabel("rows remapped (sum over the node's GPUs)")
    rows_ax.grid(alpha=0.3)
    rows_ax.xaxis.set_major_formatter(mdates.DateFormatter("%b %d"))
    if drew:
        rows_ax.legend(fontsize=8, loc="best")
    else:
        note = data.error or "no remapped rows on the flagged nodes"
        rows_ax.text(0.5, 0.5, note, ha="center", va="center", transform=rows_ax.transAxes, wrap=True)
        rows_ax.set_xticks([])

    gapped = [f for f in data.nodes if f.gaps]
    if gapped:
        labels = [f.node for f in gapped]
        ys = range(len(gapped))
        gap_ax.barh(ys, [f.capacity for f in gapped], color="#d9d9d9", label="capacity")
        gap_ax.barh(ys, [f.allocatable for f in gapped], color="#2b8cbe", label="allocatable")
        for y, f in zip(ys, gapped, strict=True):
            gap_ax.text(f.capacity, y, f"  {f.allocatable}/{f.capacity}", va="center", fontsize=9)
        gap_ax.set_yticks(list(ys), labels, fontsize=9)
        gap_ax.invert_yaxis()
        gap_ax.set_xlim(0, max(f.capacity for f in gapped) * 1.3)
        gap_ax.legend(fontsize=8, loc="lower right")
    else:
        gap_ax.text(0.5, 0.5, "no capacity gaps", ha="center", va="center", transform=gap_ax.transAxes)
        gap_ax.set_yticks([])
    gap_ax.set_title("GPU units: allocatable vs capacity", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    canvas.print_png(buf)
    return buf.getvalue()


def digest_chart(telemetry: Telemetry, digest: Digest, day: str | None = None) -> bytes | None:
    """The chart for a digest, or None when nothing is flagged (an all-clear needs no chart)."""
    if not digest.flagged:
        return None
    return render_chart(read_chart_data(telemetry, digest, day))
