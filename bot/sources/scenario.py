"""Scenario files: a cluster frozen in one file (see spec/scenario.md).

Every mistake in a scenario is reported as one ScenarioError line naming the
file, the key path and what was expected, never a traceback: scenarios are
written by hand and pasted from customers' clusters.
"""

from __future__ import annotations

import gc
import json
import math
import pickle
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import yaml

from bot.sources.exposition import ExpositionError, parse_exposition
from bot.sources.series import SeriesData, SeriesTelemetry, prom_labels  # SeriesData is part of this API
from bot.sources.snapshot import SnapshotCluster

# Writing a scenario back out is bot/sources/scenario_write.py (it imports this module, never the reverse).
__all__ = [
    "Scenario",
    "ScenarioError",
    "SeriesData",
    "build_sources",
    "load_scenario",
    "parse_scenario",
    "rfc3339",
]

TOP_LEVEL_KEYS = ("kind", "name", "description", "now", "objects", "logs", "metrics", "exposition")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
_LOG_KEY = re.compile(r"[^/#\s]+/[^/#\s]+/[^/#\s]+(#previous)?\Z")
_ABSOLUTE_SECONDS = 1e9  # numbers above this are Unix seconds, at or below 0 are relative to `now`
_TIME_EXPECTED = "expected seconds relative to now (<= 0), Unix seconds (> 1e9) or an RFC 3339 time"

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe YAML that leaves timestamps as text, as the Kubernetes JSON API has them."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }


class ScenarioError(Exception):
    """One line: `<file>: <key path>: <what was expected>`."""

    def __init__(self, source: str, key_path: str, message: str) -> None:
        super().__init__(": ".join(p for p in (source, key_path, message) if p))
        self.source = source
        self.key_path = key_path
        self.message = message


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    now: float  # unix seconds
    objects: list[dict[str, Any]]
    logs: dict[str, str]
    series: list[SeriesData]
    path: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the `x-` keys, kept as written


def rfc3339(t: float) -> str:
    dt = datetime.fromtimestamp(t, tz=UTC)
    text = dt.isoformat(timespec="milliseconds" if t % 1 else "seconds")
    return text.replace("+00:00", "Z")


# --- reading ---------------------------------------------------------------------

# A scenario this large (objects + series) is a fleet: read-only data kept for the life of the process.
FLEET_SIZE = 20_000


