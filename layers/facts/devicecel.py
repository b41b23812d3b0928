"""DRA device selectors: CEL expressions evaluated as the kube-scheduler evaluates them.

The language and its standard library are Google's C++ CEL runtime (`cel-expr-python`), in the
environment Kubernetes builds for DRA (layers/facts/kubecel.py: optional values, strings v2, sets,
and Kubernetes' lists, regex, quantity and semver libraries; quantity and semver values in
layers/facts/kubequantity.py). On top, the `device` variable as Kubernetes builds it: `driver`,
`attributes[domain][name]`, `capacity[domain][name]`, `allowMultipleAllocations`, with
unqualified names filed under the driver's domain and an unknown domain reading as an empty map
(Kubernetes' map-with-default: only the name inside it is "no such key").

Every failure — a syntax error, an undeclared function, no such key, no such overload — is a
`CelError` whose text quotes what went wrong; nothing raises past `Selector.matches`. What
Kubernetes accepts and this runtime cannot run (kubecel.NOT_HERE) says `UNSUPPORTED_HERE`.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgspec

from layers.facts import kubecel
from layers.facts.kubequantity import (
    QUANTITY_TAG,
    SEMVER_TAG,
    parse_quantity,
    quantity_value,
    type_name,
)
from layers.facts.kubequantity import parse_semver as semver_text

__all__ = [
    "QUANTITY_TAG",
    "SEMVER_TAG",
    "UNSUPPORTED_HERE",
    "CelError",
    "DeviceFacts",
    "Selector",
    "Value",
    "compile_selector",
    "parse_quantity",
    "semver_text",
]

UNSUPPORTED_HERE = "not supported by gpubot's CEL runtime"


class CelError(Exception):
    """A selector that does not compile or does not evaluate to a bool."""


# --- the selector -------------------------------------------------------------------------------

# String literals of an expression: the domains and names it may look up.
# A quote right after a backslash starts no literal (CEL has no backslash outside strings): else each
# quote of `\"\"\"…` starts a scan to the end (quadratic, issue 10).
_LITERAL = re.compile(r"""[rR]?(?:(?<!\\)'((?:[^'\\\n]|\\.)*)'|(?<!\\)"((?:[^"\\\n]|\\.)*)")""")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "size"})
# After literals are blanked to '': every use of a domain map must be `[''].name`, `['']['']`, or
# `'' in …['']`; anything else (iterating, sizing, comparing whole maps) needs the whole device.
_DOMAIN_USE = re.compile(r"\b(?:attributes|capacity)\b")
_LEAF = re.compile(r"\s*\[\s*''\s*\]\s*(?:\.\s*([A-Za-z_]\w*)\b(?!\s*\()|\[\s*''\s*\])")
_MEMBERSHIP = re.compile(r"\s*\[\s*''\s*\]")
_DEVICE_USE = re.compile(r"\bdevice\b(?!\s*\.\s*(?:driver|attributes|capacity|allowMultipleAllocations)\b)")


def _projectable(blanked: str) -> bool:
    """Whether the expression reads the device only through named leaves (see _DOMAIN_USE)."""
    if _DEVICE_USE.search(blanked):
        return False
    for m in _DOMAIN_USE.finditer(blanked):
        leaf = _LEAF.match(blanked, m.end())
        if leaf and (leaf.group(1) or "") not in _MACROS:
            continue
        if _MEMBERSHIP.match(blanked, m.end()) and re.search(r"\bin\s+device\s*\.\s*$", blanked[: m.start()]):
            continue
        return False
    return True


# The C++ runtime's status texts, in the words Kubernetes (cel-go) uses.
_RUNTIME_WORDS = (
    (re.compile(r'^NOT_FOUND: Key not found in map : "?(.*?)"?$'), r"no such key: \1"),
    (re.compile(r"^\w+: No matching overloads found.*$"), "no such overload"),
    (re.compile(r"^INVALID_ARGUMENT: divide by zero$"), "division by zero"),
    (re.compile(r"^[A-Z_]+: "), ""),
)


_SUBSTRING_END = "<start> or <end> is greater than <string>.size()"


def _runtime_text(raw: str) -> str:
    text = " ".join(raw.split())
    for pattern, words in _RUNTIME_WORDS:
        if pattern.search(text):
            return pattern.sub(words, text, count=1)
    return text


def _compile_text(raw: str) -> str:
    """The checker's first message, without the status code, position and source excerpt."""
    first = raw.split("\n", 1)[0]
    first = re.sub(r"^[A-Z_]+: (?:ERROR: )?(?:<input>:\d+:\d+: )?", "", first)
    return first.removesuffix(" (in container '')").strip()


Value = str | int | bool | tuple[str, str]  # a typed attribute; semver as (SEMVER_TAG, text)


