"""DRA device selectors: CEL expressions evaluated as the kube-scheduler evaluates them.

The language is the real thing (`common-expression-language`, the Rust `cel`
interpreter; see the README changelog for why not cel-python). On top of it,
the parts Kubernetes adds and DRA selectors use, written here because the
library has no Kubernetes libraries:

- the `device` variable: `driver`, `attributes[domain][name]`, `capacity[domain][name]`,
  `allowMultipleAllocations`, with unqualified names filed under the driver's domain and
  an unknown domain reading as an empty map (Kubernetes' map-with-default: only the name
  inside it is "no such key");
- the Quantity library (`quantity()`, `isQuantity()`, `compareTo`, `isGreaterThan`,
  `isLessThan`, `add`, `sub`, `sign`, `isInteger`, `asInteger`, `asApproximateFloat`);
- the semver library (`semver()`, `isSemver()`, `major`, `minor`, `patch`, `compareTo`,
  `isGreaterThan`, `isLessThan`), version attributes being semver values.

The interpreter cannot carry Python objects, so a Quantity is a one-key map
`{"k8s.io/Quantity": "<exact decimal>"}` and a version `{"k8s.io/Semver": "1.2.3"}`:
equal values compare equal (`quantity('1Gi') == quantity('1024Mi')`), and a quantity
never equals a string or a number, as in Kubernetes.

Every failure — a syntax error, an undeclared function, no such key, no such
overload — is a `CelError` whose text quotes what went wrong; nothing raises past
`Selector.matches`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

# `cel` is imported where an expression is compiled: its package pulls in a REPL
# (prompt_toolkit, ~120 ms), and most walks have no DRA claim to evaluate.

# The library logs every failing extension call before raising it; the finding says it already.
logging.getLogger("cel").addHandler(logging.NullHandler())
logging.getLogger("cel").propagate = False

QUANTITY_TAG = "k8s.io/Quantity"
SEMVER_TAG = "k8s.io/Semver"


class CelError(Exception):
    """A selector that does not compile or does not evaluate to a bool."""


# --- quantities ---------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# resource.Quantity's grammar: <signedNumber><suffix>, the suffix binary, decimal SI or an exponent.
_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity ("80Gi", "500m", "1e3") as an exact number; ValueError when it is none."""
    m = _QUANTITY.fullmatch(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"quantities must match the regular expression '{_QUANTITY.pattern}': {text!r}")
    number, suffix = Decimal(m.group(1)), m.group(2) or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number.scaleb(_DECIMAL[suffix])
    return number.scaleb(int(suffix[1:]))


def _exact(value: Decimal) -> str:
    """One spelling per value, so equal quantities are equal maps."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def quantity_value(text: str) -> dict[str, str]:
    return {QUANTITY_TAG: _exact(parse_quantity(text))}


def _q(value: Any, fn: str) -> Decimal:
    if isinstance(value, Mapping) and QUANTITY_TAG in value:
        return Decimal(str(value[QUANTITY_TAG]))
    raise TypeError(f"{fn}: no such overload for {_type_name(value)}")


def _is_quantity(text: Any) -> bool:
    try:
        parse_quantity(text)
    except (ValueError, InvalidOperation):
        return False
    return True


def _as_integer(value: Any) -> int:
    number = _q(value, "asInteger")
    if number != number.to_integral_value() or not -(2**63) <= number < 2**63:
        raise ValueError("cannot convert value to integer")
    return int(number)


def _quantity_arg(value: Any, fn: str) -> Decimal:
    """add/sub take a quantity or an int, as Kubernetes' overloads do."""
    if isinstance(value, int) and not isinstance(value, bool):
        return Decimal(value)
    return _q(value, fn)


# --- semantic versions --------------------------------------------------------------------

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def semver_value(text: str) -> dict[str, str]:
    """A strict semantic version (as DRA's version attributes are); build metadata does not count."""
    return {SEMVER_TAG: semver_text(text)}


@lru_cache(maxsize=4096)  # a fleet publishes a handful of driver/CUDA versions on every device
def semver_text(text: str) -> str:
    m = _SEMVER.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"could not parse {text!r} as version")
    core = f"{m.group(1)}.{m.group(2)}.{m.group(3)}"
    return core + (f"-{m.group(4)}" if m.group(4) else "")


def _v(value: Any, fn: str) -> tuple[tuple[int, int, int], tuple[str, ...]]:
    if isinstance(value, Mapping) and SEMVER_TAG in value:
        core, _, pre = str(value[SEMVER_TAG]).partition("-")
        major, minor, patch = (int(p) for p in core.split("."))
        return (major, minor, patch), tuple(pre.split(".")) if pre else ()
    raise TypeError(f"{fn}: no such overload for {_type_name(value)}")


