"""Kubernetes' CEL libraries on the C++ runtime, against upstream's own test tables.

The quantity and semver rows are k8s.io/apiserver/pkg/cel/library/quantity_test.go and
semver_test.go ported as data (expression, expected value or the error's pattern); the lists, regex
and strings rows are the examples of lists.go, regex.go and cel-go's strings extension docs; the
DRA rows are selectors Kubernetes accepts that the previous library could not run (issue 18).
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from layers.facts import kubecel
from layers.facts.devicecel import UNSUPPORTED_HERE, CelError, compile_selector

ERR = object()  # marks a row whose third column is an error pattern


def evaluate(expression: str) -> Any:
    """The value an expression gives in the environment, or raises CelError with its message."""
    try:
        program = kubecel.environment().compile(expression)
    except RuntimeError as err:
        raise CelError(f"compile: {err}") from None
    kubecel.clear_error()
    result = program.eval(data={"device": {}})
    if result.type().name() == "ERROR":
        raise CelError(kubecel.last_error() or str(result.value()))
    return result.plain_value()


QUANTITY = [
    ('quantity("12Mi") == quantity("12582912")', True),
    ('quantity("10Mo")', ERR, r"quantities must match the regular expression"),
    ('quantity("10Mm")', ERR, r"unable to parse quantity's suffix"),
    ('isQuantity("20")', True),
    ('isQuantity("20M")', True),
    ('isQuantity("20Mi")', True),
    ('isQuantity("20Mo")', False),
    ('isQuantity("10Mm")', False),
    ("isQuantity([1, 2, 3])", ERR, r"found no matching overload for 'isQuantity' applied to"),
    ('quantity("200M") == quantity("200M")', True),
    ('quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")', True),
    (
        'quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && '
        'quantity("0.002G") == quantity("2000k")',
        True,
    ),
    ('quantity("200M") == quantity("0.3G")', False),
    ('quantity("50M").isLessThan(quantity("50Mi"))', True),
    ('quantity("50M").isLessThan(quantity("100M"))', True),
    ('quantity("100M").isLessThan(quantity("50M"))', False),
    ('quantity("50Mi").isGreaterThan(quantity("50M"))', True),
    ('quantity("150Mi").isGreaterThan(quantity("100Mi"))', True),
    ('quantity("50M").isGreaterThan(quantity("100M"))', False),
    ('quantity("200M").compareTo(quantity("0.2G"))', 0),
    ('quantity("50M").compareTo(quantity("50Mi"))', -1),
    ('quantity("50Mi").compareTo(quantity("50M"))', 1),
    ('quantity("50k").add(quantity("20")) == quantity("50.02k")', True),
    ('quantity("50k").add(20).isLessThan(quantity("50020"))', False),
    ('quantity("50k").sub(quantity("20")) == quantity("49.98k")', True),
    ('quantity("50k").sub(20) == quantity("49980")', True),
    ('quantity("50k").mul(2) == quantity("100000")', True),
    ('quantity("10000").div(3).asApproximateFloat() > 3333.3332', True),
    ('quantity("10000").div(3).asApproximateFloat() < 3333.3334', True),
    ('quantity("10k").div(2) == quantity("5000")', True),
    ('quantity("10000").divInt(3) == quantity("3333")', True),
    ('quantity("50k").add(20).sub(quantity("100k")).asInteger()', -49980),
    ('quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()', 20),
    ('quantity("50k").asInteger()', 50000),
    (
        'quantity("9999999999999999999999999999999999999G").asInteger()',
        ERR,
        "cannot convert value to integer",
    ),
    ('quantity("9999999999999999999999999999999999999G").isInteger()', False),
    ('quantity("50").isInteger()', True),
    ('quantity("50.703k").asApproximateFloat()', 50703.0),
    # quantity.go's doc comment examples
    ("quantity('200K')", ERR, r"unable to parse quantity's suffix"),
    ("isQuantity('1,3G')", False),
    ("isQuantity('Mi')", False),
    ('quantity("50000000G").isInteger()', True),
    ('quantity("50k").sub(20000).asApproximateFloat() == 30000.0', True),
]

SEMVER = [
    ('semver("1.2.3") == semver("1.2.3")', True),
    ('semver("v1.0")', ERR, "No Major.Minor.Patch elements found"),
    ('isSemver("1.2.3-beta.1+build.1")', True),
    ('isSemver("")', False),
    ('isSemver("v1.0.0")', False),
    ('isSemver(" 1.0.0")', False),
    ('isSemver("1. 0.0")', False),
    ('isSemver("1.0.0 ")', False),
    ('isSemver("01.01.01")', False),
    ('isSemver("1")', False),
    ('isSemver("1.1")', False),
    ('isSemver("", true)', False),
    ('isSemver(" 1.0.0", true)', False),
    ('isSemver("1. 0.0", true)', False),
    ('isSemver("1.0.0 ", true)', False),
    ('isSemver("v1.0.0", true)', True),
    ('isSemver("01.01.01", true)', True),
    ('isSemver("1", true)', True),
    ('isSemver("1.1", true)', True),
    ("isSemver([1, 2, 3])", ERR, r"found no matching overload for 'isSemver' applied to"),
    ('semver("v01.01", true) == semver("1.1.0")', True),
    ('semver("1.2.3") == semver("1.0.0")', False),
    ('semver("1.0.0").isLessThan(semver("1.2.3"))', True),
    ('semver("1.0.0").isLessThan(semver("1.0.0"))', False),
    ('semver("1.2.3").isGreaterThan(semver("1.0.0"))', True),
    ('semver("1.0.0").isGreaterThan(semver("1.0.0"))', False),
    ('semver("1.2.3").compareTo(semver("1.2.3"))', 0),
    ('semver("1.0.0").compareTo(semver("1.2.3"))', -1),
    ('semver("1.2.3").compareTo(semver("1.0.0"))', 1),
    ('semver("1.2.3").major()', 1),
    ('semver("1.2.3").minor()', 2),
    ('semver("1.2.3").patch()', 3),
    # semverlib.go's doc comment examples
    ("semver('200K')", ERR, "No Major.Minor.Patch elements found"),
    ("semver('1.0', true) == semver('1.0.0')", True),
    ("semver('01.01.01', true) == semver('1.1.1')", True),
    ("semver('1.2.3').compareTo(semver('2.0.0'))", -1),
    ("semver('1.2.3').compareTo(semver('0.1.2'))", 1),
]

LISTS_REGEX_STRINGS = [
    ("[1, 2, 3].isSorted()", True),
    ("['a', 'b', 'b', 'c'].isSorted()", True),
    ("[2.0, 1.0].isSorted()", False),
    ("[1, 2, 3].sum()", 6),
    ("[1.0, 2.0, 3.0].sum()", 6.0),
    ("[].sum()", 0),
    ("[1, 2, 3].min()", 1),
    ("['d', 'a', 'b', 'c'].max()", "d"),
    ("[].max()", ERR, r"max\(list\) called on empty list"),
    ("[1, 2, 2, 3].indexOf(2)", 1),
    ("['a', 'b', 'b', 'c'].lastIndexOf('b')", 2),
    ("[1.0].indexOf(1.1)", -1),
    ("'abc 123'.find('[0-9]+')", "123"),
    ("'abc'.find('[0-9]+')", ""),
    ("'123 abc 456'.findAll('[0-9]+')", ["123", "456"]),
    ("'123 abc 456'.findAll('[0-9]+', 1)", ["123"]),
    ("'123 abc 456'.findAll('xyz')", []),
    ("'abc'.find('(')", ERR, "error parsing regexp"),
    ("'TacoCat'.lowerAscii()", "tacocat"),
    ("'hello mellow'.indexOf('ello', 2)", 7),
    ("'hello mellow'.lastIndexOf('ello')", 7),
    ("'a,b,c'.split(',')", ["a", "b", "c"]),
    ("'a,b,c'.split(',', 2)", ["a", "b,c"]),
    ("'hello hello'.replace('he', 'we')", "wello wello"),
    ("'hello hello'.replace('he', 'we', 1)", "wello hello"),
    ("'  \\ttrim\\n  '.trim()", "trim"),
    ("'tacocat'.substring(4)", "cat"),
    ("'tacocat'.substring(0, 4)", "taco"),
    ("['hello', 'mellow'].join(' ')", "hello mellow"),
    ("'%s has %d GPUs'.format(['node-a', 8])", "node-a has 8 GPUs"),
    ("strings.quote('a\"b')", '"a\\"b"'),
    ("sets.contains([1, 2, 3], [2, 3])", True),
    ("sets.equivalent([1, 2], [2, 1, 1])", True),
    ("sets.intersects([1], [2])", False),
    ("optional.of(1).orValue(2)", 1),
    ("{'a': 1}.?b.orValue(5)", 5),
    ("optional.none().hasValue()", False),
]


@pytest.mark.parametrize(
    "row", [r for t in (QUANTITY, SEMVER, LISTS_REGEX_STRINGS) for r in t], ids=lambda r: r[0]
)
def test_upstream_tables(row: tuple[Any, ...]) -> None:
    expression, expected = row[0], row[1]
    if expected is ERR:
        with pytest.raises(CelError) as caught:
            evaluate(expression)
        assert re.search(row[2], str(caught.value)), str(caught.value)
    else:
        got = evaluate(expression)
        assert got == expected and type(got) is type(expected), (got, expected)


@pytest.mark.parametrize(
    "expression",
    [
        "[1, 2].all(i, v, v > 0)",  # two-variable comprehensions (Kubernetes 1.32)
        "isURL('https://example.com')",
        "ip('10.0.0.1').family() == 4",
        "format.dns1123Label().validate('x').hasValue()",
    ],
)
def test_what_kubernetes_has_and_this_lacks_says_so(expression: str) -> None:
    with pytest.raises(CelError) as caught:
        compile_selector(expression)
    assert UNSUPPORTED_HERE in str(caught.value)


@pytest.mark.parametrize(
    "expression",
    ["device.driver.reverse() == ''", "device.nosuch(1)", "device.driver == 'a' &&", "'a' == 5"],
)
def test_what_kubernetes_rejects_is_an_error_not_a_gap(expression: str) -> None:
    with pytest.raises(CelError) as caught:
        compile_selector(expression)
    assert UNSUPPORTED_HERE not in str(caught.value)


def test_evaluation_imports_no_repl() -> None:
    # The server's CEL must not drag a REPL (typer, rich, prompt_toolkit, pygments) in.
    code = (
        "import sys\n"
        "from layers.facts.devicecel import DeviceFacts, compile_selector\n"
        "d = DeviceFacts('gpu.nvidia.com', {'productName': 'NVIDIA H100'}, {'memory': '80Gi'})\n"
        "s = compile_selector(\"device.attributes['gpu.nvidia.com'].productName.lowerAscii()"
        ".find('h[0-9]+') == 'h100' && device.capacity['gpu.nvidia.com'].memory"
        ".isGreaterThan(quantity('40Gi'))\")\n"
        "assert s.matches(d)\n"
        "bad = {m.split('.')[0] for m in sys.modules} & {'typer', 'rich', 'prompt_toolkit', 'pygments', 'cel'}\n"
        "print(sorted(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
