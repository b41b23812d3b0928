"""Layer-3 incidents in formats the bundled scenarios do not use, walked end to end.

Each file under l3/ is a complete scenario (spec/scenario.md) with `x-expect`, checked like the
bundled ones: structure first (tests/test_bundled_scenarios.py's rules), then the walk's layers,
verdict, expected and absent codes; then the layer-3 evidence itself. They differ from
bot/scenarios on purpose: the OpenShift Driver Toolkit container, precompiled Ubuntu drivers,
the Go k8s-driver-manager's logrus lines, NVIDIADriver-managed pods with CRLF and colour codes,
operator v24.6–v26.3 in gpu-system / nvidia-gpu-operator, `kubectl logs --timestamps`, error 802.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import bundled_names, check_structure, incident_files, names

FILES = incident_files("l3")
IDS = [p.stem for p in FILES]


def path_of(stem: str) -> Path:
    [path] = [p for p in FILES if p.stem == stem]
    return path


def l3(path: Path, code: str) -> object:
    result, _ = bundled.diagnose(path)
    [layer] = [r for r in result.layers if r.layer == 3]
    hits = [f for f in layer.findings if f.code == code]
    assert len(hits) == 1, [f.code for f in layer.findings]
    return hits[0]


def test_at_least_four_incidents() -> None:
    assert len(FILES) >= 4, FILES


def test_names_do_not_clash_with_bundled_scenarios() -> None:
    mine = names(FILES)
    theirs = bundled_names()
    assert len(mine) == len(FILES) and not mine & theirs


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_structure(path: Path) -> None:
    check_structure(path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def test_openshift_build_failure_comes_from_the_driver_toolkit_container() -> None:
    f = l3(path_of("ocp-dtk-compile-failure-kernel-too-new"), "L3_DRIVER_BUILD_FAILED")
    assert f.node == "worker-gpu-a100-0.ocp416.example.lab"  # type: ignore[attr-defined]
    assert "did not compile against the running kernel" in f.summary  # type: ignore[attr-defined]
    assert "kernel: 5.14.0-427.37.1.el9_4.x86_64" in f.evidence  # type: ignore[attr-defined]
    assert any("-c openshift-driver-toolkit-ctr" in c for c in f.commands)  # type: ignore[attr-defined]


def test_precompiled_package_missing_names_the_package_with_its_timestamp() -> None:
    f = l3(path_of("precompiled-ubuntu-kernel-package-missing"), "L3_DRIVER_BUILD_FAILED")
    assert "no precompiled NVIDIA driver package" in f.summary  # type: ignore[attr-defined]
    assert any(
        e.endswith("Z E: Unable to locate package linux-objects-nvidia-550-server-6.8.0-1015-aws")
        for e in f.evidence  # type: ignore[attr-defined]
    )
    assert "kernel: 6.8.0-1015-aws" in f.evidence  # type: ignore[attr-defined]


def test_host_driver_seen_by_the_go_driver_manager() -> None:
    f = l3(path_of("driver-manager-detects-host-driver"), "L3_PREINSTALLED_DRIVER_CONFLICT")
    assert "time=2026-11-29T09:58:02Z level=fatal msg=driver is pre-installed on host" in f.evidence  # type: ignore[attr-defined]
    assert "ClusterPolicy cluster-policy: spec.driver.enabled=unset (defaults to true)" in f.evidence  # type: ignore[attr-defined]


def test_crlf_and_colour_codes_leave_a_clean_dnf_line() -> None:
    f = l3(path_of("nvidiadriver-cr-rhel9-eus-kernel-headers"), "L3_DRIVER_BUILD_FAILED")
    assert (
        "Error: Unable to find a match: kernel-headers-5.14.0-570.112.1.el9_6.x86_64 "
        "kernel-devel-5.14.0-570.112.1.el9_6.x86_64" in f.evidence  # type: ignore[attr-defined]
    )
    skew = l3(path_of("nvidiadriver-cr-rhel9-eus-kernel-headers"), "L3_KERNEL_SKEW")
    assert skew.node == "rhel-gpu-03"  # type: ignore[attr-defined]


def test_error_802_with_a_ready_driver_is_fabric_manager() -> None:
    f = l3(path_of("hgx-b200-fabric-manager-error-802"), "L3_FABRIC_MANAGER")
    evidence = " | ".join(f.evidence)  # type: ignore[attr-defined]
    assert "Error 802: system not yet initialized" in evidence
    assert "error code system not yet initialized" in evidence
