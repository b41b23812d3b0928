"""The NVIDIA DRA driver in the one table of deployments (layers/facts/deployments.py): its kubelet
plugin and controller told apart once, and the container that serves each DRA driver name chosen
there for every reader (layer 1's and layer 5's plugin log, layer 2's start failures)."""

from __future__ import annotations

import pytest

from layers.facts.context import OPERATOR_SELECTORS, component
from layers.facts.deployments import DRA_DRIVER_NAMES, DRA_SELECTOR, dra_plugin_container, dra_role
from tests.layers import builders as b


@pytest.mark.parametrize("chart", DRA_DRIVER_NAMES)
def test_kubelet_plugin_and_controller_by_the_charts_component_label(chart: str) -> None:
    plugin = b.pod(
        "nvidia-dra-driver-gpu",
        f"{chart}-kubelet-plugin-x1",
        node="n1",
        containers=["compute-domains", "gpus"],
        labels={"app.kubernetes.io/name": chart, f"{chart}-component": "kubelet-plugin"},
    )
    controller = b.pod(
        "nvidia-dra-driver-gpu",
        f"{chart}-controller-x2",
        node="cp",
        containers=["compute-domain"],
        labels={"app.kubernetes.io/name": chart, f"{chart}-component": "controller"},
    )
    assert component(plugin) == dra_role(plugin) == "dra-kubelet-plugin"
    assert component(controller) == dra_role(controller) == "dra-controller"


def test_without_the_component_label_the_plugins_containers_decide() -> None:
    # An older chart (v25.3) labels only by name; its kubelet plugin still runs `gpus`.
    labels = {"app.kubernetes.io/name": "nvidia-dra-driver-gpu"}
    plugin = b.pod("dra", "p", node="n1", containers=["gpus"], labels=labels)
    controller = b.pod("dra", "c", node="cp", containers=["compute-domain"], labels=labels)
    assert dra_role(plugin) == "dra-kubelet-plugin"
    assert dra_role(controller) == "dra-controller"
    assert dra_role(b.pod("dra", "other", node="n1", containers=["gpus"])) is None


def test_the_container_follows_the_claims_driver() -> None:
    pod = b.pod("dra", "p", node="n1", containers=["compute-domains", "gpus"])
    assert dra_plugin_container(pod, "gpu.nvidia.com") == "gpus"
    assert dra_plugin_container(pod, "compute-domain.nvidia.com") == "compute-domains"
    assert dra_plugin_container(pod, "net.example.com") is None
    # The chart with its GPU plugin disabled (ComputeDomains only) has no container to read for GPUs.
    only_cd = b.pod("dra", "q", node="n1", containers=["compute-domains"])
    assert dra_plugin_container(only_cd, "gpu.nvidia.com") is None


def test_the_driver_is_listed_by_a_server_side_selector() -> None:
    assert DRA_SELECTOR in OPERATOR_SELECTORS or any(
        all(n in s for n in DRA_DRIVER_NAMES) for s in OPERATOR_SELECTORS
    )
    assert all(n in DRA_SELECTOR for n in DRA_DRIVER_NAMES)
