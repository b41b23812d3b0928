"""Field incidents, round four (tests/incidents/field/, issue 30): the `x-expect` of each file, and
what a person acts on in each — the driver image with no build for the node's OS, the kubelet's
TopologyAffinityError, the plugin that never re-registered, Xid 154's recovery action, the MIG
manager at work, and the scheduler's newer wording in the events.k8s.io/v1 event shape."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from layers.findings import STOP, Severity
from tests import test_bundled_scenarios as bundled
from tests.incidents.field import build
from tests.incidents.scenario_checks import Incidents, bundled_names, check_structure, names

FIELD = Incidents("field")


def test_one_incident_per_item_at_least() -> None:
    assert len(FIELD.files) == len(build.RECIPES) >= 6


@pytest.mark.parametrize("path", FIELD.files, ids=FIELD.ids)
def test_files_follow_the_scenario_format(path: Path) -> None:
    check_structure(path)


def test_names_differ_from_every_other_scenario() -> None:
    assert not names(FIELD.files) & bundled_names()


@pytest.mark.parametrize("path", FIELD.files, ids=FIELD.ids)
def test_default_walk_gives_the_expected_diagnosis(path: Path) -> None:
    bundled.test_default_walk_gives_the_expected_diagnosis(path)


@pytest.mark.parametrize("recipe", build.RECIPES, ids=[r.__name__ for r in build.RECIPES])
def test_committed_files_are_what_the_builder_writes(recipe: build.Recipe) -> None:
    fleet, expect = recipe()
    assert bundled.read(FIELD.path(fleet.name))["x-expect"] == expect


# --- item 1 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "image", "os_image", "words"),
    [
        ("field-ubuntu24-h100-driver-550-54-15-image-not-found-containerd-22-nodes",
         "nvcr.io/nvidia/driver:550.54.15-ubuntu24.04", "Ubuntu 24.04.1 LTS", "code = NotFound"),
        ("field-rhel9-4-a100-driver-535-manifest-unknown-crio-21-nodes",
         "nvcr.io/nvidia/driver:535.104.05-rhel9.4", "Red Hat Enterprise Linux 9.4 (Plow)", "manifest unknown"),
    ],
)  # fmt: skip
def test_driver_image_names_the_image_the_os_and_where_drivers_run(
    stem: str, image: str, os_image: str, words: str
) -> None:
    [f] = FIELD.findings(stem, "L3_DRIVER_IMAGE_UNAVAILABLE")
    assert f.severity == Severity.FAULT and f.next == STOP
    assert image in f.summary and os_image in f.summary
    assert any(e.startswith(f"image: {image}") for e in f.evidence), f.evidence
    assert any("osImage " + os_image in e and "kernel " in e for e in f.evidence), f.evidence
    assert any(words in e for e in f.evidence), f.evidence  # the runtime's own not-found words
    assert any(e.startswith("Ubuntu 22.04.5 LTS: ") for e in f.evidence), f.evidence  # where drivers run
    assert "pin a driver version published for" in f.summary


# --- item 2 ---------------------------------------------------------------------------------------


def test_topology_refusal_names_free_gpus_and_policy_and_no_card_fault() -> None:
    stem = "field-p5-h100-topology-affinity-error-single-numa-4-gpu-21-nodes"
    [f] = FIELD.findings(stem, "L1_ADMISSION_REJECTED")
    assert f.severity == Severity.FAULT and f.next == STOP and f.node == "h100-infer-03"
    assert "TopologyAffinityError" in f.summary and "not a GPU fault" in f.summary
    assert (
        "status.message=Pod was rejected: Resources cannot be allocated with Topology locality" in f.evidence
    )
    assert any("free nvidia.com/gpu=4" in e for e in f.evidence), f.evidence
    assert any("topology manager policy" in e for e in f.evidence), f.evidence


def test_topology_policy_is_read_from_node_resource_topology(tmp_path: Path) -> None:
    stem = "field-p5-h100-topology-affinity-error-single-numa-4-gpu-21-nodes"
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import walk

    scenario = load_scenario(FIELD.path(stem))
    scenario.objects.append(
        {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
         "metadata": {"name": "h100-infer-03"}, "topologyPolicies": ["SingleNUMANodePodLevel"],
         "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                        {"name": "topologyManagerScope", "value": "pod"}], "zones": []}
    )  # fmt: skip
    result = walk(*build_sources(scenario), "arc-runners", "mt-l-h100-4-2pfzt-workflow")
    [f] = [f for lr in result.layers for f in lr.findings if f.code == "L1_ADMISSION_REJECTED"]
    assert "h100-infer-03: topology manager policy single-numa-node (scope pod)" in f.evidence


# --- item 3 ---------------------------------------------------------------------------------------


def test_unregistered_plugin_sends_layer_1_to_2_and_says_restart() -> None:
    stem = "field-kubelet-restart-plugin-not-reregistered-a100-8-allocatable-0-21-nodes"
    [gap] = FIELD.findings(stem, "L1_ALLOCATABLE_BELOW_CAPACITY")
    assert gap.next == 2 and "not the card" in gap.summary
    [f] = FIELD.findings(stem, "L2_DEVICE_PLUGIN_NOT_REGISTERED")
    assert f.node == "a100-train-06" and f.next == STOP
    assert "restart the plugin pod" in f.summary
    assert "capacity nvidia.com/gpu=8, allocatable nvidia.com/gpu=0" in f.evidence
    assert any("Registered device plugin for 'nvidia.com/gpu' with Kubelet" in e for e in f.evidence)
    assert any(e.startswith("kubelet started after it (2026-11-29T09:46:58Z)") for e in f.evidence), (
        f.evidence
    )


def _walk_variant(stem: str, edit: object) -> list[str]:
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import walk

    scenario = load_scenario(FIELD.path(stem))
    scenario = copy.deepcopy(scenario)
    edit(scenario)  # type: ignore[operator]
    ns, _, name = str(scenario.extra["x-expect"]["target"]).partition("/")
    result = walk(*build_sources(scenario), ns, name)
    return [f.code for lr in result.layers for f in lr.findings]


def test_a_kubelet_start_before_the_registration_is_not_this() -> None:
    stem = "field-kubelet-restart-plugin-not-reregistered-a100-8-allocatable-0-21-nodes"

    def earlier(scenario: object) -> None:
        for obj in scenario.objects:  # type: ignore[attr-defined]
            if obj.get("kind") == "Node" and obj["metadata"]["name"] == "a100-train-06":
                obj["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-20T09:46:58Z"
            if obj.get("kind") == "Event" and obj["involvedObject"].get("name") == "a100-train-06":
                obj["lastTimestamp"] = obj["firstTimestamp"] = "2026-11-20T09:46:41Z"

    codes = _walk_variant(stem, earlier)
    assert "L2_DEVICE_PLUGIN_NOT_REGISTERED" not in codes and "L5_ALLOCATABLE_BELOW_CAPACITY" in codes


def test_an_unhealthy_mark_keeps_the_card_question() -> None:
    stem = "field-kubelet-restart-plugin-not-reregistered-a100-8-allocatable-0-21-nodes"

    def marked(scenario: object) -> None:
        logs = scenario.logs  # type: ignore[attr-defined]
        key = next(k for k in logs if "device-plugin" in k and k.endswith("nvidia-device-plugin") and any(
            o.get("kind") == "Pod" and o["metadata"]["name"] == k.split("/")[1]
            and o["spec"].get("nodeName") == "a100-train-06" for o in scenario.objects))  # type: ignore[attr-defined]  # fmt: skip
        logs[key] += (
            "I1129 09:58:05.486697       1 health.go:185] XidCriticalError: Xid=79 on Device=GPU-0; marking device as unhealthy.\n"
        )

    codes = _walk_variant(stem, marked)
    assert "L2_DEVICE_PLUGIN_NOT_REGISTERED" not in codes and "L5_XID" in codes


# --- item 4 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stem", "action", "xid"),
    [
        (
            "field-nvsentinel-syslog-xid48-xid154-gpu-reset-required-h100-bound-22-nodes",
            "GPU Reset Required",
            48,
        ),
        (
            "field-nvsentinel-dmesg-xid79-xid154-node-reboot-plugin-h100-bound-22-nodes",
            "Node Reboot Required",
            79,
        ),
    ],
)
def test_xid154_action_is_read_and_said_in_the_xid_it_accompanies(stem: str, action: str, xid: int) -> None:
    xids = FIELD.findings(stem, "L5_XID")
    [notice] = [f for f in xids if f.summary.startswith("Xid 154 ")]
    assert notice.severity == Severity.INFO and repr(action) in notice.summary
    assert "not in this evidence" not in notice.summary
    [other] = [f for f in xids if f.summary.startswith(f"Xid {xid} ")]
    assert other.severity == Severity.FAULT
    assert f"the driver's recovery action for it: {action} (Xid 154)" in other.summary
    assert any(e.endswith(f": {action}") and "Xid 154" in e for e in other.evidence), other.evidence


# --- item 5 ---------------------------------------------------------------------------------------


def test_mig_manager_at_work_is_an_info_line_naming_it() -> None:
    stem = "field-mig-manager-pending-4-min-all-2g-20gb-a100-22-nodes"
    [gap] = FIELD.findings(stem, "L1_ALLOCATABLE_BELOW_CAPACITY")
    assert gap.severity == Severity.INFO and gap.next is None
    assert "MIG manager" in gap.summary and "not a fault" in gap.summary
    assert any("nvidia.com/mig.config.state" in e or "paused-for-mig-change" in e for e in gap.evidence)


def test_mig_manager_pending_past_15_minutes_is_a_failure() -> None:
    stem = "field-mig-manager-pending-22-min-stuck-all-2g-20gb-a100-22-nodes"
    [f] = FIELD.findings(stem, "L1_MIG_CONFIG_FAILED")
    assert f.node == "a100-mig-03" and "pending for 21 min" in f.summary


# --- item 6 ---------------------------------------------------------------------------------------


def test_untolerated_taints_without_key_are_found_on_the_nodes() -> None:
    stem = "field-k8s-1-34-untolerated-taints-no-key-dra-notes-h100-21-nodes"
    [f] = FIELD.findings(stem, "L1_UNTOLERATED_TAINT")
    assert "nvidia.com/gpu=present:NoSchedule" in f.summary
    [pending] = FIELD.findings(stem, "L1_POD_PENDING")
    assert "no new claims" not in pending.summary and "preemption" not in pending.summary
    # The events.k8s.io/v1 shape: series.count is the repeat count, the recorder the source.
    assert any("FailedScheduling (x7) default-scheduler:" in e for e in pending.evidence), pending.evidence


def test_persistentvolume_node_affinity_wording_and_event_order() -> None:
    stem = "field-k8s-1-33-persistentvolume-node-affinity-zonal-ebs-dra-notes-a100-21-nodes"
    [f] = FIELD.findings(stem, "L1_VOLUME_NODE_AFFINITY")
    assert any("didn't match PersistentVolume's node affinity" in e for e in f.evidence), f.evidence
    [pending] = FIELD.findings(stem, "L1_POD_PENDING")
    # The newer event (by eventTime) is the one summarised, though it is first in the list.
    assert "PersistentVolume's node affinity" in pending.summary, pending.summary
    lines = [e for e in pending.evidence if "FailedScheduling" in e]
    assert "unbound immediate" in lines[0] and "(x9)" in lines[-1], lines


def test_xid154_action_is_read_from_a_kernel_line_in_the_plugin_log() -> None:
    """No health agent: the plugin's log carries the kernel's `dmesg -T` lines beside its own marks."""
    stem = "field-nvsentinel-dmesg-xid79-xid154-node-reboot-plugin-h100-bound-22-nodes"
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import walk

    scenario = copy.deepcopy(load_scenario(FIELD.path(stem)))
    node = next(
        o for o in scenario.objects if o.get("kind") == "Node" and o["metadata"]["name"] == "h100-infer-08"
    )
    node["status"]["conditions"] = [c for c in node["status"]["conditions"] if c["type"] != "SysLogsXIDError"]
    key = next(k for k in scenario.logs if "Xid=154" in scenario.logs[k])
    scenario.logs[key] += (
        "I1129 10:01:56.904611       1 health.go:185] XidCriticalError: Xid=79 on Device=GPU-x; marking device as unhealthy.\n"
        "[Sun Nov 29 10:01:56 2026] NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
        "to 0x2 (Node Reboot Required)\n"
    )
    result = walk(*build_sources(scenario), "inference", "mistral-large-serve-0")
    xids = [f for lr in result.layers for f in lr.findings if f.code == "L5_XID"]
    [notice] = [f for f in xids if f.summary.startswith("Xid 154 ")]
    assert "'Node Reboot Required'" in notice.summary
    [other] = [f for f in xids if f.summary.startswith("Xid 79 ")]
    assert "the driver's recovery action for it: Node Reboot Required (Xid 154)" in other.summary


@pytest.mark.parametrize("path", FIELD.files, ids=FIELD.ids)
def test_bundle_of_the_target_replays_the_same_walk(path: Path, tmp_path: Path) -> None:
    """The must-gather bundle of each incident's target holds what the walk read (the driver pod's pull
    events, the node's kubelet events and conditions, the plugin's registration line)."""
    import json

    from bot.actions.bundle_writer import collect_bundle
    from bot.sources.bundle_reader import read_bundle
    from bot.sources.scenario import build_sources, load_scenario
    from layers.walk import walk

    scenario = load_scenario(path)
    snap, telemetry = build_sources(scenario)
    ns, _, name = str(scenario.extra["x-expect"]["target"]).partition("/")
    live = walk(snap, telemetry, ns, name)
    out = tmp_path / "bundle.tar.gz"
    collect_bundle(snap, telemetry, out, target=(ns, name), walk=live)
    bundle = read_bundle(out)
    replayed = json.dumps(walk(*build_sources(bundle), ns, name).to_dict(), sort_keys=True)
    original = json.dumps(live.to_dict(), sort_keys=True)
    assert replayed.replace(bundle.name, "<source>") == original.replace(scenario.name, "<source>")
