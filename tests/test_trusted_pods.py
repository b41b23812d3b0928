"""Which labelled pods are the operator's (layers/facts/trusted.py through layers/facts/context.py's
`trusted_pods`): owners and the operator's namespace decide, never the labels alone."""

from __future__ import annotations

from typing import Any

import pytest

from layers.facts.context import trusted_pods
from layers.facts.trusted import Trust, operator_trust


def pod(name: str, ns: str, labels: dict[str, str], owner: str | None = "DaemonSet") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": name.rsplit("-", 1)[0], "controller": True}]
    return {"kind": "Pod", "metadata": meta, "spec": {"nodeName": "gpu-1", "containers": [{"name": "c"}]}}


PLUGIN = {"app": "nvidia-device-plugin-daemonset"}
OPERATOR_NS = Trust("gpu-operator", "ClusterPolicy cluster-policy status.namespace")


@pytest.mark.parametrize(
    ("p", "trust", "kept"),
    [
        (pod("nvidia-device-plugin-daemonset-a", "gpu-operator", PLUGIN), OPERATOR_NS, True),
        (pod("nvidia-device-plugin-daemonset-a", "ml", PLUGIN), OPERATOR_NS, False),  # a tenant's DaemonSet
        (
            pod("nvidia-device-plugin-daemonset-a", "ml", PLUGIN, owner=None),
            Trust(None),
            False,
        ),  # bare among owned
        (
            pod("nvidia-device-plugin-daemonset-a", "gpu-operator", PLUGIN, owner="ReplicaSet"),
            OPERATOR_NS,
            False,
        ),
        (
            pod("gpu-operator-5d8f-x", "gpu-operator", {"app": "gpu-operator"}, owner="ReplicaSet"),
            OPERATOR_NS,
            True,
        ),
        (
            pod("nvidia-cuda-validator-x", "gpu-operator", {"app": "nvidia-cuda-validator"}, owner="Pod"),
            OPERATOR_NS,
            True,
        ),
        # The validator's own workload pod, bare, in the operator's namespace; a bare one elsewhere is not.
        (
            pod("nvidia-cuda-validator-x", "gpu-operator", {"app": "nvidia-cuda-validator"}, owner=None),
            OPERATOR_NS,
            True,
        ),
        (
            pod("nvidia-cuda-validator-x", "ml", {"app": "nvidia-cuda-validator"}, owner=None),
            OPERATOR_NS,
            False,
        ),
        (
            pod("nvidia-cuda-validator-x", "ml", {"app": "nvidia-cuda-validator"}, owner=None),
            Trust(None),
            False,
        ),
        # The standalone plugin's chart, wherever it was installed, held to its DaemonSet owner.
        (
            pod("nvdp-nvidia-device-plugin-x", "nvdp", {"app.kubernetes.io/name": "nvidia-device-plugin"}),
            OPERATOR_NS,
            True,
        ),
        # A static pod's mirror (owned by its Node).
        (
            pod("nvidia-device-plugin-ds-gpu-1", "kube-system", {"name": "nvidia-device-plugin-ds"}, "Node"),
            Trust(None),
            True,
        ),
    ],
)
def test_owner_and_namespace_decide(p: dict[str, Any], trust: Trust, kept: bool) -> None:
    real = pod(
        "nvidia-dcgm-exporter-b", "gpu-operator", {"app": "nvidia-dcgm-exporter"}
    )  # owned: a real cluster
    ok, refused = trusted_pods([real, p], trust)
    assert (p in ok) is kept and (p in [r for r, _ in refused]) is not kept
    assert real in ok


def test_hand_written_pods_without_owners_stand_where_nothing_says_otherwise() -> None:
    # Old fixtures and bundles of clusters whose pods carry no ownerReferences at all: nothing to compare.
    bare = pod("nvidia-device-plugin-daemonset-a", "gpu-operator", PLUGIN, owner=None)
    assert trusted_pods([bare], Trust(None)) == ([bare], [])


def test_the_operators_namespace_comes_from_the_setting_the_cluster_policy_or_its_daemonsets() -> None:
    cp = {"metadata": {"name": "cluster-policy"}, "status": {"namespace": "nvidia-gpu-operator"}}
    assert operator_trust("gpu-operator", [cp], []).namespace == "gpu-operator"
    assert operator_trust(None, [cp], []).namespace == "nvidia-gpu-operator"
    bare_cp = {"metadata": {"name": "cluster-policy"}}
    owned = {"metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "gpu-ops",
                          "ownerReferences": [{"kind": "ClusterPolicy", "name": "cluster-policy", "controller": True}]}}  # fmt: skip
    tenant = {"metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "ml"}}
    assert operator_trust(None, [bare_cp], [tenant, owned]).namespace == "gpu-ops"
    assert operator_trust(None, [], [tenant]).namespace is None
