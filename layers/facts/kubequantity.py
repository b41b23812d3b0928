"""Kubernetes' quantity and semver values, as k8s.io/apiserver/pkg/cel/library has them.

A Quantity parses as `resource.ParseQuantity` does (the same three error texts), a version as
blang/semver's `Parse` does (with the library's `normalize` variant); both compare by value.
The C++ CEL runtime (layers/facts/kubecel.py) carries neither type, so a value travels as a one-key
map — `{"k8s.io/Quantity": "<exact decimal>"}`, `{"k8s.io/Semver": "1.2.3-rc.1"}` — whose single
spelling per value makes equal values equal maps (`quantity('1Gi') == quantity('1024Mi')`), and
never equal to a string or a number, as in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import ROUND_DOWN, ROUND_HALF_UP, Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

QUANTITY_TAG = "k8s.io/Quantity"
SEMVER_TAG = "k8s.io/Semver"

# --- quantities (k8s.io/apimachinery/pkg/api/resource) ----------------------------------------

QUANTITY_SHAPE = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
ERR_FORMAT = f"quantities must match the regular expression '{QUANTITY_SHAPE}'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"
# Linear: one pass over a bounded alphabet, no nested repetition.
_SHAPE = re.compile(r"([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)")
_INT64 = 2**63


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity ("80Gi", "500m", "1e3") as an exact number; ValueError with
    ParseQuantity's own message when it is none."""
    m = _SHAPE.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise ValueError(ERR_FORMAT)
    number, suffix = m.group(1), m.group(2)
    if not _NUMBER.fullmatch(number):
        raise ValueError(ERR_NUMERIC)
    value = Decimal(number)
    if suffix in _BINARY:
        return value * (1 << _BINARY[suffix])
    if suffix in _DECIMAL:
        return value.scaleb(_DECIMAL[suffix])
    exp = _EXPONENT.fullmatch(suffix)
    if exp is None or len(exp.group(1).lstrip("+-")) > 4:  # Go's int32 exponent; beyond is no quantity
        raise ValueError(ERR_SUFFIX)
    return value.scaleb(int(exp.group(1)))


def exact(value: Decimal) -> str:
    """One spelling per value, so equal quantities are equal maps."""
    text = format(value.normalize(), "f")
    return "0" if text in ("-0", "0") else text


def quantity_value(text: str) -> dict[str, str]:
    return {QUANTITY_TAG: exact(parse_quantity(text))}


def is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except (ValueError, InvalidOperation):
        return False
    return True


def quantity_of(value: Any) -> Decimal:
    if isinstance(value, Mapping) and QUANTITY_TAG in value:
        return Decimal(str(value[QUANTITY_TAG]))
    raise TypeError("no such overload")


def _q(value: Decimal) -> dict[str, str]:
    return {QUANTITY_TAG: exact(value)}


def fits_int64(number: Decimal) -> bool:
    return number == number.to_integral_value() and -_INT64 <= number < _INT64


def as_integer(value: Any) -> int:
    number = quantity_of(value)
    if not fits_int64(number):
        raise ValueError("cannot convert value to integer")
    return int(number)


def add(a: Any, b: Any) -> dict[str, str]:
    return _q(quantity_of(a) + (Decimal(b) if isinstance(b, int) else quantity_of(b)))


def sub(a: Any, b: Any) -> dict[str, str]:
    return _q(quantity_of(a) - (Decimal(b) if isinstance(b, int) else quantity_of(b)))


def mul(a: Any, b: int) -> dict[str, str]:
    return _q(quantity_of(a) * b)


