"""`/gpu node`'s picture: one row per GPU (and one for the node), its events over the days shown.

Xids are red (fatal, by the catalog) or orange, remapped rows and remap flags purple, unhealthy
marks black, diagnostics green or red, cordons and uncordons grey on the node's row. A bare
`Figure` on its own Agg canvas, never pyplot (bot/slack/chart.py says why).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

import matplotlib.dates as mdates
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from layers.ledger_rules import is_fatal_xid

_STYLE = {
    "remapped_rows": ("#7b3fa0", "s"),
    "row_remap_failure": ("#7b3fa0", "X"),
    "unhealthy": ("#222222", "v"),
    "cordon": ("#888888", "|"),
    "uncordon": ("#bbbbbb", "|"),
    "bundle": ("#1f77b4", "d"),
}


def _style(ev: dict[str, Any]) -> tuple[str, str]:
    if ev["kind"] == "xid":
        return ("#d62728" if ev["xid"] is not None and is_fatal_xid(int(ev["xid"])) else "#ff7f0e"), "o"
    if ev["kind"] == "diag":
        return ("#2ca02c" if str(ev["detail"]).endswith("Pass") else "#d62728"), "P"
    return _STYLE.get(ev["kind"], ("#555555", "."))


def _when(iso: str) -> float:
    """Matplotlib's date number of an ISO time (the axis is a date axis)."""
    return float(mdates.date2num(datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)))


def timeline_png(ledger: dict[str, Any], now: float) -> bytes | None:
    """The PNG, or None when there is nothing to draw (no event in the days shown)."""
    rows: list[tuple[str, list[dict[str, Any]]]] = []
    if ledger["events"]:
        rows.append(("node", ledger["events"]))
    for g in ledger["gpus"]:
        if g["events"]:
            label = f"GPU {g['index']}" if g["index"] is not None else g["uuid"][:12]
            rows.append((label, g["events"]))
    if not rows:
        return None
    fig = Figure(figsize=(8, 0.45 * len(rows) + 1.2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    for y, (_, events) in enumerate(rows):
        for ev in events:
            colour, marker = _style(ev)
            ax.plot([_when(ev["at"])], [y], marker=marker, color=colour, markersize=8, linestyle="none")
            if ev["kind"] == "xid" and ev["xid"] is not None:
                ax.annotate(
                    str(ev["xid"]),
                    (_when(ev["at"]), y),
                    textcoords="offset points",
                    xytext=(0, 6),
                    fontsize=7,
                    ha="center",
                )
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.set_ylim(-0.7, len(rows) - 0.3)
    start = mdates.date2num(datetime.fromtimestamp(now - ledger["days"] * 86400, tz=UTC))
    ax.set_xlim(float(start), float(mdates.date2num(datetime.fromtimestamp(now, tz=UTC))))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d"))
    ax.grid(axis="x", alpha=0.3)
    ax.set_title(f"{ledger['node']}: {ledger['days']} days", fontsize=10)
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()
