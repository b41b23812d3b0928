"""The Kubernetes CEL environment of DRA selectors, on Google's C++ CEL runtime (`cel-expr-python`).

k8s.io/apiserver/pkg/cel/environment/base.go builds it from cel-go's standard library plus:
optional types, the strings extension (version 2), the sets extension, and Kubernetes' own
libraries — lists (`isSorted`, `sum`, `min`, `max`, `indexOf`, `lastIndexOf`), regex (`find`,
`findAll`), quantity and semver. The runtime brings the standard library, optional values and
strings v2 (`charAt`, `indexOf`, `lastIndexOf`, `lowerAscii`, `upperAscii`, `replace`, `split`,
`substring`, `trim`, `join`, `format`, `strings.quote`); the rest are registered here as custom
functions on that runtime, following the Go code overload for overload. What the runtime cannot
do — two-variable comprehensions (Kubernetes 1.32) and the URL, IP, CIDR and format libraries,
none of which reads a device — is `NOT_HERE`: gpubot says it cannot evaluate those, while any
other compile error is one the API server gives too.

Python exceptions raised inside a function reach CEL as "no matching overloads"; each function
here keeps its own message (`last_error`) so the finding quotes Kubernetes' text.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from layers.facts import kubequantity as kq

_errors = threading.local()


def last_error() -> str | None:
    """The message of the last function that failed in this thread (cleared by `clear_error`)."""
    return getattr(_errors, "text", None)


def clear_error() -> None:
    _errors.text = None


def _keeping_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except (ValueError, TypeError, ZeroDivisionError, ArithmeticError) as err:
            _errors.text = str(err) or type(err).__name__
            raise

    return call


# --- lists (library/lists.go) ---------------------------------------------------------------------


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def cel_equal(a: Any, b: Any) -> bool:
    """CEL's heterogeneous equality: numbers by value across int and double, else same type and value."""
    if _number(a) and _number(b):
        return bool(a == b)
    return type(a) is type(b) and bool(a == b)


def _comparable(values: Sequence[Any], fn: str) -> None:
    kinds = {"number" if _number(v) else type(v).__name__ for v in values}
    if len(kinds) > 1 or kinds & {"list", "dict", "NoneType"}:
        raise TypeError(f"{fn}: no such overload for a list of {', '.join(sorted(kinds))}")


def is_sorted(values: list[Any]) -> bool:
    _comparable(values, "isSorted")
    return all(values[i] <= values[i + 1] for i in range(len(values) - 1))


def list_sum(values: list[Any]) -> Any:
    if any(not _number(v) for v in values):
        raise TypeError("sum: no such overload (the list must hold ints, uints, doubles or durations)")
    return sum(values) if values else 0


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[[list[Any]], Any]:
    def extreme(values: list[Any]) -> Any:
        if not values:
            raise ValueError(f"{name}(list) called on empty list")
        _comparable(values, name)
        return pick(values)

    return extreme


def index_of(values: list[Any], item: Any) -> int:
    return next((i for i, v in enumerate(values) if cel_equal(v, item)), -1)


def last_index_of(values: list[Any], item: Any) -> int:
    return next((i for i in range(len(values) - 1, -1, -1) if cel_equal(values[i], item)), -1)


# --- regex (library/regex.go), on RE2 as in Go: linear whatever the pattern ------------------------


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # one stderr line per device otherwise; the finding quotes the error
    try:
        return re2.compile(pattern, options)
    except re2.error as err:
        raise ValueError(f"error parsing regexp: {err}") from None


def find(text: str, pattern: str) -> str:
    m = _regex(pattern).search(text)
    return m.group(0) if m else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    out = []
    for m in _regex(pattern).finditer(text):
        out.append(m.group(0))
        if 0 < limit <= len(out):
            break
    return out


# --- sets (cel-go ext.Sets) ------------------------------------------------------------------------


def sets_contains(a: list[Any], b: list[Any]) -> bool:
    return all(any(cel_equal(x, y) for x in a) for y in b)


def sets_intersects(a: list[Any], b: list[Any]) -> bool:
    return any(any(cel_equal(x, y) for x in a) for y in b)


# --- the environment ---------------------------------------------------------------------------------

# Kubernetes functions and macros the C++ runtime here cannot run (see the module's docstring).
# Two-variable comprehensions are found by their shape: a macro call with three arguments.
NOT_HERE = re.compile(
    r"\b(?:url|isURL|ip|isIP|cidr|isCIDR|ip\.isCanonical|format\.\w+|transformList|transformMap"
    r"|transformMapEntry)\s*\(|\.\s*(?:all|exists|existsOne|exists_one)\s*\(\s*\w+\s*,\s*\w+\s*,"
)


