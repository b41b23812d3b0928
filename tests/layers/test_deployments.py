"""Every way the device plugin is deployed (layers/facts/deployments.py): found by selectors the
API server applies, its container chosen once, for layers 2 and 5 and the digest alike."""

from __future__ import annotations

import pytest

from layers.facts.context import OPERATOR_SELECTORS, component
from layers.facts.deployments import DEVICE_PLUGINS, plugin_containers
from tests.layers import builders as b


@pytest.mark.parametrize(
    ("labels", "ns", "container"),
    [
        ({"app": "nvidia-device-plugin-daemonset"}, "gpu-operator", "nvidia-device-plugin"),
        (
            {"app.kubernetes.io/name": "nvidia-device-plugin"},
            "nvidia-device-plugin",
            "nvidia-device-plugin-ctr",
        ),
        ({"name": "nvidia-device-plugin-ds"}, "kube-system", "nvidia-device-plugin-ctr"),
        ({"k8s-app": "nvidia-gpu-device-plugin"}, "kube-system", "nvidia-gpu-device-plugin"),
    ],
)
def test_each_deployment_is_a_device_plugin_with_its_container(labels: dict, ns: str, container: str) -> None:
    pod = b.pod(ns, "plugin-x", node="n1", containers=["config-manager-init", container], labels=labels)
    assert component(pod) == "device-plugin"
    assert plugin_containers(pod) == [container]


def test_every_deployment_is_listed_by_a_server_side_selector() -> None:
    for d in DEVICE_PLUGINS:
        assert any(d.selector == s or (d.label in s and d.value in s) for s in OPERATOR_SELECTORS), d


def test_a_pod_labelled_like_gke_outside_kube_system_is_not_gkes_plugin() -> None:
    pod = b.pod("default", "lookalike", node="n1", labels={"k8s-app": "nvidia-gpu-device-plugin"})
    assert component(pod) is None
