"""Series → an OpenMetrics text file for `promtool tsdb create-blocks-from openmetrics`.

This is how a real Prometheus is loaded with a scenario's history, so the
PromQL adapter can be tested on the same data as the in-memory telemetry.
The backfill reader is strict: timestamps in seconds (milliseconds are taken
silently and land far in the future), each family's samples together under
one `# TYPE`, and a final `# EOF`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TextIO

from bot.sources.series import SeriesData, prom_labels


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x))


def _timestamp(t: float) -> str:
    # Whole milliseconds, as Prometheus stores them; written as seconds.
    ms = round(t * 1000)
    seconds, frac = divmod(ms, 1000)
    return f"{seconds}.{frac:03d}" if frac else str(seconds)


def write_openmetrics(series: Iterable[SeriesData], out: TextIO) -> None:
    """Writes every series as a `gauge` family.

    Every family is typed gauge: PromQL's functions ignore the type, and an
    OpenMetrics counter would require renaming samples to `<family>_total`.
    """
    families: dict[str, list[SeriesData]] = {}
    for s in series:
        families.setdefault(s.labels["__name__"], []).append(s)
    for name, members in families.items():
        out.write(f"# TYPE {name} gauge\n")
        for s in members:
            labels = prom_labels(s.labels)
            pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items() if k != "__name__")
            head = f"{name}{{{pairs}}}" if pairs else name
            for t, v in s.points:
                out.write(f"{head} {_number(v)} {_timestamp(t)}\n")
    out.write("# EOF\n")
