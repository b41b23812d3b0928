"""Writing a scenario back out (a test helper: tests round-trip scenarios through it; bundles write theirs in bot/actions/bundle_yaml.py).

Readable YAML: logs as literal blocks, each sample as a one-line [time, value]
pair relative to `now`, each series' labels on one line.
"""

from __future__ import annotations

import math
from typing import Any

import yaml

from bot.sources.scenario_model import Scenario, rfc3339

_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Flow(list):  # type: ignore[type-arg]
    """A list written on one line: a [time, value] pair, or a series' labels."""


class _FlowMap(dict):  # type: ignore[type-arg]
    pass


def _plain(x: float) -> int | float | str:
    if not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("+Inf" if x > 0 else "-Inf")
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


def scenario_to_dict(s: Scenario) -> dict[str, Any]:
    """The scenario as a YAML-ready mapping; sample times relative to `now`."""
    out: dict[str, Any] = {"kind": "Scenario", "name": s.name}
    if s.description:
        out["description"] = s.description
    out["now"] = rfc3339(s.now)
    out["objects"] = s.objects
    out["logs"] = s.logs
    out["metrics"] = [
        {
            "metric": _FlowMap(series.labels),
            "values": _Flow(_Flow([_plain(round(t - s.now, 3)), _plain(v)]) for t, v in series.points),
        }
        for series in s.series
    ]
    out.update(s.extra)
    return out


class _Dumper(_BaseDumper):  # type: ignore[misc, valid-type]
    pass


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    # Logs read best as literal blocks; PyYAML falls back to quoting when a block cannot hold the text.
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_Dumper.add_representer(
    _FlowMap, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True)
)


def dump_scenario(s: Scenario) -> str:
    return str(yaml.dump(scenario_to_dict(s), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))
