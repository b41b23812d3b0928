"""Cordon and uncordon end to end: the real kubernetes client against the fake API server."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from bot.actions.cordon import cordon, uncordon
from bot.sources.kube import KubeCluster
from bot.sources.snapshot import SnapshotCluster
from layers.sources import SourceError
from tests.bundle_scenario import node
from tests.fakes.kube_api import FakeKubeAPI, serve

NOW = 1_795_953_600.0


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    nodes = [node(f"gpu-{i}", 8, 8) for i in range(4)] + [node("cpu-1", 0, 0, gpu=False)]
    nodes.append(node("gpu-x", 8, 8, unsched=True))  # cordoned by someone else: counts for the breaker
    with serve(SnapshotCluster(nodes)) as fake:
        yield fake


def kube(api: FakeKubeAPI) -> KubeCluster:
    return KubeCluster.from_config(api.kubeconfig)


def test_cordon_sends_one_strategic_merge_patch(api: FakeKubeAPI) -> None:
    k = kube(api)
    out = cordon(k, k, "gpu-1", "Xid 79 on GPU 3", "cli:alice@laptop", max_fraction=0.5, now=NOW)
    assert out.applied and out.action == "cordon"
    patches = [r for r in api.requests if r.method == "PATCH"]
    assert len(patches) == 1 and patches[0].path == "/api/v1/nodes/gpu-1"
    assert patches[0].content_type == "application/strategic-merge-patch+json"
    assert json.loads(patches[0].body) == {
        "metadata": {
            "annotations": {
                "gpubot/cordoned-by": "cli:alice@laptop",
                "gpubot/cordon-reason": "Xid 79 on GPU 3",
                "gpubot/cordoned-at": "2026-11-29T12:00:00Z",
            }
        },
        "spec": {"unschedulable": True},
    }
    assert api.snapshot.get_node("gpu-1")["spec"]["unschedulable"] is True


def test_second_cordon_is_reported_and_sends_nothing(api: FakeKubeAPI) -> None:
    k = kube(api)
    cordon(k, k, "gpu-1", "Xid 79", "cli:a@b", max_fraction=0.5)
    again = cordon(k, k, "gpu-1", "Xid 79", "cli:a@b", max_fraction=0.5)
    assert again.action == "already-cordoned" and not again.applied
    assert "already cordoned by gpubot for cli:a@b" in again.message
    assert api.count("/nodes/gpu-1", method="PATCH") == 1


def test_breaker_at_its_edge(api: FakeKubeAPI) -> None:
    # 5 GPU nodes, gpu-x already cordoned: a second one is 2/5 = 0.4.
    k = kube(api)
    assert cordon(k, k, "gpu-0", "r", "a", max_fraction=0.4).applied
    refused = cordon(k, k, "gpu-1", "r", "a", max_fraction=0.4)
    assert refused.refused and "3 of 5 GPU nodes" in refused.message
    assert api.count("/nodes/gpu-1", method="PATCH") == 0


def test_dry_run_changes_nothing(api: FakeKubeAPI) -> None:
    k = kube(api)
    out = cordon(k, k, "gpu-2", "r", "a", max_fraction=0.5, dry_run=True)
    assert out.dry_run and out.patch is not None and out.patch["spec"] == {"unschedulable": True}
    assert api.count("", method="PATCH") == 0


def test_uncordon_of_a_node_the_bot_did_not_cordon(api: FakeKubeAPI) -> None:
    k = kube(api)
    refused = uncordon(k, k, "gpu-x")
    assert refused.refused and "--force" in refused.message and api.count("", method="PATCH") == 0
    forced = uncordon(k, k, "gpu-x", force=True)
    assert forced.applied and not api.snapshot.get_node("gpu-x")["spec"].get("unschedulable")


def test_uncordon_removes_our_annotations(api: FakeKubeAPI) -> None:
    k = kube(api)
    cordon(k, k, "gpu-3", "r", "a", max_fraction=0.5)
    out = uncordon(k, k, "gpu-3")
    assert out.applied
    after = api.snapshot.get_node("gpu-3")
    assert not after["spec"].get("unschedulable")
    assert not any(key.startswith("gpubot/") for key in after["metadata"].get("annotations", {}))


def test_403_names_the_verb_and_resource(api: FakeKubeAPI) -> None:
    api.fail("/nodes/gpu-1$", status=403, method="PATCH")
    k = kube(api)
    with pytest.raises(SourceError) as err:
        cordon(k, k, "gpu-1", "r", "a", max_fraction=0.5)
    assert err.value.kind == "forbidden"
    line = str(err.value)
    assert "\n" not in line and "'patch' on 'nodes'" in line


def test_unknown_node_is_exit_2(
    api: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bot.cli.main import main

    monkeypatch.delenv("GPUBOT_SCENARIO", raising=False)
    assert main(["cordon", "gpu-99", "--reason", "x", "--kubeconfig", api.kubeconfig]) == 2
    assert 'node "gpu-99" not found' in capsys.readouterr().err
    # The breaker refuses at the default 0.25 (2 of 5): one line, exit 2, nothing sent.
    assert main(["cordon", "gpu-0", "--reason", "x", "--kubeconfig", api.kubeconfig]) == 2
    assert "2 of 5 GPU nodes" in capsys.readouterr().err
    monkeypatch.setenv("GPUBOT_CORDON_MAX_FRACTION", "0.5")
    assert main(["cordon", "gpu-0", "--reason", "x", "--dry-run", "--kubeconfig", api.kubeconfig]) == 0
    out = capsys.readouterr().out
    assert '"unschedulable": true' in out and api.count("", method="PATCH") == 0