def div(a: Any, b: int, digits: int = 4) -> dict[str, str]:
    """Quantity.QuoRound(b, digits): rounded half up to `digits` decimals (4 without the argument)."""
    if b == 0:
        raise ZeroDivisionError("division by zero error")
    if not 0 <= digits <= 10:
        raise ValueError(f"the valid range for roundVal is 0 to 10 but {digits} was passed")
    return _q((quantity_of(a) / b).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def div_int(a: Any, b: int) -> dict[str, str]:
    if b == 0:
        raise ZeroDivisionError("division by zero error")
    return _q((quantity_of(a) / b).to_integral_value(rounding=ROUND_DOWN))


# --- semantic versions (blang/semver v4 Parse, and the library's normalizeAndParse) -------------

_DIGITS = re.compile(r"[0-9]*")
_IDENT = re.compile(r"[0-9A-Za-z-]*")


def _number(part: str, which: str) -> int:
    if not _DIGITS.fullmatch(part):
        raise ValueError(f"Invalid character(s) found in {which} number {part!r}")
    if len(part) > 1 and part[0] == "0":
        raise ValueError(f"{which.capitalize()} number must not contain leading zeroes {part!r}")
    if not part:
        raise ValueError(f'strconv.ParseUint: parsing "": invalid syntax ({which})')
    return int(part)


def _prerelease(ident: str) -> str:
    if not ident:
        raise ValueError("Prerelease is empty")
    if ident.isdigit():
        if len(ident) > 1 and ident[0] == "0":
            raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {ident!r}")
    elif not _IDENT.fullmatch(ident):
        raise ValueError(f"Invalid character(s) found in prerelease {ident!r}")
    return ident


def _build(ident: str) -> None:
    if not ident:
        raise ValueError("Build meta data is empty")
    if not _IDENT.fullmatch(ident):
        raise ValueError(f"Invalid character(s) found in build meta data {ident!r}")


@lru_cache(maxsize=4096)  # a fleet publishes a handful of driver/CUDA versions on every device
def parse_semver(text: str) -> str:
    """`major.minor.patch[-pre]`, build metadata dropped (it takes no part in precedence)."""
    if not text:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major, minor = _number(parts[0], "major"), _number(parts[1], "minor")
    patch_text, _, build = parts[2].partition("+")
    if "+" in parts[2]:
        for b in build.split("."):
            _build(b)
    patch_text, dash, pre = patch_text.partition("-")
    patch = _number(patch_text, "patch")
    pres = [_prerelease(p) for p in pre.split(".")] if dash else []
    return f"{major}.{minor}.{patch}" + (f"-{'.'.join(pres)}" if pres else "")


def normalize_semver(text: str) -> str:
    """normalizeAndParse: no leading "v", missing minor/patch filled with 0, leading zeros removed."""
    text = text.removeprefix("v")
    parts = text.split(".", 2)
    for i, p in enumerate(parts):
        if len(p) > 1:
            p = p.lstrip("0")
            if not p or not p[0].isdigit():
                p = "0" + p
            parts[i] = p
    if len(parts) < 3:
        if "+" in parts[-1] or "-" in parts[-1]:
            raise ValueError("short version cannot contain PreRelease/Build meta data")
        parts += ["0"] * (3 - len(parts))
    return parse_semver(".".join(parts))


def semver_value(text: str, normalize: bool = False) -> dict[str, str]:
    return {SEMVER_TAG: normalize_semver(text) if normalize else parse_semver(text)}


def is_semver(text: str, normalize: bool = False) -> bool:
    try:
        semver_value(text, normalize)
    except ValueError:
        return False
    return True


def _semver_key(value: Any) -> tuple[tuple[int, ...], tuple[int, tuple[tuple[int, int, str], ...]]]:
    if not (isinstance(value, Mapping) and SEMVER_TAG in value):
        raise TypeError("no such overload")
    core, _, pre = str(value[SEMVER_TAG]).partition("-")
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")) if pre else ()
    # SemVer precedence: a release is above its pre-releases; numeric identifiers below alphanumeric.
    return tuple(int(p) for p in core.split(".")), (0 if pre else 1, ids)


def semver_part(value: Any, index: int) -> int:
    return _semver_key(value)[0][index]


def compare(a: Any, b: Any) -> int:
    """compareTo of two quantities or two versions (-1, 0, 1); no such overload across them."""
    if isinstance(a, Mapping) and SEMVER_TAG in a:
        left, right = _semver_key(a), _semver_key(b)
        return (left > right) - (left < right)
    x, y = quantity_of(a), quantity_of(b)
    return (x > y) - (x < y)


def type_name(value: Any) -> str:
    if isinstance(value, Mapping):
        return "quantity" if QUANTITY_TAG in value else "semver" if SEMVER_TAG in value else "map"
    return {bool: "bool", int: "int", float: "double", str: "string", list: "list"}.get(type(value), "dyn")
