"""Scenario files: a cluster frozen in one file (see spec/scenario.md).

Every mistake in a scenario is reported as one ScenarioError line naming the
file, the key path and what was expected, never a traceback: scenarios are
written by hand and pasted from customers' clusters.
"""

from __future__ import annotations

import gc
import json
import mmap
import os
import pickle
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import yaml

from bot.sources.bounded import TooDeep, check_yaml_depth, deep_message
from bot.sources.scenario_model import Scenario, ScenarioError, parse_now, rfc3339, show
from bot.sources.scenario_series import add_exposition, read_metrics
from bot.sources.scenario_shape import check_logs, check_objects
from bot.sources.series import SeriesData, SeriesTelemetry  # SeriesData is part of this API
from bot.sources.snapshot import SnapshotCluster
from bot.sources.streams import read_capped

# Scenario, ScenarioError and rfc3339 live in bot/sources/scenario_model.py (writing shares them); re-exported.
__all__ = [
    "Scenario",
    "ScenarioError",
    "SeriesData",
    "build_sources",
    "decode_scenario",
    "load_scenario",
    "parse_scenario",
    "rfc3339",
]

TOP_LEVEL_KEYS = ("kind", "name", "description", "now", "objects", "logs", "metrics", "exposition")

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe YAML that leaves timestamps as text, as the Kubernetes JSON API has them."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, re.Pattern[str]]]]] = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
    }


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


def _size(s: Scenario) -> int:
    """Objects and series; a ResourceSlice's devices count as objects (a 2,000-node DRA fleet
    is 2,000 slices of 16,000 devices)."""
    devices = 0
    for o in s.objects:
        spec = o.get("spec") if o.get("kind") == "ResourceSlice" else None
        found = spec.get("devices") if isinstance(spec, dict) else None
        devices += len(found) if isinstance(found, list) else 0
    return len(s.objects) + len(s.series) + devices


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


def _decode_json_fast(buf: bytes | mmap.mmap, pages: _Pages | None) -> dict[str, Any] | None:
    """A JSON scenario decoded by msgspec, the metric entries left as JSON text.

    None when the file is not a well-formed scenario mapping: the standard decoder then
    reads it again and reports the mistake exactly (line, key path).
    """
    try:
        top = msgspec.json.decode(buf, type=dict[str, msgspec.Raw])
        data: dict[str, Any] = {}
        for key, raw in top.items():
            if key == "metrics":  # each entry is decoded when read (read_metrics)
                data[key] = msgspec.json.decode(raw, type=list[msgspec.Raw] | None)
            else:
                data[key] = msgspec.json.decode(raw)
            if pages is not None:
                pages.release()
        return data
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


# Past this size a JSON scenario is mapped rather than read (a fleet: 70 MB at 2,000 nodes).
MAP_BYTES = 16 * 2**20


class _Pages:
    """A fleet-sized file mapped read-only: its text is decoded in place and the series'
    points stay there, as views, until a query reads them. `release` hands the pages read so
    far back to the page cache, so the file's text and the decoded objects are never resident
    together; a page read again is mapped again from the cache.

    The mapping lives as long as a series that has not been read: a fleet file truncated
    under a running gpubot would fault (SIGBUS) there, so only files past MAP_BYTES are
    mapped (bundled scenarios, bundles and hand-written files are read whole)."""

    def __init__(self, mapped: mmap.mmap) -> None:
        self.mapped = mapped

    def release(self) -> None:
        if hasattr(mmap, "MADV_DONTNEED"):
            self.mapped.madvise(mmap.MADV_DONTNEED)


def _read_buffer(path: str | Path) -> tuple[bytes | mmap.mmap, _Pages | None]:
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size >= MAP_BYTES:
            try:
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError):  # not mappable (a pipe, a special file): read it
                pass
            else:
                return mapped, _Pages(mapped)
        return (f.read() if stat.S_ISREG(st.st_mode) else read_capped(f)), None


