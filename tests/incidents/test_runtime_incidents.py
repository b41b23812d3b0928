"""Incidents about what the runtime and the logs say (tests/incidents/runtime/*.yaml).

Production-shaped fleets (several pools, operator versions, sick nodes that are not the target's)
built from real-world text: the NVIDIA runtime hook's and CDI's refusals as containerd and CRI-O
wrap them, DCGM's last-Xid gauge that never resets, the standalone device plugins' labels,
time-sliced nodes, chatty plugin logs. Scenario in, expected codes/next/verdict out (`x-expect`);
a few tests pin the evidence a person needs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from layers.findings import Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import (
    INCIDENT_FOLDERS,
    Incidents,
    check_structure,
    names,
    names_elsewhere,
)

RUNTIME = Incidents("runtime")
FILES, IDS, findings = RUNTIME.files, RUNTIME.ids, RUNTIME.findings


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_every_other_incident() -> None:
    assert not names(FILES) & names_elsewhere(*INCIDENT_FOLDERS)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def digest_of(stem: str) -> dict[str, Any]:
    from bot.sources.scenario import build_sources, load_scenario
    from layers.digest import collect_digest

    cluster, tel = build_sources(load_scenario(RUNTIME.path(stem)))
    return {f["node"]: f for f in json.loads(json.dumps(collect_digest(cluster, tel).to_dict()))["flagged"]}


# --- item 6: DCGM's last-Xid gauge never resets -------------------------------------------------


def test_weeks_old_last_xid_is_history_in_the_walk_and_left_out_of_the_digest() -> None:
    stem = "last-xid48-gauge-weeks-old-h100-pool"
    [old] = findings(stem, "L5_XID")
    assert old.severity == Severity.INFO and old.node == "h100-07"
    assert old.summary.startswith("last Xid 48 on h100-07") and "before the last 24 h" in old.summary
    flagged = digest_of(stem)
    assert "h100-07" not in flagged  # nothing else is wrong with it
    assert flagged["l40s-02"]["xids_24h"] == [79]  # a gauge that changed today is news
    # one GPU short since an Xid 79 three days ago, another GPU holding the old 48: neither is of the last 24 h
    assert flagged["h100-03"]["reasons"] == ["ALLOCATABLE_BELOW_CAPACITY"]
    assert flagged["h100-03"]["xids_24h"] == []


# --- item 2: containers the NVIDIA runtime refuses to start ---------------------------------------


def test_cuda_requirement_is_read_from_the_status_and_the_kubelet_event() -> None:
    stem = "triton-cuda129-on-driver-550-a100-pool"
    [f] = findings(stem, "L2_CONTAINER_START_FAILED")
    assert f.next == 3 and f.node == "a100-pcie-04" and "container triton" in f.summary
    assert f.evidence[0] == (
        "container triton (StartError): nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.9, "
        "please update your driver to a newer version, or use an earlier cuda container"
    )
    assert any(
        e.startswith("event: Warning Failed (x7) kubelet: Error: failed to create containerd task")
        for e in f.evidence
    )
    [old] = findings(stem, "L3_DRIVER_TOO_OLD")
    assert "CUDA >= 12.9" in old.summary and "(550.90.07) supports CUDA 12.4" in old.summary
    # Issue 18: the H100s have a newer driver, but the pod selects the A100 pool: no place to send it.
    assert "no GPU node of the fleet (14) the pod could run on has a driver that would do" in old.evidence[2]
    off = next(e for e in old.evidence if e.startswith("newer drivers the pod cannot use now (8): "))
    assert "h100-sxm-01 (nodeSelector node-pool=a100-inference, node has node-pool=h100-train)" in off
    assert "a100-pcie" not in off and "run it on" not in old.summary


def test_crio_wrapped_driver_not_loaded_sends_the_walk_to_the_driver_build() -> None:
    stem = "crio-driver-not-loaded-new-kernel-ubuntu24"
    [f] = findings(stem, "L2_CONTAINER_START_FAILED")
    assert f.next == 3 and "the NVIDIA driver is not loaded on gpu-l40s-06" in f.summary
    assert f.evidence[0] == (
        "container cycles (CreateContainerError): nvidia-container-cli: initialization error: nvml error: driver not loaded"
    )
    assert not findings(stem, "L3_DRIVER_TOO_OLD")


def test_cdi_refusal_names_the_device_and_names_no_layer() -> None:
    [f] = findings("cdi-unresolvable-gpu-uuid-rke2-rocky9", "L2_CONTAINER_START_FAILED")
    assert f.next is None and f.node == "rke2-t4-2"
    assert "unresolvable CDI devices management.nvidia.com/gpu=GPU-" in f.evidence[0]
    assert any("nvidia-container-toolkit-ctr" in c for c in f.commands)


def test_node_walk_reads_the_start_failures_of_the_pods_on_the_node() -> None:
    """The digest's "diagnose node" walk: no target pod, the node's own workloads are the evidence."""
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import open_node, run_layer

    cluster, tel = build_sources(load_scenario(RUNTIME.path("unknown-device-after-xid79-dgx-a100")))
    result = run_layer(open_node(cluster, tel, "dgx-a100-07"), 2)
    refused = [f for f in result.findings if f.code == "L2_CONTAINER_START_FAILED"]
    assert sorted(f.summary.split(" ")[0] for f in refused) == ["llm/nemo-eval-0", "llm/nemo-sft-worker-1"]
    assert all(f.node == "dgx-a100-07" and f.next is None for f in refused)
    assert all("unknown device" in f.evidence[0] for f in refused)


# --- item 3: every way the device plugin is deployed ---------------------------------------------


def test_static_manifest_plugin_is_found_and_read_without_an_operator() -> None:
    stem = "static-manifest-plugin-xid13-no-operator"
    [ok] = findings(stem, "L2_OK")
    assert (
        "there is no validator (a standalone device plugin)" in ok.summary
        and "validator passed" not in ok.summary
    )
    [x] = findings(stem, "L5_XID")
    assert x.summary.startswith("Xid 13 on gpu-rtx6000-03") and x.severity == Severity.WARN
    assert any("nvidia-device-plugin-ctr" in c for c in x.commands)


def test_gke_managed_plugin_log_names_the_lost_gpu() -> None:
    [bad] = findings("gke-managed-plugin-xid79-l4-pending", "L5_DEVICE_UNHEALTHY")
    assert bad.node == "gke-ml-l4-pool-5f1d2c3b-9xkp" and "GPU-" in bad.summary  # "on GPU=…", not all devices
    assert any("-n kube-system" in c and "-c nvidia-gpu-device-plugin" in c for c in bad.commands)
