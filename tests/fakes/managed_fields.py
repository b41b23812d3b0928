"""metadata.managedFields as the API server keeps them for Update operations (PATCH, PUT).

Each write is recorded under its field manager: the `fieldManager` query parameter, else the
client's User-Agent up to its first "/" (as kube-apiserver's prefixFromUserAgent does), in one
entry per (manager, operation, apiVersion) with `fieldsType: FieldsV1` and the fields it set as
`f:<name>` maps. A manager that sets a field takes it from any other manager; a field set to
null (removed) is owned by nobody; an entry left owning nothing is dropped. Lists (taints,
conditions) are owned whole, which is all a node patch here needs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

Fields = dict[str, Any]


def manager_of(query: dict[str, str], user_agent: str | None) -> str:
    if query.get("fieldManager"):
        return query["fieldManager"]
    return (user_agent or "unknown").split("/", 1)[0] or "unknown"


def _paths(patch: Any, prefix: tuple[str, ...] = ()) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(set, removed) leaf field paths of a merge patch; metadata's name/resourceVersion are not fields."""
    sets: list[tuple[str, ...]] = []
    removed: list[tuple[str, ...]] = []
    if not isinstance(patch, dict):
        return sets, removed
    for key, value in patch.items():
        path = (*prefix, f"f:{key}")
        if prefix == ("f:metadata",) and key in ("name", "resourceVersion", "managedFields", "uid"):
            continue
        if value is None:
            removed.append(path)
        elif isinstance(value, dict) and value:
            s, r = _paths(value, path)
            sets += s
            removed += r
        else:
            sets.append(path)
    return sets, removed


def _add(fields: Fields, path: tuple[str, ...]) -> None:
    for part in path:
        fields = fields.setdefault(part, {})


def _drop(fields: Fields, path: tuple[str, ...]) -> None:
    if not path:
        return
    head, rest = path[0], path[1:]
    if head not in fields:
        return
    if rest:
        _drop(fields[head], rest)
        if not fields[head]:
            del fields[head]
    else:
        del fields[head]


def record_update(obj: dict[str, Any], patch: Any, manager: str, now: float | None = None) -> None:
    """Update `obj`'s managedFields for a patch applied by `manager` (the object already patched)."""
    meta = obj.setdefault("metadata", {})
    entries: list[dict[str, Any]] = [dict(e) for e in meta.get("managedFields") or []]
    sets, removed = _paths(patch)
    for e in entries:
        fields = e.setdefault("fieldsV1", {})
        for path in [*sets, *removed]:
            if e.get("manager") != manager or path in removed:
                _drop(fields, path)
    mine = next((e for e in entries if e.get("manager") == manager and e.get("operation") == "Update"), None)
    if mine is None and sets:
        mine = {
            "manager": manager,
            "operation": "Update",
            "apiVersion": "v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        }
        entries.append(mine)
    if mine is not None:
        for path in sets:
            _add(mine["fieldsV1"], path)
        when = datetime.fromtimestamp(now, tz=UTC) if now is not None else datetime.now(UTC)
        mine["time"] = when.replace(microsecond=0).isoformat().replace("+00:00", "Z")
    meta["managedFields"] = [e for e in entries if e.get("fieldsV1")]
