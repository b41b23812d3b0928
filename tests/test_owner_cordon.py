"""Cordon and uncordon beside the node's other owners, through the real client, the CLI and kubectl
against the fake API server (spec/findings.md, "Who else acts on a node"; spec/interfaces.md)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions.cordon import cordon, uncordon
from bot.sources.kube import KubeCluster
from bot.sources.snapshot import SnapshotCluster
from handlers.blocks import CONFIRM_TEXT_MAX, cordon_confirm
from layers.digest import collect_digest
from layers.facts import cordons
from layers.nodepolicy import decide
from layers.sources import NoTelemetry
from tests.bundle_scenario import node
from tests.fakes.kube_api import FakeKubeAPI, serve

NOW = 1_795_953_600.0
Mark = Callable[[dict[str, Any]], None]


def _label(key: str, value: str) -> Mark:
    return lambda n: n["metadata"].setdefault("labels", {}).update({key: value})


def _taint(key: str, value: str = "") -> Mark:
    def add(n: dict[str, Any]) -> None:
        n["spec"].setdefault("taints", []).append({"key": key, "value": value, "effect": "NoSchedule"})

    return add


def _condition(ctype: str, status: str, reason: str) -> Mark:
    return lambda n: n["status"]["conditions"].append(
        {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": "",
            "lastTransitionTime": "2026-11-29T09:00:00Z",
        }
    )


# Every owner's flow (spec/findings.md's table) and the words its refusal must carry.
OWNED: dict[str, tuple[Mark, str]] = {
    "nvsentinel-quarantined": (
        _label("dgxc.nvidia.com/nvsentinel-state", "quarantined"),
        "NVSentinel's flow (quarantined",
    ),
    "nvsentinel-remediating": (
        _label("dgxc.nvidia.com/nvsentinel-state", "remediating"),
        "cancels NVSentinel's break-fix",
    ),
    "nvsentinel-drain-failed": (
        _label("dgxc.nvidia.com/nvsentinel-state", "drain-failed"),
        "NVSentinel gave up on owned-nvsentinel-drain-failed (drain-failed)",
    ),
    "upgrade-cordon-required": (
        _label("nvidia.com/gpu-driver-upgrade-state", "cordon-required"),
        "GPU Operator driver upgrade's flow (cordon-required",
    ),
    "upgrade-failed": (
        _label("nvidia.com/gpu-driver-upgrade-state", "upgrade-failed"),
        "GPU Operator driver upgrade gave up on owned-upgrade-failed (upgrade-failed)",
    ),
    "driver-manager-paused": (
        _label("nvidia.com/gpu.deploy.device-plugin", "paused-for-driver-upgrade"),
        "GPU Operator driver manager's flow (paused-for-driver-upgrade",
    ),
    "mig-manager-rebooting": (
        _label("nvidia.com/mig.config.state", "rebooting"),
        "MIG manager's flow (rebooting",
    ),
    "cluster-autoscaler": (
        _taint("ToBeDeletedByClusterAutoscaler", "1795945800"),
        "cluster-autoscaler's flow (deleting the node",
    ),
    "karpenter": (_taint("karpenter.sh/disrupted"), "Karpenter's flow (disrupting the node"),
    "eks": (
        _condition("AcceleratedHardwareReady", "False", "NvidiaXID79Error"),
        "EKS node monitoring agent's flow (AcceleratedHardwareReady=False (NvidiaXID79Error)",
    ),
    "gke": (
        _condition("XidCriticalError", "True", '{"79":true}'),
        "GKE device plugin's flow (XidCriticalError=True",
    ),
    "aks": (_taint("remediator.aks.microsoft.com/unschedulable"), "AKS's flow (remediating"),
    "hyperpod": (
        _label("sagemaker.amazonaws.com/node-health-status", "UnschedulablePendingReboot"),
        "SageMaker HyperPod's flow (UnschedulablePendingReboot",
    ),
}


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    nodes = [node(f"gpu-{i}", 8, 8) for i in range(12)]
    for name, (mark, _) in OWNED.items():
        n = node(f"owned-{name}", 8, 8, unsched=True)
        mark(n)
        nodes.append(n)
    autopilot = node("gk3-prod-eu-nap-h100-3b1f-x7kq", 8, 8)
    autopilot["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "nap-h100"
    nodes.append(autopilot)
    with serve(SnapshotCluster(nodes)) as fake:
        yield fake


def kube(api: FakeKubeAPI) -> KubeCluster:
    return KubeCluster.from_config(api.kubeconfig)


GAVE_UP = {"nvsentinel-drain-failed", "upgrade-failed"}


@pytest.mark.parametrize("owner", sorted(set(OWNED) - GAVE_UP))
def test_uncordon_is_refused_on_every_running_owners_node_even_with_force(
    api: FakeKubeAPI, owner: str
) -> None:
    k = kube(api)
    out = uncordon(k, k, f"owned-{owner}", force=True)
    assert out.refused and OWNED[owner][1] in out.message, out.message
    assert api.count("/nodes/", method="PATCH") == 0


@pytest.mark.parametrize("owner", sorted(GAVE_UP))
def test_an_owner_that_gave_up_is_released_only_by_force_naming_it(api: FakeKubeAPI, owner: str) -> None:
    """spec/findings.md's table: a holder that gave up is refused by buttons; the CLI's
    `uncordon --force` (operators) names the owner and its state."""
    k = kube(api)
    plain = uncordon(k, k, f"owned-{owner}")
    assert plain.refused and "a person must take it" in plain.message, plain.message
    assert api.count("/nodes/", method="PATCH") == 0
    forced = uncordon(k, k, f"owned-{owner}", force=True)
    assert forced.applied and OWNED[owner][1] in forced.message, forced.message


@pytest.mark.parametrize("owner", sorted(OWNED))
def test_cordon_of_an_owners_node_is_already_held_and_sends_nothing(api: FakeKubeAPI, owner: str) -> None:
    k = kube(api)
    out = cordon(k, k, f"owned-{owner}", "Xid 79", "cli:a@b", max_fraction=1.0, now=NOW)
    assert out.action == "already-cordoned" and not out.applied
    assert "held by" in out.message or "needs no cordon" in out.message, out.message
    assert api.count("/nodes/", method="PATCH") == 0


def test_cli_uncordon_refusal_is_one_line_exit_2(
    api: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli.main import main

    monkeypatch.delenv("GPUBOT_SCENARIO", raising=False)
    assert main(["uncordon", "owned-nvsentinel-quarantined", "--force", "--kubeconfig", api.kubeconfig]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "cancels NVSentinel's break-fix" in err
    monkeypatch.setenv("GPUBOT_CORDON_MAX_FRACTION", "1")
    args = ["cordon", "owned-karpenter", "--reason", "x", "--kubeconfig", api.kubeconfig]
    assert main(args) == 0
    assert "Karpenter is removing owned-karpenter" in capsys.readouterr().out
    assert api.count("/nodes/", method="PATCH") == 0


def test_gpubots_cordon_is_written_with_field_manager_gpubot(api: FakeKubeAPI) -> None:
    k = kube(api)
    assert cordon(k, k, "gpu-1", "Xid 79", "cli:a@b", max_fraction=1.0, now=NOW).applied
    [patch] = [r for r in api.requests if r.method == "PATCH"]
    assert patch.query == {"fieldManager": "gpubot"}
    entries = {e["manager"]: e for e in k.get_node("gpu-1")["metadata"]["managedFields"]}
    assert entries["gpubot"]["operation"] == "Update" and entries["gpubot"]["fieldsType"] == "FieldsV1"
    assert "f:unschedulable" in entries["gpubot"]["fieldsV1"]["f:spec"]
    assert "f:gpubot/cordoned-by" in entries["gpubot"]["fieldsV1"]["f:metadata"]["f:annotations"]
    assert (
        cordons.cordoned_by(k.get_node("gpu-1")) == "cordoned by gpubot for cli:a@b at 2026-11-29T12:00:00Z"
    )
    # Uncordon removes the field: nobody owns spec.unschedulable any more.
    assert uncordon(k, k, "gpu-1").applied
    assert cordons.unschedulable_manager(k.get_node("gpu-1")) is None


def _kubectl(api: FakeKubeAPI, tmp: Path, *args: str) -> None:
    cmd = ["kubectl", "--kubeconfig", api.kubeconfig, "--cache-dir", str(tmp), *args]
    subprocess.run(cmd, capture_output=True, timeout=60, check=True)


def test_a_gpubot_cordon_removed_by_another_manager_is_in_the_next_digest(
    api: FakeKubeAPI, tmp_path: Path
) -> None:
    k = kube(api)
    for name in ("gpu-1", "gpu-2"):
        assert cordon(k, k, name, "Xid 79", "slack:U0OPS", max_fraction=1.0, now=NOW).applied
    # The driver manager's uncordon, as a client writing `false` under its own field manager …
    _kubectl(api, tmp_path, "patch", "node", "gpu-1", "-p", '{"spec":{"unschedulable":false}}',
             "--field-manager=k8s-driver-manager")  # fmt: skip
    # … and a person's `kubectl uncordon`, which removes the field (no manager keeps it).
    _kubectl(api, tmp_path, "uncordon", "gpu-2")
    digest = collect_digest(k, NoTelemetry(NOW))
    gone = [n for n in digest.notes if "is gone" in n]
    assert len(gone) == 2, digest.notes
    [one] = [n for n in gone if "gpu-1" in n]
    assert "for slack:U0OPS" in one and "removed by k8s-driver-manager at " in one, one
    [two] = [n for n in gone if "gpu-2" in n]
    assert "removed by an unrecorded writer" in two, two
    assert digest.to_dict()["notes"][:2] == gone


def _notes(obj: dict[str, Any], driver_pods: list[dict[str, Any]] | None = None) -> list[str]:
    return list(decide(obj, driver_pods=driver_pods or []).confirm)


def test_cordon_confirms_say_what_the_platform_does_next() -> None:
    autopilot = node("gk3-prod-eu-nap-h100-3b1f-x7kq", 8, 8)
    autopilot["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "nap-h100"
    standard = node("gke-prod-eu-h100-pool-3b1f-x7kq", 8, 8)
    standard["metadata"]["labels"]["cloud.google.com/gke-nodepool"] = "h100-pool"
    assert any("GKE Autopilot re-creates" in n for n in _notes(autopilot))
    assert _notes(standard) == []

    def driver(env: list[dict[str, str]]) -> dict[str, Any]:
        return {"spec": {"initContainers": [{"name": "k8s-driver-manager", "env": env}],
                         "containers": [{"name": "nvidia-driver-ctr"}]}}  # fmt: skip

    default = _notes(standard, [driver([])])
    assert default == ["The driver manager (ENABLE_GPU_POD_EVICTION=true (its default)) uncordons it when its "
                       "driver pod restarts."]  # fmt: skip
    off = [
        {"name": "ENABLE_GPU_POD_EVICTION", "value": "false"},
        {"name": "ENABLE_AUTO_DRAIN", "value": "false"},
    ]
    assert _notes(standard, [driver(off)]) == []
    drain_only = [{"name": "ENABLE_GPU_POD_EVICTION", "value": "false"}]
    assert "ENABLE_AUTO_DRAIN" in _notes(standard, [driver(drain_only)])[0]
    removing = node("a100-train-04", 8, 8)
    _taint("ToBeDeletedByClusterAutoscaler", "1795945800")(removing)
    assert _notes(removing)[0] == "Held by cluster-autoscaler (deleting the node)."
    assert not decide(removing).cordon.offered
    # The dialog says it first, within Slack's 300 characters, however long the node name.
    notes = _notes(autopilot, [driver([])])
    text = cordon_confirm("gk3-" + "x" * 240, notes)["text"]["text"]
    assert text.startswith("GKE Autopilot re-creates") and len(text) <= CONFIRM_TEXT_MAX
    assert json.dumps(cordon_confirm("n", []))  # no notes: the plain dialog


def test_cli_cordon_says_what_gke_autopilot_does_next(
    api: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli.main import main

    monkeypatch.delenv("GPUBOT_SCENARIO", raising=False)
    monkeypatch.setenv("GPUBOT_CORDON_MAX_FRACTION", "1")
    node_name = "gk3-prod-eu-nap-h100-3b1f-x7kq"
    assert main(["cordon", node_name, "--reason", "Xid 48", "--dry-run", "--kubeconfig", api.kubeconfig]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"dry run: would cordon {node_name}") and "GKE Autopilot re-creates" in out, out
    assert main(["cordon", node_name, "--reason", "Xid 48", "--kubeconfig", api.kubeconfig]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"cordoned {node_name}: Xid 48 · GKE Autopilot re-creates"), out
