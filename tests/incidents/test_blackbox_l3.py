"""Black-box layer-3 incidents (tests/incidents/blackbox/l3/*.yaml), written from the spec before reading the layer.

Each file is a customer-shaped scenario (spec/scenario.md): `kind: List` pastes, managedFields, owner
references, config-manager containers, CPU-only nodes and other workloads, `kubectl logs --timestamps`
and `--prefix` lines, logrus validator lines, expositions and series with history. The expected
diagnosis under `x-expect` comes from spec/findings.md. Covered: kernel headers not resolvable on a new
Rocky 9.5 node, an unreachable package mirror, Secure Boot in the newer installer wording (previous log
only), nvidia-installer failing on SLES 15 SP6, a host driver with driver.enabled=true ('already running'),
a pre-installed host driver the operator rightly skips, a fabric manager that dies on an HGX, a driver
canary via NVIDIADriver, three driver versions with the target on the majority, an AMI kernel skew
counted over GPU nodes only, an upgrade-failed node, and a build failure on a node that is not examined.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tests.test_bundled_scenarios as bundled
from layers.findings import Finding
from tests.incidents.scenario_checks import bundled_names, check_flattened_structure, incident_files, names

FILES = incident_files("blackbox/l3")
IDS = [p.stem for p in FILES]
ROOT = Path(__file__).resolve().parents[2]


def path_of(stem: str) -> Path:
    [path] = [p for p in FILES if p.stem == stem]
    return path


def l3(stem: str, code: str) -> Finding:
    result, _ = bundled.diagnose(path_of(stem))
    [layer] = [r for r in result.layers if r.layer == 3]
    hits = [f for f in layer.findings if f.code == code]
    assert len(hits) == 1, [f.code for f in layer.findings]
    return hits[0]


def test_at_least_eight_incidents() -> None:
    assert len(FILES) >= 8, FILES


def test_names_do_not_clash_with_bundled_or_other_incidents() -> None:
    mine = names(FILES)
    others = names(incident_files("l3")) | names(incident_files("l12")) | names(incident_files("l45"))
    assert len(mine) == len(FILES) and not mine & (bundled_names() | others)


def test_some_incidents_paste_kind_list() -> None:
    pasted = [p for p in FILES if "kind: List" in p.read_text(encoding="utf-8")]
    assert len(pasted) >= 4, pasted


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_structure(path: Path, tmp_path: Path) -> None:
    check_flattened_structure(path, tmp_path)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


# --- the layer-3 evidence itself -----------------------------------------------------------


def test_rocky_new_node_headers_quoted_with_timestamps_and_kernel_skew_counted() -> None:
    stem = "bb-l3-rocky95-new-node-kernel-unresolvable"
    f = l3(stem, "L3_DRIVER_BUILD_FAILED")
    assert f.node == "rocky-gpu-04.lab.example.net"
    assert "kernel: 5.14.0-503.38.1.el9_5.x86_64" in f.evidence
    assert any(e.endswith("Z Could not resolve Linux kernel version") for e in f.evidence)
    skew = l3(stem, "L3_KERNEL_SKEW")
    assert (
        "kernel: 5.14.0-427.42.1.el9_4.x86_64 → 3 nodes, 5.14.0-503.38.1.el9_5.x86_64 → 1 node"
        in skew.evidence
    )


def test_unreachable_mirror_is_named_as_the_cause() -> None:
    f = l3("bb-l3-airgapped-proxy-down-package-cache", "L3_DRIVER_BUILD_FAILED")
    assert "cannot reach its package repositories" in f.summary
    assert any(e.endswith("ERROR: Failed to update package cache. Ensure that the cluster can access the proper networks.")
               for e in f.evidence)  # fmt: skip


def test_secure_boot_new_wording_read_from_the_previous_log() -> None:
    f = l3("bb-l3-rhel94-secure-boot-only-gpu-node", "L3_DRIVER_BUILD_FAILED")
    assert "Secure Boot" in f.summary
    assert any(
        e.startswith("ERROR: The kernel module failed to load. Secure boot is enabled") for e in f.evidence
    )
    assert (
        "kubectl logs -n nvidia-system nvidia-driver-daemonset-vrjlv -c nvidia-driver-ctr --previous"
        in f.commands
    )


def test_installer_failure_behind_the_must_gather_prefix() -> None:
    f = l3("bb-l3-sles15sp6-installer-build-step-failed", "L3_DRIVER_BUILD_FAILED")
    assert "nvidia-installer failed" in f.summary
    assert any('"Building kernel modules"' in e for e in f.evidence)


def test_host_driver_conflict_evidence_and_commands_can_be_pasted() -> None:
    f = l3("bb-l3-host-driver-already-running-driver-enabled", "L3_PREINSTALLED_DRIVER_CONFLICT")
    assert f.node == "ws-gpu-b"
    assert (
        'time="2026-12-01T17:11:03Z" level=info msg="Detected a pre-installed driver on the host"'
        in f.evidence
    )
    assert "An instance of the NVIDIA driver is already running, aborting" in f.evidence
    assert "ClusterPolicy cluster-policy: spec.driver.enabled=true" in f.evidence
    assert "kubectl logs -n gpu-system nvidia-operator-validator-zll58 -c driver-validation" in f.commands
    assert not any("<" in c for c in f.commands), f.commands


def test_preinstalled_label_without_driver_pod_is_ok() -> None:
    f = l3("bb-l3-dgx-os-preinstalled-label-host-oomkilled", "L3_OK")
    assert f.node == "dgx-h100-02" and "driver: 550.163.01" in f.evidence


def test_fabric_manager_from_cuda_validator_and_app_with_a_runnable_command() -> None:
    f = l3("bb-l3-hgx-fabric-manager-lib-missing-cuda-validator", "L3_FABRIC_MANAGER")
    assert any("error code system not yet initialized" in e for e in f.evidence)
    assert any("Error 802: system not yet initialized" in e for e in f.evidence)
    assert f.commands[-1].startswith("kubectl exec -n nvidia-gpu-operator nvidia-driver-daemonset-")


def test_canary_nvidiadriver_is_a_pool_of_its_own() -> None:
    """Issue 18: the canary CR selects gpu-a100-04 alone, a driver pool of one: no skew; L3_OK says
    both pools' versions (the unlabelled new node counts in its pool, with no version)."""
    f = l3("bb-l3-nvidiadriver-canary-580-one-node", "L3_OK")
    assert "driver: 580.82.07" in f.evidence
    assert (
        "driver pools: NVIDIADriver default: driver 570.172.08 (4) of 5 nodes; "
        "NVIDIADriver a100-canary: driver 580.82.07 (1) of 1 node" in f.evidence
    ), f.evidence