def _pre_key(pre: tuple[str, ...]) -> tuple[int, tuple[tuple[int, int, str], ...]]:
    """SemVer 2.0 precedence: a release is above its pre-releases; numeric ids below alphanumeric."""
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre)
    return (0 if pre else 1, ids)


def _semver_cmp(a: Any, b: Any, fn: str) -> int:
    (core_a, pre_a), (core_b, pre_b) = _v(a, fn), _v(b, fn)
    left, right = (core_a, _pre_key(pre_a)), (core_b, _pre_key(pre_b))
    return (left > right) - (left < right)


def _is_semver(text: Any) -> bool:
    try:
        semver_value(text)
    except ValueError:
        return False
    return True


# --- shared member functions ------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if isinstance(value, Mapping):
        if QUANTITY_TAG in value:
            return "quantity"
        if SEMVER_TAG in value:
            return "semver"
        return "map"
    return {bool: "bool", int: "int", float: "double", str: "string", list: "list"}.get(type(value), "dyn")


def _compare(a: Any, b: Any, fn: str = "compareTo") -> int:
    if isinstance(a, Mapping) and SEMVER_TAG in a:
        return _semver_cmp(a, b, fn)
    left, right = _q(a, fn), _q(b, fn)
    return (left > right) - (left < right)


def _sign(value: Any) -> int:
    number = _q(value, "sign")
    return (number > 0) - (number < 0)


def _component(index: int, fn: str) -> Callable[[Any], int]:
    return lambda value: _v(value, fn)[0][index]


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": quantity_value,
    "isQuantity": _is_quantity,
    "sign": _sign,
    "isInteger": lambda v: _q(v, "isInteger") == _q(v, "isInteger").to_integral_value(),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda v: float(_q(v, "asApproximateFloat")),
    "add": lambda a, b: {QUANTITY_TAG: _exact(_q(a, "add") + _quantity_arg(b, "add"))},
    "sub": lambda a, b: {QUANTITY_TAG: _exact(_q(a, "sub") - _quantity_arg(b, "sub"))},
    "semver": semver_value,
    "isSemver": _is_semver,
    "major": _component(0, "major"),
    "minor": _component(1, "minor"),
    "patch": _component(2, "patch"),
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b, "isGreaterThan") > 0,
    "isLessThan": lambda a, b: _compare(a, b, "isLessThan") < 0,
}


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


def _error_text(err: BaseException) -> str:
    """The library's message, in the words Kubernetes uses where they differ."""
    text = " ".join(str(err).split())
    if isinstance(err, KeyError):
        return f"no such key: {text.strip(chr(39))}"
    if isinstance(err, TypeError) and text.startswith("No such overload"):
        return "no such overload"
    text = re.sub(r"^Function '\w+' error: (?:Python function call failed: )?(?:\w+Error: )?", "", text)
    text = re.sub(r"\.? Check (?:function arguments|that the variable).*$", "", text)
    return text


Value = str | int | bool | tuple[str, str]  # a typed attribute; semver as (SEMVER_TAG, text)


@dataclass(frozen=True)
class DeviceFacts:
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
    functions: Mapping[str, Callable[..., Any]]
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
        try:
            result = self.program.execute({"device": self.variable(device), **self.functions})
        except Exception as err:  # the interpreter raises many types: each is a user error
            raise CelError(f"CEL runtime error: {_error_text(err)}") from None
        if not isinstance(result, bool):
            raise CelError(f"must evaluate to bool, got {_type_name(result)} {result!r}")
        return result


@lru_cache(maxsize=512)
def compile_selector(expression: str) -> Selector:
    """Compile once per expression (the claims of one fleet repeat theirs); CelError when it does not parse."""
    if not isinstance(expression, str) or not expression.strip():
        raise CelError("empty CEL expression")
    import cel

    try:
        program = cel.compile(expression)
    except Exception as err:  # parse errors come as ValueError or RuntimeError
        first = " ".join(str(err).split("|", 1)[0].split())
        raise CelError(f"compilation failed: {first}") from None
    literals = frozenset(a or b for a, b in _LITERAL.findall(expression) if a or b)
    blanked = _LITERAL.sub("''", expression)
    names = frozenset(_IDENT.findall(blanked)) | literals if _projectable(blanked) else None
    used = set(program.references()["functions"])
    functions = {k: f for k, f in FUNCTIONS.items() if k in used}
    return Selector(expression, program, functions, literals, names)