class DeviceFacts(msgspec.Struct, frozen=True):
    """What a selector can see of one device: typed attributes and capacity, by qualified name."""

    driver: str
    attributes: Mapping[str, Value]  # "domain/name" or "name" (the driver's domain)
    capacity: Mapping[str, str]  # "domain/name" or "name" -> a valid quantity
    allow_multiple: bool = False


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, _, ident = name.rpartition("/")
    return domain or driver, ident


@dataclass(frozen=True)
class Selector:
    """One compiled CEL selector. `key` projects a device onto what the expression can read, so a
    fleet of identical GPUs is evaluated once per distinct answer, not once per GPU."""

    expression: str
    program: Any
    literals: frozenset[str]
    names: frozenset[str] | None  # identifiers and literals it reads by name; None: it reads whole maps
    # Attribute layout -> the qualified names `key` keeps (a handful per fleet: bounded by the
    # compile cache's 512 selectors times the layouts drivers publish).
    _kept: dict[tuple[object, ...], tuple[tuple[str, ...], tuple[str, ...]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def key(self, device: DeviceFacts) -> Hashable:
        if self.names is None:
            return None
        # The devices of one driver share their attribute names: which ones the expression can
        # see is worked out once per layout, then the key is a few lookups.
        layout = (tuple(device.attributes), tuple(device.capacity), device.driver)
        kept = self._kept.get(layout)
        if kept is None:
            attrs = tuple(n for n in layout[0] if _split(n, device.driver)[1] in self.names)
            caps = tuple(n for n in layout[1] if _split(n, device.driver)[1] in self.names)
            kept = self._kept.setdefault(layout, (attrs, caps))
        return (
            device.driver,
            device.allow_multiple,
            tuple(device.attributes[n] for n in kept[0]),
            tuple(device.capacity[n] for n in kept[1]),
        )

    def variable(self, device: DeviceFacts) -> dict[str, Any]:
        """The `device` variable Kubernetes builds (names grouped by domain, unqualified under the
        driver's, quantities and versions typed), restricted to what `key` keeps."""
        wanted = self.names
        attributes: dict[str, dict[str, Any]] = {d: {} for d in self.literals}
        for name, value in device.attributes.items():
            domain, ident = _split(name, device.driver)
            if wanted is None or ident in wanted:
                attributes.setdefault(domain, {})[ident] = (
                    {SEMVER_TAG: value[1]} if isinstance(value, tuple) else value
                )
        capacity: dict[str, dict[str, Any]] = {d: {} for d in self.literals}
        for name, text in device.capacity.items():
            domain, ident = _split(name, device.driver)
            if wanted is None or ident in wanted:
                capacity.setdefault(domain, {})[ident] = quantity_value(text)
        return {
            "driver": device.driver,
            "attributes": attributes,
            "capacity": capacity,
            "allowMultipleAllocations": device.allow_multiple,
        }

    def matches(self, device: DeviceFacts) -> bool:
        """Whether the device satisfies the expression; CelError on a runtime error or a non-bool."""
        kubecel.clear_error()
        try:
            result = self.program.eval(data={"device": self.variable(device)})
        except Exception as err:  # the binding raises RuntimeError for what CEL reports as a status
            raise CelError(f"CEL runtime error: {_runtime_text(str(err))}") from None
        kind = result.type().name()
        if kind == "ERROR" or kind == "*error*":
            text = kubecel.last_error() or _runtime_text(str(result.value()))
            if _SUBSTRING_END in text:
                # cel-cpp refuses substring(start, end) with end == size(), which cel-go (Kubernetes)
                # accepts: gpubot cannot say what the scheduler gets.
                raise CelError(f"CEL runtime error: {text} ({UNSUPPORTED_HERE})")
            raise CelError(f"CEL runtime error: {text}")
        value = result.plain_value()
        if not isinstance(value, bool):
            raise CelError(f"must evaluate to bool, got {type_name(value)} {value!r}")
        return value


@lru_cache(maxsize=512)
def compile_selector(expression: str) -> Selector:
    """Compile once per expression (the claims of one fleet repeat theirs); CelError when it does not
    compile in Kubernetes' environment, or (UNSUPPORTED_HERE) uses what Kubernetes has and this lacks."""
    if not isinstance(expression, str) or not expression.strip():
        raise CelError("empty CEL expression")
    literals = frozenset(a or b for a, b in _LITERAL.findall(expression) if a or b)
    blanked = _LITERAL.sub("''", expression)
    try:
        program = kubecel.environment().compile(expression)
    except Exception as err:  # parse and type-check errors come as RuntimeError
        text = _compile_text(str(err))
        if kubecel.NOT_HERE.search(blanked):
            raise CelError(f"compilation failed: {text} ({UNSUPPORTED_HERE})") from None
        raise CelError(f"compilation failed: {text}") from None
    names = frozenset(_IDENT.findall(blanked)) | literals if _projectable(blanked) else None
    return Selector(expression, program, literals, names)