def load_scenario(path: str | Path) -> Scenario:
    source = str(path)
    try:
        buf, pages = _read_buffer(path)
    except OSError as e:
        raise ScenarioError(source, "", f"cannot read the file: {e.strerror or e}") from None
    return decode_scenario(buf, source, pages)


def decode_scenario(buf: bytes | mmap.mmap, source: str, pages: _Pages | None = None) -> Scenario:
    """A scenario from its bytes (a file's, or a bundle member's read within its caps). Nesting
    past bot/sources/bounded.py's MAX_DEPTH is one ScenarioError, never a RecursionError or a
    crash of libyaml's C composer."""
    try:
        text: str | None = None
        if not (source.endswith(".json") or bytes(buf[:4096]).lstrip()[:1] == b"{"):
            text = bytes(buf).decode("utf-8")
            check_yaml_depth(text)
    except UnicodeDecodeError:
        raise ScenarioError(source, "", "cannot read the file: not UTF-8 text") from None
    except TooDeep as e:
        raise ScenarioError(source, "", str(e)) from None
    try:
        with _fleet_sized_data() as size:
            data: object = _decode_json_fast(buf, pages) if text is None else None
            if data is None:
                pages = None  # the standard decoder's objects own their text
                try:
                    whole = text if text is not None else bytes(buf).decode("utf-8")
                except UnicodeDecodeError:
                    raise ScenarioError(source, "", "cannot read the file: not UTF-8 text") from None
                if text is None and not source.endswith(".json"):
                    check_yaml_depth(whole)  # `{…` that is no JSON is read as YAML flow style
                data = _read_text(whole, source)
            del buf, text  # 70 MB at 2,000 nodes: not needed once decoded (a mapping: the views keep it)
            scenario = parse_scenario(data, source, consume=True, release=pages.release if pages else None)
            size.append(_size(scenario))
    except (RecursionError, TooDeep):
        raise ScenarioError(source, "", deep_message()) from None
    return scenario


def parse_scenario(
    data: object,
    source: str,
    now_default: float | None = None,
    *,
    consume: bool = False,
    release: Callable[[], None] | None = None,
) -> Scenario:
    """`consume`: `data` was decoded for this call only; its metric entries are freed as they are read.
    `release`: the metric entries are views into a mapped file (bot/sources/scenario.py `_Pages`):
    their points are kept as views, and the pages read are released now and then."""
    if not isinstance(data, dict):
        raise ScenarioError(
            source, "", f"expected a mapping with `kind: Scenario` at the top, got {show(data)}"
        )
    if data.get("kind") != "Scenario":
        got = f", got {show(data['kind'])}" if "kind" in data else ""
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
            raise ScenarioError(source, key, f"expected text, got {show(data[key])}")
    if data.get("now") is not None:
        now = parse_now(data["now"], source)
    else:
        now = now_default if now_default is not None else float(int(time.time()))
    objects: list[dict[str, Any]] = []
    if data.get("objects") is not None:
        check_objects(data["objects"], source, "objects", objects)
    logs = check_logs(data["logs"], source) if data.get("logs") is not None else {}
    series = (
        read_metrics(data["metrics"], now, source, consume, release)
        if data.get("metrics") is not None
        else []
    )
    if data.get("exposition") is not None:
        add_exposition(data["exposition"], now, source, series)
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


def build_sources(s: Scenario, *, consume: bool = False) -> tuple[SnapshotCluster, SeriesTelemetry]:
    """A cluster and telemetry over the scenario. The cluster gets its own copy of the
    objects (see _own_copy), so a cordon tried against it does not change the scenario,
    unless the caller `consume`s the scenario (reads it for these sources only: a fleet's
    copy is ~50 MB more at the peak)."""
    with _fleet_sized_data() as size:
        size.append(_size(s))
        objects = s.objects if consume else _own_copy(s.objects)
        source = f"scenario {s.name}"
        cluster = SnapshotCluster(objects, s.logs, source=source, now=s.now)
        telemetry = SeriesTelemetry(s.series, s.now, source=source)
    return cluster, telemetry
