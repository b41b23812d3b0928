"""A scenario's objects and logs checked against the shapes the layers read.

Each mistake is one ScenarioError naming the file, the key path and what was expected
(bot/sources/scenario.py reads the file; this module judges what it holds). Objects are
fixed up as the API server would hold them: label and annotation values as strings, a
namespaced object without a namespace filed in "default", `List`s unpacked.
"""

from __future__ import annotations

import re
from typing import Any

from bot.sources.scenario_model import ScenarioError, show

_LOG_KEY = re.compile(r"[^/#\s]+/[^/#\s]+/[^/#\s]+(#previous)?\Z")


def check_objects(raw: object, source: str, path: str, out: list[dict[str, Any]]) -> None:
    if not isinstance(raw, list):
        raise ScenarioError(source, path, f"expected a list of Kubernetes objects, got {show(raw)}")
    for i, obj in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(obj, dict):
            raise ScenarioError(source, where, f"expected a Kubernetes object (a mapping), got {show(obj)}")
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ScenarioError(source, where, "expected a `kind` (e.g. Node, Pod, Event)")
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            # A pasted `kubectl get ... -o yaml`: its items are the objects.
            check_objects(obj.get("items") or [], source, f"{where}.items", out)
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
        "DeviceClass",
        "ResourceSlice",
        "DeviceTaintRule",
        "GPUCluster",
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
            raise ScenarioError(source, path, f"expected a mapping, got {show(value)}")
        for key, inner in shape.items():
            if value.get(key) is not None:
                _check_shape(value[key], inner, source, f"{path}.{key}")
    elif isinstance(shape, list):
        if not isinstance(value, list):
            raise ScenarioError(source, path, f"expected a list, got {show(value)}")
        for i, item in enumerate(value):
            _check_shape(item, shape[0], source, f"{path}[{i}]")
    elif not isinstance(value, shape):
        what = "a mapping" if shape is dict else "a list"
        raise ScenarioError(source, path, f"expected {what}, got {show(value)}")


def _as_api_strings(meta: dict[str, Any], field_name: str, source: str, path: str) -> None:
    """Label and annotation values are strings in the API; hand-written YAML says `true` or `8`."""
    values = meta.get(field_name)
    if values is None:
        return
    if not isinstance(values, dict):
        raise ScenarioError(source, path, f"expected a mapping of strings, got {show(values)}")
    for key, value in values.items():
        if isinstance(value, str):
            continue
        if isinstance(value, bool):
            values[key] = "true" if value else "false"
        elif isinstance(value, int | float) or value is None:
            values[key] = "" if value is None else str(value)
        else:
            raise ScenarioError(source, f"{path}[{key!r}]", f"expected a string, got {show(value)}")


def check_logs(raw: object, source: str) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ScenarioError(
            source, "logs", f'expected a mapping "namespace/pod/container" -> text, got {show(raw)}'
        )
    for key, text in raw.items():
        if not isinstance(key, str) or not _LOG_KEY.match(key):
            raise ScenarioError(
                source, f"logs[{key!r}]", 'expected a key "namespace/pod/container" (or "...#previous")'
            )
        if not isinstance(text, str):
            raise ScenarioError(source, f"logs[{key!r}]", f"expected the log text, got {show(text)}")
    return raw
