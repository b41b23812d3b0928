"""Changes to a scenario that must not change its diagnosis, and a few that must (issue 18, "a
metamorphic suite"). Each is a small pure function from one scenario dict to another: the input is
never modified. A change that has nothing to act on (no operator namespace to move, no series to
relabel) returns an equal scenario, and its case passes trivially."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

Scenario = dict[str, Any]
WEEKS = timedelta(weeks=-3)


def _objects(s: Scenario) -> list[dict[str, Any]]:
    return [o for o in s.get("objects") or [] if isinstance(o, dict)]


def _kind(s: Scenario, kind: str) -> list[dict[str, Any]]:
    out = []
    for o in _objects(s):
        if o.get("kind") == kind:
            out.append(o)
        elif o.get("kind") == "List":
            out += [i for i in o.get("items") or [] if isinstance(i, dict) and i.get("kind") == kind]
    return out


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    meta = o.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _as_text(s: Scenario, edit: Callable[[str], str]) -> Scenario:
    return json.loads(edit(json.dumps(s)))


# --- order -----------------------------------------------------------------------------------------


def reorder_objects(s: Scenario) -> Scenario:
    """The API lists objects in no promised order."""
    out = copy.deepcopy(s)
    out["objects"] = list(reversed(out.get("objects") or []))
    return out


def reorder_series(s: Scenario) -> Scenario:
    """Prometheus returns series in no promised order; labels come in any order too."""
    out = copy.deepcopy(s)
    if isinstance(out.get("metrics"), list):
        out["metrics"] = [
            {**m, "metric": dict(reversed(list((m.get("metric") or {}).items())))}
            if isinstance(m, dict)
            else m
            for m in reversed(out["metrics"])
        ]
    return out


# --- names -----------------------------------------------------------------------------------------


def _cloud_name(i: int) -> str:
    return f"ip-10-{20 + i // 200}-{i % 200}-{(i * 37) % 250 + 3}.us-west-2.compute.internal"


def node_names_cloud_style(s: Scenario) -> Scenario:
    """Every node renamed as EKS names them (dots included), consistently everywhere the name is
    written: names, hostname labels, nodeName, events, logs, series labels, exposition, slices."""
    names = sorted({str(_meta(n).get("name")) for n in _kind(s, "Node") if _meta(n).get("name")}, key=len)
    mapping = {n: _cloud_name(i) for i, n in enumerate(sorted(names))}
    if not mapping:
        return copy.deepcopy(s)
    # Longest first, whole names only (not inside another name: `gpu-7` is not `gpu-70`, nor
    # `nvidia-driver-daemonset-gpu-7`); a sentence's full stop may follow.
    alternation = "|".join(re.escape(n) for n in sorted(mapping, key=len, reverse=True))
    pattern = re.compile(rf"(?<![A-Za-z0-9.\-_])(?:{alternation})(?![A-Za-z0-9\-_]|\.[A-Za-z0-9])")
    return _as_text(s, lambda text: pattern.sub(lambda m: mapping[m.group(0)], text))


def exporter_hostname_lowercase(s: Scenario) -> Scenario:
    """dcgm-exporter's `Hostname` label spelled `hostname` (relabelled by some Prometheus set-ups)."""
    out = copy.deepcopy(s)
    for m in out.get("metrics") or []:
        labels = m.get("metric") if isinstance(m, dict) else None
        if isinstance(labels, dict) and "Hostname" in labels and "hostname" not in labels:
            labels["hostname"] = labels.pop("Hostname")
    if isinstance(out.get("exposition"), str):
        out["exposition"] = re.sub(r"(?<=[{,])Hostname=", "hostname=", out["exposition"])
    return out


# --- operator namespace -------------------------------------------------------------------------------

OPERATOR_NS, MOVED_NS = "gpu-operator", "nvidia-gpu-operator"


