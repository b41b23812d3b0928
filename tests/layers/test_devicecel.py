"""DRA device selectors: real CEL, Kubernetes' quantity and semver libraries, its `device` variable.

The expressions are the NVIDIA DRA driver's DeviceClasses and the shapes its demo specs and users
write; each expected value is what the kube-scheduler's CEL environment gives for them.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from layers.facts.devicecel import (
    SEMVER_TAG,
    CelError,
    DeviceFacts,
    Selector,
    compile_selector,
    parse_quantity,
)

H100 = DeviceFacts(
    "gpu.nvidia.com",
    {
        "productName": "NVIDIA H100 80GB HBM3",
        "type": "gpu",
        "uuid": "GPU-be6b5d11-3c63-1445-78e8-403fe6298f8e",
        "architecture": "Hopper",
        "driverVersion": (SEMVER_TAG, "570.172.8"),
        "cudaComputeCapability": (SEMVER_TAG, "9.0.0"),
        "resource.kubernetes.io/pciBusID": "0000:18:00.0",
        "index": 0,
    },
    {"memory": "81559Mi"},
)


def matches(expression: str, device: DeviceFacts = H100) -> bool:
    return compile_selector(expression).matches(device)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'", True),
        ("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'", False),
        ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", True),
        ("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')", False),
        ("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0", True),
        (
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) >= 0",
            False,
        ),  # 81559Mi < 80Gi
        ("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))", True),
        ("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('81560Mi'))", True),
        ("device.capacity['gpu.nvidia.com'].memory == quantity('81559Mi')", True),
        ("quantity('1Gi') == quantity('1024Mi')", True),
        ("quantity('500m').add(1).compareTo(quantity('1.5')) == 0", True),
        ("quantity('2Gi').sub(quantity('1Gi')).asInteger() == 1073741824", True),
        ("quantity('1.5').isInteger()", False),
        # `sign` is a global function in library/quantity.go (cel.Overload, not MemberOverload).
        ("sign(quantity('-3')) == -1", True),
        ("isQuantity('80Gi') && !isQuantity('eighty')", True),
        ("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))", True),
        ("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.65.6')) < 0", True),
        ("device.attributes['gpu.nvidia.com'].driverVersion == semver('570.172.8+build.3')", True),
        ("device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() >= 9", True),
        ("semver('1.0.0-alpha').isLessThan(semver('1.0.0'))", True),
        ("semver('1.0.0-alpha.1').isLessThan(semver('1.0.0-alpha.beta'))", True),
        ("semver('1.0.0-2').isLessThan(semver('1.0.0-10'))", True),  # numeric identifiers compare as numbers
        ("isSemver('1.2.3') && !isSemver('570.172.08')", True),  # a leading zero is not SemVer 2.0
        ("device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:18')", True),
        ("device.attributes['gpu.nvidia.com'].index == 0", True),
        # A domain the device has no attribute in is an empty map, not an error (Kubernetes' map-with-default).
        ("'model' in device.attributes['dra.example.com']", False),
        ("!has(device.attributes['dra.example.com'].model)", True),
        # A quantity is never its string, a version never its text.
        ("device.capacity['gpu.nvidia.com'].memory == '81559Mi'", False),
        ("device.attributes['gpu.nvidia.com'].driverVersion == '570.172.8'", False),
        # Whole-map reads see every attribute (no projection): still right.
        ("device.attributes['gpu.nvidia.com'].exists(k, k == 'uuid')", True),
        ("device.attributes['gpu.nvidia.com'].size() == 7", True),
        ("device.allowMultipleAllocations == false", True),
    ],
)
def test_selector_evaluates_as_kubernetes_does(expression: str, expected: bool) -> None:
    assert matches(expression) is expected


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ("device.driver ==", "compilation failed: Syntax error"),
        ("", "empty CEL expression"),
        ("device.attributes['dra.example.com'].model == 'x'", "CEL runtime error: no such key: model"),
        ("device.attributes['gpu.nvidia.com'].productName > 5", "CEL runtime error: no such overload"),
        # `>=` is not defined on quantities: Kubernetes users must call compareTo.
        (
            "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",
            "found no matching overload for '_>=_'",
        ),
        (
            "device.attributes['gpu.nvidia.com'].productName.compareTo(quantity('1')) == 0",
            "CEL runtime error: no such overload",
        ),
        ("quantity('eighty') == quantity('1')", "quantities must match the regular expression"),
        ("semver('570.172.08') == semver('1.0.0')", "Patch number must not contain leading zeroes"),
        # Kubernetes 1.29+ has strings v2: `reverse` (v3) is rejected by the API server too.
        (
            "device.attributes['gpu.nvidia.com'].productName.reverse() == 'x'",
            "undeclared reference to 'reverse'",
        ),
        ("quantity('-3').sign() == -1", "undeclared reference to 'sign'"),
        ("semver('v1.0') == semver('1.0.0')", "No Major.Minor.Patch elements found"),
        ("device.attributes['gpu.nvidia.com'].productName.find('(') == ''", "error parsing regexp"),
        ("[].min() == 0", "min(list) called on empty list"),
        ("quantity('1').div(0) == quantity('1')", "division by zero error"),
        ("device.attributes['gpu.nvidia.com'].productName", "must evaluate to bool, got string"),
        ("quantity('1.5').asInteger() == 1", "cannot convert value to integer"),
    ],
)
def test_errors_quote_what_went_wrong(expression: str, error: str) -> None:
    with pytest.raises(CelError) as caught:
        matches(expression)
    assert error in str(caught.value)
    assert "Traceback" not in str(caught.value)


def test_extension_errors_stay_off_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    # The library logs failing Python functions by default: one line per device would flood the CLI.
    with pytest.raises(CelError):
        matches("quantity('eighty') == quantity('1')")
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("80Gi", 80 * 2**30),
        ("500m", 0.5),
        ("1e3", 1000),
        ("1.5k", 1500),
        ("81559Mi", 81559 * 2**20),
        ("+2", 2),
    ],
)
def test_quantities_parse_exactly(text: str, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "80 Gi", "Gi", "1.2.3", "80GB"])
def test_bad_quantities_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


names = st.sampled_from(["productName", "uuid", "type", "architecture", "index", "model"])
values = st.one_of(
    st.sampled_from(["gpu", "mig", "NVIDIA H100 80GB HBM3", "NVIDIA L40S"]), st.integers(-3, 3)
)


def _answer(sel: Selector, device: DeviceFacts) -> bool | str:
    try:
        return sel.matches(device)
    except CelError as err:
        return str(err)


@given(st.dictionaries(names, values, max_size=6), st.sampled_from(["gpu", "NVIDIA L40S", "x"]))
def test_projection_never_changes_an_answer(attributes: dict[str, str | int], wanted: str) -> None:
    # The matcher memoises on what an expression names: evaluating it on the whole device must agree,
    # and an attribute the expression does not name must not change its key.
    device = DeviceFacts("gpu.nvidia.com", attributes, {"memory": "46068Mi"})
    for expression in (
        f"device.attributes['gpu.nvidia.com'].productName == '{wanted}'",
        f"'type' in device.attributes['gpu.nvidia.com'] && device.attributes['gpu.nvidia.com'].type == '{wanted}'",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) > 0",
    ):
        sel = compile_selector(expression)
        assert sel.names is not None
        assert _answer(sel, device) == _answer(replace(sel, names=None), device)
        other = DeviceFacts(device.driver, {**device.attributes, "unrelatedName": 7}, dict(device.capacity))
        assert sel.key(other) == sel.key(device)


def test_whole_map_reads_are_not_projected() -> None:
    assert compile_selector("device.attributes['gpu.nvidia.com'].exists(k, k == 'uuid')").names is None
    assert compile_selector("device.attributes['gpu.nvidia.com'].size() > 2").names is None
    assert compile_selector("device.attributes['gpu.nvidia.com'] == {}").names is None
