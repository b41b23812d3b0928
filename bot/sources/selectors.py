"""Kubernetes label and field selectors, parsed and matched as the API server does.

Shared by the scenario snapshot and the fake API server in the tests, so the
two can never disagree about which objects a selector picks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from layers.sources import SourceError

Matcher = Callable[[Mapping[str, str]], bool]

_SET = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQ = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside a set's parentheses."""
    terms: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_equals(key: str, value: str, negate: bool) -> Matcher:
    def check(lab: Mapping[str, str]) -> bool:
        return (lab.get(key) == value) != negate

    return check


def _label_in(key: str, allowed: frozenset[str], negate: bool) -> Matcher:
    def check(lab: Mapping[str, str]) -> bool:
        return (lab.get(key) in allowed) != negate

    return check


def _label_exists(key: str, negate: bool) -> Matcher:
    def check(lab: Mapping[str, str]) -> bool:
        return (key in lab) != negate

    return check


def _field_equals(path: str, value: str, negate: bool) -> Callable[[Mapping[str, Any]], bool]:
    def check(obj: Mapping[str, Any]) -> bool:
        return (_field(obj, path) == value) != negate

    return check


def parse_label_selector(selector: str | None) -> Matcher:
    """Equality (=, ==, !=), set (in, notin) and existence (key, !key) terms, ANDed."""
    if not selector or not selector.strip():
        return lambda _labels: True
    checks: list[Matcher] = []
    for term in _split_terms(selector):
        eq = _EQ.match(term)
        if eq:
            key, op, value = eq.groups()
            checks.append(_label_equals(key, value, negate=op == "!="))
            continue
        st = _SET.match(term)
        if st:
            neg, key, op, values = st.groups()
            if op:
                allowed = frozenset(v.strip() for v in values.split(",") if v.strip())
                checks.append(_label_in(key, allowed, negate=op == "notin"))
            else:
                checks.append(_label_exists(key, negate=bool(neg)))
            continue
        raise SourceError("bad_input", f"invalid label selector term {term.strip()!r}")
    return lambda lab: all(c(lab) for c in checks)


def _field(obj: Mapping[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    return "" if cur is None else str(cur)


def parse_field_selector(selector: str | None) -> Callable[[Mapping[str, Any]], bool]:
    """Field selectors: equality and inequality on dotted paths (metadata.name, spec.nodeName, …)."""
    if not selector or not selector.strip():
        return lambda _obj: True
    checks: list[Callable[[Mapping[str, Any]], bool]] = []
    for term in selector.split(","):
        m = re.match(r"^\s*([A-Za-z.]+)\s*(==|=|!=)\s*(.*?)\s*$", term)
        if not m:
            raise SourceError("bad_input", f"invalid field selector term {term.strip()!r}")
        path, op, value = m.groups()
        checks.append(_field_equals(path, value, negate=op == "!="))
    return lambda o: all(c(o) for c in checks)


def node_named(selector: str | None) -> str | None:
    """X when the field selector requires `spec.nodeName=X` (the pods of one node), else None."""
    for term in (selector or "").split(","):
        m = re.match(r"^\s*spec\.nodeName\s*==?\s*(.*?)\s*$", term)
        if m:
            return m.group(1)
    return None