@contextmanager
def _fleet_sized_data() -> Iterator[list[int]]:
    """Keep the cyclic garbage collector off while a scenario's millions of containers are built.

    The collector would re-scan everything built so far again and again (9 s of a 13 s
    load at 5,000 nodes), and the first collection afterwards would scan it all once more,
    inside the first walk. Scenario data is acyclic, so reference counting frees it anyway:
    a fleet-sized scenario is frozen (exempt from future scans) rather than scanned.
    The caller appends the size it built to the yielded list.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    size: list[int] = []
    try:
        yield size
    finally:
        if sum(size) >= FLEET_SIZE:
            gc.freeze()
        if was_enabled:
            gc.enable()


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _SharedStrings:
    """JSON object hook: one copy of each repeated string value.

    A fleet repeats the same values hundreds of thousands of times (model names,
    metric names, namespaces, phases); sharing them cuts a 5,000-node scenario's
    peak from ~480 to ~360 MB at no cost in decode time.
    """

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}

    def __call__(self, obj: dict[str, Any]) -> dict[str, Any]:
        seen = self._seen
        for key, value in obj.items():
            if type(value) is str:
                obj[key] = seen.setdefault(value, value)
        return obj


def _read_text(text: str, source: str) -> object:
    json_first = source.endswith(".json") or text.lstrip().startswith("{")
    if json_first:
        try:
            return json.loads(text, object_hook=_SharedStrings())
        except json.JSONDecodeError as e:
            if source.endswith(".json"):
                raise ScenarioError(source, "", f"JSON syntax error at line {e.lineno}: {e.msg}") from None
            # `{kind: Scenario, ...}` is YAML flow style, not JSON: let YAML judge it.
    try:
        return yaml.load(text, Loader=_Loader)  # _Loader is a SafeLoader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" at line {mark.line + 1}" if mark else ""
        raise ScenarioError(source, "", f"YAML syntax error{where}: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ScenarioError(source, "", f"YAML error: {e}") from None


def load_scenario(path: str | Path) -> Scenario:
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(source, "", "cannot read the file: not UTF-8 text") from None
    except OSError as e:
        raise ScenarioError(source, "", f"cannot read the file: {e.strerror or e}") from None
    with _fleet_sized_data() as size:
        data = _read_text(text, source)
        del text  # 84 MB at 5,000 nodes: not needed once decoded
        scenario = parse_scenario(data, source, consume=True)
        size.append(len(scenario.objects) + len(scenario.series))
    return scenario


def _parse_datetime(value: object) -> float | None:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str) and len(value.strip()) > 10:
        try:
            dt = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    # Kubernetes times are UTC; a time written without an offset is read as UTC.
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _parse_now(value: object, source: str) -> float:
    t = _parse_datetime(value)
    if t is None:
        n = _number(value)
        t = n if n is not None and math.isfinite(n) and n > _ABSOLUTE_SECONDS else None
    if t is None:
        raise ScenarioError(
            source, "now", f"expected an RFC 3339 time or Unix seconds (> 1e9), got {_show(value)}"
        )
    return t


def _parse_time(value: object, now: float, source: str, path: str) -> float:
    n = _number(value)
    if n is not None and math.isfinite(n):
        if n <= 0:
            return now + n
        if n > _ABSOLUTE_SECONDS:
            return n
    elif (t := _parse_datetime(value)) is not None:
        return t
    raise ScenarioError(source, path, f"{_TIME_EXPECTED}, got {_show(value)}")


def _objects(raw: object, source: str, path: str, out: list[dict[str, Any]]) -> None:
    if not isinstance(raw, list):
        raise ScenarioError(source, path, f"expected a list of Kubernetes objects, got {_show(raw)}")
    for i, obj in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(obj, dict):
            raise ScenarioError(source, where, f"expected a Kubernetes object (a mapping), got {_show(obj)}")
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ScenarioError(source, where, "expected a `kind` (e.g. Node, Pod, Event)")
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            # A pasted `kubectl get ... -o yaml`: its items are the objects.
            _objects(obj.get("items") or [], source, f"{where}.items", out)
            continue
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise ScenarioError(source, f"{where}.metadata.name", f"expected the {kind}'s name")
        for field_name in ("labels", "annotations"):
            _as_api_strings(meta, field_name, source, f"{where}.metadata.{field_name}")
        if kind not in _CLUSTER_SCOPED and not meta.get("namespace"):
            meta["namespace"] = "default"  # as the API server files a namespaced object given none
        _check_shape(obj, _SHAPES.get(kind, _ANY_OBJECT), source, where)
        out.append(obj)


_CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "Namespace",
        "ClusterPolicy",
        "NVIDIADriver",
        "RuntimeClass",
        "PersistentVolume",
        "StorageClass",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
    }
)

# The shapes the layers read, by kind: a mapping names its fields' shapes, a
# one-element list means "a list of these", `dict` any mapping. A field that is
# absent is fine (real objects omit empty fields); one of the wrong shape is an
# error naming its key path, not a crash three layers later.
_STATE = {"waiting": dict, "running": dict, "terminated": dict}
_CONTAINER_STATUS = {"state": _STATE, "lastState": _STATE}
_CONTAINER = {"resources": {"limits": dict, "requests": dict}, "env": [dict], "command": list, "args": list}
_ANY_OBJECT: dict[str, Any] = {"spec": dict, "status": dict}
_SHAPES: dict[str, dict[str, Any]] = {
    "Pod": {
        "spec": {
            "containers": [_CONTAINER],
            "initContainers": [_CONTAINER],
            "ephemeralContainers": [_CONTAINER],
            "tolerations": [dict],
            "nodeSelector": dict,
            "affinity": dict,
        },
        "status": {
            "conditions": [dict],
            "containerStatuses": [_CONTAINER_STATUS],
            "initContainerStatuses": [_CONTAINER_STATUS],
            "ephemeralContainerStatuses": [_CONTAINER_STATUS],
        },
    },
    "Node": {
        "spec": {"taints": [dict]},
        "status": {"capacity": dict, "allocatable": dict, "conditions": [dict], "nodeInfo": dict},
    },
    "Event": {"involvedObject": dict},
}


def _check_shape(value: Any, shape: Any, source: str, path: str) -> None:
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            raise ScenarioError(source, path, f"expected a mapping, got {_show(value)}")
        for key, inner in shape.items():
            if value.get(key) is not None:
                _check_shape(value[key], inner, source, f"{path}.{key}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise ScenarioError(source, path, f"expected a list, got {_show(value)}")
        for i, item in enumerate(value):
            _check_shape(item, shape[0], source, f"{path}[{i}]")
    elif not isinstance(value, shape):
        what = "a mapping" if shape is dict else "a list"
        raise ScenarioError(source, path, f"expected {what}, got {_show(value)}")


def _as_api_strings(meta: dict[str, Any], field_name: str, source: str, path: str) -> None:
    """Label and annotation values are strings in the API; hand-written YAML says `true` or `8`."""
    values = meta.get(field_name)
    if values is None:
        return
    if not isinstance(values, dict):
        raise ScenarioError(source, path, f"expected a mapping of strings, got {_show(values)}")
    for key, value in values.items():
        if isinstance(value, str):
            continue
        if isinstance(value, bool):
            values[key] = "true" if value else "false"
        elif isinstance(value, int | float) or value is None:
            values[key] = "" if value is None else str(value)
        else:
            raise ScenarioError(source, f"{path}[{key!r}]", f"expected a string, got {_show(value)}")


def _logs(raw: object, source: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ScenarioError(
            source, "logs", f'expected a mapping "namespace/pod/container" -> text, got {_show(raw)}'
        )
    for key, text in raw.items():
        if not isinstance(key, str) or not _LOG_KEY.match(key):
            raise ScenarioError(
                source, f"logs[{key!r}]", 'expected a key "namespace/pod/container" (or "...#previous")'
            )
        if not isinstance(text, str):
            raise ScenarioError(source, f"logs[{key!r}]", f"expected the log text, got {_show(text)}")
    return raw


def _labels(
    raw: object, source: str, path: str, checked: set[str], strings: dict[str, str]
) -> dict[str, str]:
    """`checked`: label names already found valid; they repeat across a fleet's series.
    `strings`: one copy of each label value (a node's name is in 48 series of a fleet)."""
    if not isinstance(raw, dict):
        raise ScenarioError(source, path, f"expected a label mapping with __name__, got {_show(raw)}")
    labels: dict[str, str] = {}
    for name, value in raw.items():
        if name not in checked:
            if not isinstance(name, str) or not _LABEL_NAME.match(name):
                raise ScenarioError(source, path, f"invalid label name {_show(name)}")
            checked.add(name)
        if type(value) is not str:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ScenarioError(
                    source, f"{path}.{name}", f"expected a string label value, got {_show(value)}"
                )
            value = str(value)  # `gpu: 3` written unquoted
        if value != "":  # Prometheus: an empty label value is no label
            labels[name] = strings.setdefault(value, value)
    metric = labels.get("__name__")
    if not metric:
        raise ScenarioError(source, path, "expected `__name__` (the metric name)")
    if not _METRIC_NAME.match(metric):
        raise ScenarioError(source, f"{path}.__name__", f"invalid metric name {metric!r}")
    return labels


def _point(pair: object, now: float, source: str, where: str) -> tuple[float, float]:
    if not isinstance(pair, list) or len(pair) != 2:
        raise ScenarioError(source, where, f"expected [time, value], got {_show(pair)}")
    t = _parse_time(pair[0], now, source, f"{where}[0]")
    v = _number(pair[1])
    if v is None:
        raise ScenarioError(source, f"{where}[1]", f"expected a number, got {_show(pair[1])}")
    return t, v


def _points(raw: object, now: float, source: str, path: str) -> list[tuple[float, float]]:
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(source, path, f"expected a list of [time, value], got {_show(raw)}")
    points: list[tuple[float, float]] = []
    last = -math.inf
    latest = now + 0.0005  # sub-millisecond slack: Prometheus keeps milliseconds
    for j, pair in enumerate(raw):
        # Fast path for the common [relative seconds, number]: a 40,000-series scenario loads in a blink.
        if (
            type(pair) is list
            and len(pair) == 2
            and type(pair[1]) in (int, float)
            and type(pair[0]) in (int, float)
        ):
            t0 = pair[0]
            t = now + t0 if t0 <= 0 else (t0 if t0 > _ABSOLUTE_SECONDS else math.nan)
            v = float(pair[1])
            if not math.isfinite(t):  # between 0 and 1e9, or not finite: the slow path explains it
                t, v = _point(pair, now, source, f"{path}[{j}]")
        else:
            t, v = _point(pair, now, source, f"{path}[{j}]")
        if not t <= latest or t <= last:
            where = f"{path}[{j}]"
            if t > latest:
                raise ScenarioError(source, where, f"time {rfc3339(t)} is after now ({rfc3339(now)})")
            raise ScenarioError(
                source, where, f"times must increase: {rfc3339(t)} is not after {rfc3339(last)}"
            )
        points.append((t, v))
        last = t
    return points


def _metrics(raw: object, now: float, source: str, consume: bool = False) -> list[SeriesData]:
    """`consume`: the list is the caller's to spend; each entry is dropped once read (peak memory)."""
    if not isinstance(raw, list):
        raise ScenarioError(
            source, "metrics", f"expected a list of {{metric: ..., values: ...}}, got {_show(raw)}"
        )
    series: list[SeriesData] = []
    seen: dict[int, int] = {}  # hash of a label set -> the first entry with it
    collided: dict[frozenset[tuple[str, str]], int] = {}
    checked: set[str] = set()
    strings: dict[str, str] = {}
    for i, entry in enumerate(raw):
        where = f"metrics[{i}]"
        if not isinstance(entry, dict):
            raise ScenarioError(source, where, f"expected {{metric: ..., values: ...}}, got {_show(entry)}")
        unknown = sorted(set(map(str, entry)) - {"metric", "values", "value"})
        if unknown:
            raise ScenarioError(source, f"{where}.{unknown[0]}", "unknown key (expected metric and values)")
        labels = _labels(entry.get("metric"), source, f"{where}.metric", checked, strings)
        if "value" in entry:  # a pasted Prometheus instant-query result
            points = _points([entry["value"]], now, source, f"{where}.value")
        else:
            points = _points(entry.get("values"), now, source, f"{where}.values")
        # Keyed by the label set's hash (an int) rather than the set itself: a fleet has
        # 240,000 series, and their frozensets alone would take ~250 MB at the peak.
        key = frozenset(labels.items())
        first = seen.setdefault(hash(key), i)
        if first != i:
            if series[first].labels == labels:
                first_seen: int | None = first
            else:  # two label sets with one hash: rare enough to keep the sets themselves
                first_seen = collided.setdefault(key, i)
                first_seen = None if first_seen == i else first_seen
            if first_seen is not None:
                raise ScenarioError(
                    source, where, f"same labels as metrics[{first_seen}]: expected one entry per series"
                )
        series.append(SeriesData(labels, points))  # series[i] is metrics[i]
        if consume:
            raw[i] = None
    return series


def _add_exposition(raw: object, now: float, source: str, series: list[SeriesData]) -> None:
    if not isinstance(raw, str):
        raise ScenarioError(source, "exposition", f"expected /metrics text, got {_show(raw)}")
    try:
        samples = parse_exposition(raw)
    except ExpositionError as e:
        raise ScenarioError(source, "exposition", str(e)) from None
    by_labels = {frozenset(s.labels.items()): s for s in series}
    for labels, value in samples:
        labels = prom_labels(labels)
        key = frozenset(labels.items())
        existing = by_labels.get(key)
        if existing is None:
            by_labels[key] = new = SeriesData(labels, [(now, value)])
            series.append(new)
        elif existing.points[-1][0] < now:
            existing.points.append((now, value))
        else:
            raise ScenarioError(
                source, "exposition", f"{labels['__name__']}{_show(labels)}: a second sample at now"
            )


def parse_scenario(
    data: object, source: str, now_default: float | None = None, *, consume: bool = False
) -> Scenario:
    """`consume`: `data` was decoded for this call only; its metric entries are freed as they are read."""
    if not isinstance(data, dict):
        raise ScenarioError(
            source, "", f"expected a mapping with `kind: Scenario` at the top, got {_show(data)}"
        )
    if data.get("kind") != "Scenario":
        got = f", got {_show(data['kind'])}" if "kind" in data else ""
        raise ScenarioError(source, "kind", f"expected `kind: Scenario`{got}")
    extra: dict[str, Any] = {}
    for key in data:
        if isinstance(key, str) and key.startswith("x-"):
            extra[key] = data[key]
        elif key not in TOP_LEVEL_KEYS:
            raise ScenarioError(
                source, str(key), f"unknown key (expected one of {', '.join(TOP_LEVEL_KEYS)} or x-...)"
            )
    for key in ("name", "description"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise ScenarioError(source, key, f"expected text, got {_show(data[key])}")
    if data.get("now") is not None:
        now = _parse_now(data["now"], source)
    else:
        now = now_default if now_default is not None else float(int(time.time()))
    objects: list[dict[str, Any]] = []
    if data.get("objects") is not None:
        _objects(data["objects"], source, "objects", objects)
    logs = _logs(data["logs"], source) if data.get("logs") is not None else {}
    series = _metrics(data["metrics"], now, source, consume) if data.get("metrics") is not None else []
    if data.get("exposition") is not None:
        _add_exposition(data["exposition"], now, source, series)
    path = None if source.startswith("<") else source
    return Scenario(
        name=data.get("name") or Path(source).stem,
        description=data.get("description") or "",
        now=now,
        objects=objects,
        logs=dict(logs),
        series=series,
        path=path,
        extra=extra,
    )


def _own_copy(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies the snapshot may change: nodes whole (a cordon patches them), every other
    object at its top and `metadata` (the snapshot stamps a resourceVersion there).
    Nothing writes deeper into a pod or an event, and a fleet's 30,000 pods copied
    whole would cost ~100 MB and half a second."""
    nodes = [o for o in objects if o.get("kind") == "Node"]
    whole = iter(pickle.loads(pickle.dumps(nodes, protocol=pickle.HIGHEST_PROTOCOL)))
    out: list[dict[str, Any]] = []
    for obj in objects:
        if obj.get("kind") == "Node":
            out.append(next(whole))
        else:
            top = dict(obj)
            if isinstance(top.get("metadata"), dict):
                top["metadata"] = dict(top["metadata"])
            out.append(top)
    return out


def build_sources(s: Scenario) -> tuple[SnapshotCluster, SeriesTelemetry]:
    """A cluster and telemetry over the scenario. The cluster gets its own copy of the
    objects (see _own_copy), so a cordon tried against it does not change the scenario."""
    with _fleet_sized_data() as size:
        size.append(len(s.objects) + len(s.series))
        objects = _own_copy(s.objects)
        source = f"scenario {s.name}"
        cluster = SnapshotCluster(objects, s.logs, source=source)
        telemetry = SeriesTelemetry(s.series, s.now, source=source)
    return cluster, telemetry
