"""The findings registry: status, next and verdict rules of spec/findings.md."""

import pytest

from layers.findings import CODES, STOP, LayerResult, Severity, Target, WalkResult, finding


def test_every_layer_has_an_unknown_code_and_codes_match_their_layer() -> None:
    for code, spec in CODES.items():
        assert code.startswith(f"L{spec.layer}_")
    for layer in range(1, 6):
        assert CODES[f"L{layer}_UNKNOWN"].severity == Severity.UNKNOWN


def test_status_is_the_worst_and_next_comes_from_the_most_severe_that_names_one() -> None:
    r = LayerResult.build(
        1,
        [
            finding("L1_POD_PENDING", "pending"),  # warn, names none
            finding("L1_GPU_EXHAUSTED", "full"),  # info, stop
            finding("L1_ALLOCATABLE_BELOW_CAPACITY", "8 vs 7", node="gpu-7"),  # fault, 5
        ],
    )
    assert r.status == Severity.FAULT and r.next == 5
    assert r.findings[0].code == "L1_ALLOCATABLE_BELOW_CAPACITY"


def test_equally_severe_findings_the_first_in_the_table_wins() -> None:
    r = LayerResult.build(
        1, [finding("L1_NODES_UNSCHEDULABLE", "cordoned"), finding("L1_POD_PENDING", "pending")]
    )
    assert r.next == STOP and r.next_layer is None


def test_no_finding_naming_next_goes_to_the_following_layer_and_ends_after_five() -> None:
    assert LayerResult.build(4, [finding("L4_OK", "ok")]).next == 5
    assert LayerResult.build(5, [finding("L5_OK", "ok")]).next is None
    assert LayerResult.build(3, [finding("L3_KERNEL_SKEW", "skew")]).next == 4
    assert LayerResult.build(3, [finding("L3_DRIVER_BUILD_FAILED", "no headers")]).next == STOP


def test_validator_next_depends_on_its_stage() -> None:
    driver = finding("L2_VALIDATOR_STUCK", "driver-validation", next=3)
    cuda = finding("L2_VALIDATOR_STUCK", "cuda-validation")
    assert LayerResult.build(2, [driver]).next == 3
    assert LayerResult.build(2, [cuda]).next == 3  # names none: the following layer


def _walk(*layers: LayerResult) -> WalkResult:
    return WalkResult(Target("ml", "trainer-0", None), layers)


def test_verdict_prefers_the_deeper_layer_then_the_more_specific_code() -> None:
    l1 = LayerResult.build(1, [finding("L1_ALLOCATABLE_BELOW_CAPACITY", "gap", node="gpu-7")])
    l5 = LayerResult.build(
        5,
        [
            finding("L5_ALLOCATABLE_BELOW_CAPACITY", "gap", node="gpu-7"),
            finding("L5_DEVICE_UNHEALTHY", "unhealthy", node="gpu-7"),
            finding("L5_XID", "Xid 79", node="gpu-7", severity=Severity.FAULT),
        ],
    )
    v = _walk(l1, l5).verdict
    assert v is not None and v.code == "L5_XID"


def test_nvml_failure_is_the_verdict_over_the_validator_it_stalls() -> None:
    l2 = LayerResult.build(
        2,
        [
            finding("L2_VALIDATOR_STUCK", "stopped at plugin-validation", node="gpu-1"),
            finding("L2_DEVICE_PLUGIN_NVML_FAILED", "NVML", node="gpu-1"),
        ],
    )
    v = _walk(l2).verdict
    assert v is not None and v.code == "L2_DEVICE_PLUGIN_NVML_FAILED"


def test_verdict_is_none_when_all_ok_and_info_counts_when_nothing_is_worse() -> None:
    assert _walk(LayerResult.build(1, [finding("L1_POD_SCHEDULED", "bound")])).verdict is None
    v = _walk(LayerResult.build(1, [finding("L1_GPU_EXHAUSTED", "full")])).verdict
    assert v is not None and v.code == "L1_GPU_EXHAUSTED"


def test_unknown_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown finding code"):
        finding("L9_NOPE", "x")