def operator_other_namespace(s: Scenario) -> Scenario:
    """The operator and its operands in `nvidia-gpu-operator` (OpenShift's), not `gpu-operator`: every
    object, event and log key of the namespace moves; GPUBOT_OPERATOR_NAMESPACE stays unset."""
    out = copy.deepcopy(s)
    if any(_meta(o).get("namespace") == MOVED_NS for o in _objects(out)):
        return out
    listed = [i for lst in _objects(out) for i in lst.get("items") or [] if isinstance(i, dict)]
    for o in _objects(out) + listed:
        meta = _meta(o)
        if meta.get("namespace") == OPERATOR_NS:
            meta["namespace"] = MOVED_NS
        inv = o.get("involvedObject")
        if isinstance(inv, dict) and inv.get("namespace") == OPERATOR_NS:
            inv["namespace"] = MOVED_NS
        if o.get("kind") == "Namespace" and meta.get("name") == OPERATOR_NS:
            meta["name"] = MOVED_NS
        status = o.get("status")
        if (
            o.get("kind") == "ClusterPolicy"
            and isinstance(status, dict)
            and status.get("namespace") == OPERATOR_NS
        ):
            status["namespace"] = MOVED_NS  # the operator writes its own namespace there
    logs = out.get("logs")
    if isinstance(logs, dict):
        out["logs"] = {
            (MOVED_NS + k[len(OPERATOR_NS) :] if k.startswith(OPERATOR_NS + "/") else k): v
            for k, v in logs.items()
        }
    for m in out.get("metrics") or []:
        labels = m.get("metric") if isinstance(m, dict) else None
        for key in ("namespace", "exported_namespace", "kubernetes_namespace"):
            if isinstance(labels, dict) and labels.get(key) == OPERATOR_NS:
                labels[key] = MOVED_NS
    if isinstance(out.get("exposition"), str):
        out["exposition"] = out["exposition"].replace(f'namespace="{OPERATOR_NS}"', f'namespace="{MOVED_NS}"')
    target = (out.get("x-expect") or {}).get("target")
    if isinstance(target, str) and target.startswith(OPERATOR_NS + "/"):
        out["x-expect"]["target"] = MOVED_NS + target[len(OPERATOR_NS) :]
    return out


# --- time ----------------------------------------------------------------------------------------------

_RFC3339 = re.compile(r"\b(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})")
_KLOG = re.compile(r"(?<![A-Za-z0-9])([IWEF])(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6})")
_GOLOG = re.compile(r"\b(\d{4})/(\d{2})/(\d{2}) (\d{2}:\d{2}:\d{2})")
_CTIME = re.compile(
    r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(\d{1,2}) "
    r"(\d{2}:\d{2}:\d{2}) (\d{4})"
)


def _shift_rfc3339(m: re.Match[str]) -> str:
    frac, zone = m.group(3) or "", m.group(4)
    t = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}{'+00:00' if zone == 'Z' else zone}") + WEEKS
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + (zone if zone != "Z" else "Z")


def _now_year(s: Scenario) -> int:
    now = s.get("now")
    if isinstance(now, str):
        m = _RFC3339.search(now)
        if m:
            return int(m.group(1)[:4])
    return 2026


def timestamps_weeks_earlier(s: Scenario) -> Scenario:
    """Every instant three weeks earlier: `now`, objects' and events' timestamps, series' absolute
    times, and the log lines' own (klog `I1129 11:58:05.486697`, Go's `2026/11/29 11:58:05`, ctime)."""
    year = _now_year(s)

    def klog(m: re.Match[str]) -> str:
        t = datetime(year, int(m.group(2)), int(m.group(3)), tzinfo=UTC) + WEEKS
        return f"{m.group(1)}{t:%m%d} {m.group(4)}"

    def golog(m: re.Match[str]) -> str:
        t = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), tzinfo=UTC) + WEEKS
        return f"{t:%Y/%m/%d} {m.group(4)}"

    def ctime(m: re.Match[str]) -> str:
        t = (
            datetime.strptime(f"{m.group(2)} {m.group(3)} {m.group(5)} {m.group(4)}", "%b %d %Y %H:%M:%S")
            + WEEKS
        )
        return f"{t:%a %b} {t.day:2d} {m.group(4)} {t.year}"

    out = _as_text(s, lambda text: _RFC3339.sub(_shift_rfc3339, text))
    logs = out.get("logs")
    if isinstance(logs, dict):
        out["logs"] = {k: _CTIME.sub(ctime, _GOLOG.sub(golog, _KLOG.sub(klog, v))) if isinstance(v, str) else v
                       for k, v in logs.items()}  # fmt: skip
    if isinstance(out.get("now"), int | float) and not isinstance(out.get("now"), bool):
        out["now"] = out["now"] + WEEKS.total_seconds()
    for m in out.get("metrics") or []:
        for sample in (m.get("values") or []) if isinstance(m, dict) else []:
            if isinstance(sample, list) and sample and isinstance(sample[0], int | float) and sample[0] > 1e9:
                sample[0] = sample[0] + WEEKS.total_seconds()
    return out