def test_kernel_majority_is_over_gpu_nodes_not_the_cpu_pool() -> None:
    f = l3("bb-l3-eks-al2023-gpu-node-on-newer-ami-kernel", "L3_KERNEL_SKEW")
    assert f.node == "ip-10-42-17-203.us-west-2.compute.internal"
    assert (
        "kernel: 6.1.141-155.222.amzn2023.x86_64 → 3 nodes, 6.1.147-172.266.amzn2023.x86_64 → 1 node"
        in f.evidence
    )


def test_upgrade_failed_quotes_the_blocked_drain() -> None:
    f = l3("bb-l3-edge-l4-upgrade-failed-pdb-old-driver", "L3_DRIVER_UPGRADE_FAILED")
    assert any("violate the pod's disruption budget" in e for e in f.evidence)
    assert any(c.endswith("gpu-driver-upgrade-state=upgrade-required --overwrite") for c in f.commands)


def test_all_layers_json_through_the_cli() -> None:
    """`why --all --format json` runs every layer; layer 3's fault is `next: null` (stop) in JSON."""
    path = path_of("bb-l3-rhel94-secure-boot-only-gpu-node")
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "why", "cv-lab/yolo-train-0", "--scenario", str(path), "--all",
         "--format", "json"],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    doc = json.loads(out.stdout)
    assert [layer["layer"] for layer in doc["layers"]] == [1, 2, 3, 4, 5]
    three = doc["layers"][2]
    assert three["status"] == "fault" and three["next"] is None
    assert doc["verdict"]["code"] == "L3_DRIVER_BUILD_FAILED" and doc["verdict"]["layer"] == 3
    assert doc["target"] == {"namespace": "cv-lab", "pod": "yolo-train-0", "node": None}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["cv-lab/yolo-train-1"], "not found"),  # a typo in the pod name
        (["cv-lab/Yolo-train-0"], "invalid pod name"),
    ],
)
def test_unhappy_targets_exit_2_with_one_line(args: list[str], needle: str) -> None:
    path = path_of("bb-l3-rhel94-secure-boot-only-gpu-node")
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "why", *args, "--scenario", str(path)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode == 2
    assert (
        needle in out.stderr and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    )
