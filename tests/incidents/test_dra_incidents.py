"""Black-box DRA incidents (tests/incidents/dra/*.yaml): resource.k8s.io objects as the API serves them.

Each file is one incident the bundled scenarios do not show: v1beta1 shapes and a DeviceTaintRule on a
1.33 cluster, CEL selectors that do not evaluate (an operator on a quantity, a missing attribute), a
slice with a bad generation and an incomplete pool, adminAccess claims (never "taken"), allocationMode
All, firstAvailable alternatives, gpu-lost taints on a bound pod, and GPU series labelled by claim
only. The walk must give `x-expect`; the tests below pin the evidence a person acts on.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import Incidents, check_structure, names, names_elsewhere

DRA = Incidents("dra")
FILES, IDS, findings = DRA.files, DRA.ids, DRA.findings


def test_at_least_eight_incidents() -> None:
    assert len(FILES) >= 8, FILES


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_every_other_scenario() -> None:
    assert not names(FILES) & names_elsewhere()


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def test_taint_rule_on_v1beta1_slices_names_the_rule() -> None:
    [f] = findings("dra-v1beta1-firmware-taint-rule", "L1_DRA_DEVICE_TAINTED")
    assert f.node == "a10-node-02" and f.next == 5
    assert len(f.evidence) == 4  # every GPU of the pool, none of the other node's
    assert all(
        "maintenance.example.com/gpu-firmware=96.00.AF.00.01:NoExecute" in e
        and "from DeviceTaintRule a10-node-02-firmware-update" in e
        for e in f.evidence
    )


@pytest.mark.parametrize(
    ("stem", "expression", "error"),
    [
        (
            "dra-cel-quantity-compared-with-operator",
            "device.capacity['gpu.nvidia.com'].memory >= quantity('40Gi')",
            # A quantity has no `>=`: Kubernetes' type-checker refuses it when the claim is created.
            "compilation failed: found no matching overload for '_>=_'",
        ),
        (
            "dra-cel-missing-attribute-profile",
            "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
            "CEL runtime error: no such key: profile",
        ),
    ],
)
def test_a_selector_that_does_not_evaluate_is_quoted_with_its_error(
    stem: str, expression: str, error: str
) -> None:
    [f] = findings(stem, "L1_DRA_SELECTOR_UNSATISFIED")
    assert error in f.summary
    [line] = [e for e in f.evidence if e.startswith(expression)]
    # A runtime error names the device it failed on; a compile error fails on none.
    assert error in line and ("(device gpu-0 in ResourceSlice " in line) is error.startswith("CEL runtime")


def test_bad_generation_and_incomplete_pool_are_read_around() -> None:
    [problems] = findings("dra-slice-bad-generation-incomplete-pool", "L1_UNKNOWN")
    assert any(
        "spec.pool.generation '2a' is not a non-negative integer; the slice is ignored" in e
        for e in problems.evidence
    )
    assert any("pool gpu-l40s-02: generation 3 has 1 of 2 ResourceSlices" in e for e in problems.evidence)
    silent = findings("dra-slice-bad-generation-incomplete-pool", "L1_DRA_NO_DEVICES")
    assert sorted(f.node for f in silent) == ["gpu-l40s-01", "gpu-l40s-02"]
    [held] = findings("dra-slice-bad-generation-incomplete-pool", "L1_DRA_DEVICES_EXHAUSTED")
    assert held.node == "gpu-l40s-03"


def test_admin_access_claims_do_not_take_devices() -> None:
    [f] = findings("dra-admin-access-probe-not-counted", "L1_DRA_DEVICES_EXHAUSTED")
    [line] = f.evidence
    assert line.startswith("gpu-a-01: 4 matching, 0 tainted, 1 taken by ml/tgi-small-0-gpu-")
    assert line.endswith("3 free < 4") and "gpu-monitoring" not in line


def test_allocation_mode_all_needs_every_device() -> None:
    [f] = findings("dra-allocation-mode-all-one-taken", "L1_DRA_DEVICES_EXHAUSTED")
    assert f.evidence[0].endswith("1 free < 2")
    [pending] = findings("dra-allocation-mode-all-one-taken", "L1_DRA_CLAIM_PENDING")
    assert "  request gpus: deviceClassName gpu.nvidia.com, all devices" in pending.evidence


def test_first_available_alternatives_are_each_judged() -> None:
    [pending] = findings("dra-first-available-falls-back-to-a100", "L1_DRA_CLAIM_PENDING")
    assert "  request gpu/h100: deviceClassName gpu.nvidia.com, count 1" in pending.evidence
    assert "  request gpu/a100: deviceClassName gpu.nvidia.com, count 2" in pending.evidence
    [f] = findings("dra-first-available-falls-back-to-a100", "L1_DRA_DEVICES_EXHAUSTED")
    assert f.evidence[0].startswith("a100-40g-01: 8 matching, 0 tainted, 8 taken by ml/gpt-neox-train-")


def test_gpu_lost_and_ignored_xid_on_a_bound_pod() -> None:
    stem = "dra-gpu-lost-bound-training-pod"
    [tainted] = findings(stem, "L1_DRA_DEVICE_TAINTED")
    assert tainted.node == "h100-node-01" and len(tainted.evidence) == 8
    assert all(e.endswith("(allocated to this pod)") for e in tainted.evidence)
    [lost] = findings(stem, "L5_DEVICE_UNHEALTHY")
    assert len(lost.evidence) == 8 and all(": GPU lost — [ResourceSlice " in e for e in lost.evidence)
    [xid13] = findings(stem, "L5_XID")
    assert xid13.severity.label == "info"  # effect None: evidence, not a fault
    assert "taint gpu.nvidia.com/xid=13:None" in xid13.evidence[0]


def test_series_labelled_by_claim_only_are_the_pods() -> None:
    [f] = findings("dra-dcgm-claim-labels-oom", "L4_FB_RESERVED_NORMAL")
    assert f.node == "l40s-dra-01" and "GPU 2 (" in f.summary
    assert f.evidence[0].startswith("GPU 2 (") and "used by the pod" in f.evidence[0]


def test_a_domain_without_status_names_the_crashing_controller() -> None:
    [f] = findings("dra-compute-domain-controller-crashloop", "L2_COMPUTE_DOMAIN_NOT_READY")
    assert "0 of 2 IMEX daemons ready, 2 node(s) never joined" in f.summary
    assert any(
        "is not Ready: container compute-domain: CrashLoopBackOff, 19 restarts" in e for e in f.evidence
    )
    assert any("error creating informer factory: Unauthorized" in e for e in f.evidence)