def _declarations(cel: Any) -> list[Any]:
    T = cel.Type
    Q, S, B, N, D, L = T.Map(T.STRING, T.STRING), T.STRING, T.BOOL, T.INT, T.DOUBLE, T.List(T.DYN)

    def fn(name: str, *overloads: tuple[str, Any, list[Any], bool, Callable[..., Any]]) -> Any:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, ret, params, is_member=member, impl=_keeping_errors(impl))
                for oid, ret, params, member, impl in overloads
            ],
        )

    return [
        # quantity (library/quantity.go): `sign` is a global function there, not a member.
        fn("quantity", ("string_to_quantity", Q, [S], False, kq.quantity_value)),
        fn("isQuantity", ("is_quantity_string", B, [S], False, kq.is_quantity)),
        fn(
            "sign",
            ("quantity_sign", N, [Q], False, lambda q: (lambda n: (n > 0) - (n < 0))(kq.quantity_of(q))),
        ),
        fn("asApproximateFloat", ("quantity_get_float", D, [Q], True, lambda q: float(kq.quantity_of(q)))),
        fn("asInteger", ("quantity_get_int", N, [Q], True, kq.as_integer)),
        fn("isInteger", ("quantity_is_integer", B, [Q], True, lambda q: kq.fits_int64(kq.quantity_of(q)))),
        fn("add", ("quantity_add", Q, [Q, Q], True, kq.add), ("quantity_add_int", Q, [Q, N], True, kq.add)),
        fn("sub", ("quantity_sub", Q, [Q, Q], True, kq.sub), ("quantity_sub_int", Q, [Q, N], True, kq.sub)),
        fn("mul", ("quantity_multiply_int", Q, [Q, N], True, kq.mul)),
        fn(
            "div",
            ("quantity_divide_int_default_rounding", Q, [Q, N], True, kq.div),
            ("quantity_divide_int_round", Q, [Q, N, N], True, kq.div),
        ),
        fn("divInt", ("quantity_divide_int", Q, [Q, N], True, kq.div_int)),
        # quantity and semver share these (both are maps here; the tag picks the rule)
        fn("isGreaterThan", ("k8s_is_greater_than", B, [Q, Q], True, lambda a, b: kq.compare(a, b) > 0)),
        fn("isLessThan", ("k8s_is_less_than", B, [Q, Q], True, lambda a, b: kq.compare(a, b) < 0)),
        fn("compareTo", ("k8s_compare_to", N, [Q, Q], True, kq.compare)),
        # semver (library/semverlib.go, version 1: the normalize overloads)
        fn(
            "semver",
            ("string_to_semver", Q, [S], False, kq.semver_value),
            ("string_bool_to_semver", Q, [S, B], False, kq.semver_value),
        ),
        fn(
            "isSemver",
            ("is_semver_string", B, [S], False, kq.is_semver),
            ("is_semver_string_bool", B, [S, B], False, kq.is_semver),
        ),
        fn("major", ("semver_major", N, [Q], True, lambda v: kq.semver_part(v, 0))),
        fn("minor", ("semver_minor", N, [Q], True, lambda v: kq.semver_part(v, 1))),
        fn("patch", ("semver_patch", N, [Q], True, lambda v: kq.semver_part(v, 2))),
        # lists (library/lists.go)
        fn("isSorted", ("list_is_sorted", B, [L], True, is_sorted)),
        fn("sum", ("list_sum", T.DYN, [L], True, list_sum)),
        fn("min", ("list_min", T.DYN, [L], True, _extreme("min", min))),
        fn("max", ("list_max", T.DYN, [L], True, _extreme("max", max))),
        # regex (library/regex.go)
        fn("find", ("string_find_string", S, [S, S], True, find)),
        fn(
            "findAll",
            ("string_find_all_string", T.List(S), [S, S], True, find_all),
            ("string_find_all_string_int", T.List(S), [S, S, N], True, find_all),
        ),
        # sets (cel-go ext.Sets)
        fn("sets.contains", ("list_sets_contains_list", B, [L, L], False, sets_contains)),
        fn(
            "sets.equivalent",
            (
                "list_sets_equivalent_list",
                B,
                [L, L],
                False,
                lambda a, b: sets_contains(a, b) and sets_contains(b, a),
            ),
        ),
        fn("sets.intersects", ("list_sets_intersects_list", B, [L, L], False, sets_intersects)),
    ]


@lru_cache(maxsize=1)
def environment() -> Any:
    """The one environment every selector compiles in: `device` plus the libraries above."""
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_optional, ext_strings

    T = cel.Type
    # indexOf/lastIndexOf on lists join the strings extension's overloads: an extension loaded
    # after it may add overloads to its functions, a plain declaration may not.
    lists = cel.CelExtension(
        "kubernetes.lists.indexOf",
        [
            cel.FunctionDecl(
                "indexOf",
                [
                    cel.Overload(
                        "list_index_of",
                        T.INT,
                        [T.List(T.DYN), T.DYN],
                        is_member=True,
                        impl=_keeping_errors(index_of),
                    )
                ],
            ),
            cel.FunctionDecl(
                "lastIndexOf",
                [
                    cel.Overload(
                        "list_last_index_of",
                        T.INT,
                        [T.List(T.DYN), T.DYN],
                        is_member=True,
                        impl=_keeping_errors(last_index_of),
                    )
                ],
            ),
        ],
    )
    return cel.NewEnv(
        variables={"device": T.DYN},
        extensions=[ext_strings.ExtStrings(version=2), ext_optional.ExtOptional(), lists],
        functions=_declarations(cel),
    )
