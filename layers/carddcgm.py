"""Layer 5's memory-row and clock findings from DCGM: row-remap failures, remapped rows rising,
slowdown clock events.

Split from layers/card.py: the layer walks the node, this module judges DCGM's hardware counters.
"""

from __future__ import annotations

from collections.abc import Iterable

from layers.facts import gpufacts as gf
from layers.findings import Finding, finding

SLOWDOWN_EVENTS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")


def row_remaps(node: str, gpus: Iterable[gf.GpuFacts]) -> list[Finding]:
    out = []
    for g in gpus:
        if (g.row_remap_failure or 0) > 0:
            out.append(
                finding(
                    "L5_ROW_REMAP_FAILURE",
                    f"{g.label} on {node}: a row remap failed — no longer a software problem: drain the node and "
                    "replace the GPU (RMA)",
                    evidence=[
                        f"max_over_time(DCGM_FI_DEV_ROW_REMAP_FAILURE{g.matcher()}[24h]) = {g.row_remap_failure:g}"
                    ],
                    commands=[f"DCGM_FI_DEV_ROW_REMAP_FAILURE{g.matcher(with_gpu=False)} > 0"],
                    node=node,
                )
            )
        if (g.row_remap_pending or 0) > 0:
            out.append(
                finding(
                    "L5_ROW_REMAP_PENDING",
                    f"{g.label} on {node}: remapped memory rows wait for a GPU reset to take effect — drain the "
                    "node, then reset the GPU (nvidia-smi -r) or reboot it",
                    evidence=[f"DCGM_FI_DEV_ROW_REMAP_PENDING{g.matcher()} = {g.row_remap_pending:g}"],
                    commands=[f"DCGM_FI_DEV_ROW_REMAP_PENDING{g.matcher(with_gpu=False)} > 0"],
                    node=node,
                )
            )
        if g.rows_rising:
            evidence = []
            for kind, now, rise in (
                ("CORRECTABLE", g.correctable_rows, g.correctable_rows_24h),
                ("UNCORRECTABLE", g.uncorrectable_rows, g.uncorrectable_rows_24h),
            ):
                if rise is not None:
                    total = f"{now:g}" if now is not None else "?"
                    evidence.append(
                        f"DCGM_FI_DEV_{kind}_REMAPPED_ROWS{g.matcher()} = {total}, +{rise:.3g} in 24 h"
                    )
            m = g.matcher(with_gpu=False)
            out.append(
                finding(
                    "L5_REMAPPED_ROWS_RISING",
                    f"{g.label} on {node}: remapped memory rows rose in the last 24 h — the card's memory is "
                    "degrading; plan a drain and diagnostics (dcgmi diag) before it fails",
                    evidence=evidence,
                    commands=[
                        f"increase(DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{m}[24h]) > 0",
                        f"increase(DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS{m}[24h]) > 0",
                    ],
                    node=node,
                )
            )
    return out


def clock_events(node: str, gpus: list[gf.GpuFacts]) -> list[Finding]:
    evidence = [
        f"{g.label}: {name} peaked at {peak:g} in a window within 24 h"
        for g in gpus
        for name, peak in g.clock_events_24h.items()
        if name in SLOWDOWN_EVENTS
    ] + [
        f"{g.label}: {name} counted in the last 24 h (DCGM_EXP_CLOCK_EVENTS_TOTAL changed or first appeared)"
        for g in gpus
        for name in g.clock_totals_24h
        if name in SLOWDOWN_EVENTS
    ]
    if not evidence:
        return []
    names = sorted(
        {n for g in gpus for n in (*g.clock_events_24h, *g.clock_totals_24h) if n in SLOWDOWN_EVENTS}
    )
    m = gpus[0].matcher(with_gpu=False)[:-1]
    sep = "," if len(m) > 1 else ""
    return [
        finding(
            "L5_CLOCK_EVENTS",
            f"GPUs on {node} were slowed down by {', '.join(names)}: check cooling, power delivery and the "
            "board (thermal or power-brake slowdown throttles every job on the GPU)",
            evidence=evidence,
            commands=[
                f'max_over_time(DCGM_EXP_CLOCK_EVENTS_COUNT{m}{sep}clock_event=~"(?i)(hw_slowdown|sw_thermal|hw_thermal|hw_power_brake).*"}}[24h]) > 0'
            ],
            node=node,
        )
    ]
