"""The second-round layer 2-4 and DRA probe incidents (tests/incidents/probe7/): what a person acts on,
and each incident replayed offline from the must-gather bundle gpubot writes for its target.

spec/interfaces.md: a bundle is what `gpubot why --bundle` reads back; the replayed walk must reach
the same diagnosis as the live one, redactions included (spec/findings.md, DRA: a bundle holds the DRA
objects). The `x-expect` of each file is checked by test_probe_incidents.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bot.actions.archive import Caps
from bot.actions.bundle_writer import collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.scenario import build_sources, load_scenario, parse_scenario
from layers.findings import WalkResult
from layers.operands import _oom_hint
from layers.walk import walk
from tests import test_bundled_scenarios as bundled
from tests.incidents.scenario_checks import Incidents

PROBE7 = Incidents("probe7")


def _target(path: Path) -> tuple[str, str]:
    ns, _, name = str(load_scenario(path).extra["x-expect"]["target"]).partition("/")
    return ns, name


@pytest.mark.parametrize("path", PROBE7.files, ids=PROBE7.ids)
def test_bundle_of_the_target_replays_the_same_walk(path: Path, tmp_path: Path) -> None:
    scenario = load_scenario(path)
    snap, telemetry = build_sources(scenario)
    target = _target(path)
    live = walk(snap, telemetry, *target)
    assert [lr.layer for lr in live.layers] == scenario.extra["x-expect"]["walk"]  # the diagnosis replayed
    out = tmp_path / "bundle.tar.gz"
    collect_bundle(snap, telemetry, out, target=target, walk=live)
    bundle = read_bundle(out)
    replay_cluster, replay_telemetry = build_sources(bundle)
    # Summaries name their source ("scenario <name>", "scenario must-gather …"): all else is equal.
    replayed = json.dumps(walk(replay_cluster, replay_telemetry, *target).to_dict(), sort_keys=True)
    original = json.dumps(live.to_dict(), sort_keys=True)
    assert replayed.replace(bundle.name, "<source>") == original.replace(scenario.name, "<source>")


def test_operand_oomkilled_is_not_the_targets() -> None:
    stem = "probe7-v24-9-driver-ctr-oomkilled-compiling-operands-init-a100-21-nodes"
    [f] = [f for f in PROBE7.findings(stem, "L2_OPERAND_FAILING") if "nvidia-driver-ctr" in f.summary]
    assert f.node == "a100-train-06"
    assert "last terminated: OOMKilled (exit code 137)" in f.evidence
    assert "OOMKilled over its memory limit of 1Gi" in f.summary, f.summary


def test_operand_oomkilled_without_a_limit_blames_the_node() -> None:
    pod = {"spec": {"containers": [{"name": "nvidia-driver-ctr", "image": "nvcr.io/nvidia/driver:550"}]}}
    assert "no limit set: the node ran out" in _oom_hint(pod, "nvidia-driver-ctr")


def test_llama_cpp_cuda_init_line_is_the_evidence() -> None:
    stem = "probe7-llama-cpp-cuda-unknown-error-nvidia-uvm-missing-l40s-20-nodes"
    [f] = PROBE7.findings(stem, "L2_APP_SEES_NO_GPU")
    assert any("failed to initialize CUDA: unknown error" in e for e in f.evidence), f.evidence


def test_fabric_manager_names_the_mismatch() -> None:
    stem = "probe7-v25-3-driver-580-126-fabric-manager-590-mismatch-hgx-h100-22-nodes"
    [f] = PROBE7.findings(stem, "L3_FABRIC_MANAGER")
    assert f.node == "h100-infer-02"
    assert any("system not yet initialized" in e for e in f.evidence), f.evidence


def test_previous_log_oom_is_quoted() -> None:
    stem = "probe7-vllm-torch-outofmemoryerror-previous-log-only-h100-21-nodes"
    [f] = PROBE7.findings(stem, "L4_GPU_OOM_IN_LOGS")
    assert any("torch.OutOfMemoryError" in e for e in f.evidence), f.evidence


def test_extended_resource_exhaustion_names_the_h100_claims() -> None:
    stem = "probe7-dra-extended-resource-deviceclass-gpu-h100-exhausted-sick-a100-19-nodes"
    [f] = PROBE7.findings(stem, "L1_DRA_DEVICES_EXHAUSTED")
    assert sum(e.startswith("h100-") for e in f.evidence) == 4, f.evidence
    assert not any(e.startswith(("a100-", "l40s-")) for e in f.evidence), f.evidence


def test_gpucluster_plugin_failure_quotes_the_nvml_error() -> None:
    stem = "probe7-dra-gpucluster-kubelet-plugin-nvml-library-not-found-new-h200-18-nodes"
    found = PROBE7.findings(stem, "L2_OPERAND_FAILING")
    assert found and all(f.node == "h200-04" for f in found)
    assert any("ERROR_LIBRARY_NOT_FOUND" in e for f in found for e in f.evidence)


HISTORY = Path(__file__).resolve().parent
# Incidents whose telemetry only a long enough, fine enough bundle replays: a last-Xid gauge weeks old
# (info, not an Xid of the last 24 h, only when the hour before the 24 h is in the bundle) and vLLM
# preemptions (a 5-minute rate, which 5-minute samples cannot give).
NEEDS_HISTORY = [
    HISTORY / "runtime" / "last-xid48-gauge-weeks-old-h100-pool.yaml",
    HISTORY / "probe3" / "probe3-stale-xid48-gauge-relabelled-new-pod-h100-27-nodes.yaml",
    HISTORY / "l45" / "vllm-v1-data-parallel-preemptions-old-prom-labels.yaml",
]


@pytest.mark.parametrize("path", NEEDS_HISTORY, ids=[p.stem for p in NEEDS_HISTORY])
def test_bundle_keeps_the_history_the_walk_reads(path: Path, tmp_path: Path) -> None:
    snap, telemetry = build_sources(load_scenario(path))
    target = _target(path)
    live = walk(snap, telemetry, *target)
    out = tmp_path / "bundle.tar.gz"
    collect_bundle(snap, telemetry, out, target=target, walk=live)
    replayed = walk(*build_sources(read_bundle(out)), *target)

    def codes(result: WalkResult) -> list[tuple[int, str, str, str | None]]:
        return [(lr.layer, f.code, f.severity.label, f.node) for lr in result.layers for f in lr.findings]

    assert codes(replayed) == codes(live)
    assert replayed.verdict and live.verdict and replayed.verdict.code == live.verdict.code


# The Slack button's bundle: the finding's node and the thread's pod. Its replay reads the other nodes'
# objects too (layer 1 weighs every node; layer 2 examines the candidates), so those must be in it.
NODE_AND_TARGET = [
    PROBE7.path("probe7-dra-gpucluster-kubelet-plugin-nvml-library-not-found-new-h200-18-nodes"),
    HISTORY / "probe4" / "probe4-dra-gke-empty-resourceslice-a100-pool-16-nodes.yaml",
    HISTORY / "dra_fleets" / "dra-cel-lowerascii-selector-cordoned-h100-14-nodes.yaml",
    HISTORY / "dra" / "dra-slice-bad-generation-incomplete-pool.yaml",
    HISTORY / "dra" / "dra-compute-domain-controller-crashloop.yaml",
]


@pytest.mark.parametrize("path", NODE_AND_TARGET, ids=[p.stem for p in NODE_AND_TARGET])
def test_node_bundle_of_a_target_replays_its_layers_1_to_3(path: Path, tmp_path: Path) -> None:
    snap, telemetry = build_sources(load_scenario(path))
    target = _target(path)
    live = walk(snap, telemetry, *target)
    node = next(f.node for lr in live.layers for f in lr.findings if f.node)
    out = tmp_path / "bundle.tar.gz"
    collect_bundle(snap, telemetry, out, node=node, target=target, walk=live)
    replayed = walk(*build_sources(read_bundle(out)), *target)

    def upper(result: WalkResult) -> list[tuple[int, str, str | None, tuple[str, ...]]]:
        return [
            (lr.layer, f.code, f.node, tuple(f.evidence))
            for lr in result.layers
            if lr.layer <= 3
            for f in lr.findings
        ]

    assert upper(replayed) == upper(live)
    assert [lr.layer for lr in replayed.layers] == [lr.layer for lr in live.layers]
    assert replayed.verdict and live.verdict and replayed.verdict.code == live.verdict.code


V1BETA2 = sorted((Path(__file__).resolve().parent / "probe7" / "v1beta2").glob("*.yaml"))


@pytest.mark.parametrize("path", V1BETA2, ids=[p.stem for p in V1BETA2])
def test_v1beta2_objects_give_the_expected_diagnosis(path: Path) -> None:
    """A 1.33 API server serves DRA at resource.k8s.io/v1beta2 (the v1 shapes)."""
    slices = [
        o for o in yaml.safe_load(path.read_text(encoding="utf-8"))["objects"] if o["kind"] == "ResourceSlice"
    ]
    assert slices and all(o["apiVersion"] == "resource.k8s.io/v1beta2" for o in slices)
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


def test_plugin_log_keeps_its_unhealthy_mark_past_the_tail_cap(tmp_path: Path) -> None:
    """The device plugin prints a device's unhealthy mark once; hours of Xid 13 events follow. A bundle
    that kept only the log's tail lost the mark (and the Xid 48) on replay."""
    path = HISTORY / "probe" / "probe-old-plugin-will-go-unhealthy-xid48-20-nodes.yaml"
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.CSafeLoader)
    key = next(k for k, v in data["logs"].items() if "the device will go unhealthy" in v)
    data["logs"][key] += "".join(
        f"I1129 10:{i // 60 % 60:02d}:{i % 60:02d}.000000       1 health.go:159] Processing event {{Device:"
        "{Handle:0x7f7597647848} EventType:8 EventData:13 GpuInstanceId:4294967295 ComputeInstanceId:4294967295}\n"
        for i in range(600)
    )
    snap, telemetry = build_sources(parse_scenario(data, str(path)))
    target = _target(path)
    live = walk(snap, telemetry, *target)
    out = tmp_path / "bundle.tar.gz"
    collect_bundle(snap, telemetry, out, target=target, walk=live, caps=Caps(log_tail_lines=200))
    replayed = walk(*build_sources(read_bundle(out)), *target)

    def faults(result: WalkResult) -> list[tuple[int, str, str | None]]:
        return [
            (lr.layer, f.code, f.node)
            for lr in result.layers
            for f in lr.findings
            if f.severity.label == "fault"
        ]

    assert (5, "L5_DEVICE_UNHEALTHY", "a100-train-03") in faults(live)
    assert faults(replayed) == faults(live)
