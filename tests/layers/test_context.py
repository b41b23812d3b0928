"""Operator discovery by labels, and the per-walk caches."""

import pytest

from layers.facts.context import Settings, component
from layers.sources import SourceError
from tests.layers import builders as b


def test_operator_found_by_labels_in_any_namespace() -> None:
    objs = [
        b.gpu_node("gpu-1"),
        b.pod("nvidia-gpu-operator", "gpu-operator-5d8f9c7b4-x2x9k", labels={"app": "gpu-operator"}),
        b.pod(
            "nvidia-gpu-operator",
            "nvidia-device-plugin-daemonset-7xk2p",
            node="gpu-1",
            labels={"app": "nvidia-device-plugin-daemonset"},
        ),
        # OpenShift's per-RHCOS driver daemonset: its own app name, the Driver Toolkit label.
        b.pod(
            "nvidia-gpu-operator",
            "nvidia-driver-daemonset-416.94.202405291527-0-q8w2m",
            node="gpu-1",
            labels={
                "app": "nvidia-driver-daemonset-416.94.202405291527-0",
                "openshift.driver-toolkit": "true",
            },
        ),
        # NVIDIADriver-managed driver pod: named after the CR.
        b.pod(
            "gpu-operator",
            "nvidia-gpu-driver-ubuntu22.04-6c9f8-abcde",
            node="gpu-1",
            labels={
                "app": "nvidia-gpu-driver-ubuntu22.04-6c9f8",
                "app.kubernetes.io/component": "nvidia-driver",
            },
        ),
        b.pod("ml", "trainer-0", node="gpu-1", labels={"app": "trainer"}),
    ]
    c = b.ctx(objs, node="gpu-1")
    names = sorted(p["metadata"]["name"] for p in c.operator_pods())
    assert "trainer-0" not in names and len(names) == 4
    drivers = c.operator_pods_on("gpu-1", "driver")
    assert sorted(p["metadata"]["name"] for p in drivers) == [
        "nvidia-driver-daemonset-416.94.202405291527-0-q8w2m",
        "nvidia-gpu-driver-ubuntu22.04-6c9f8-abcde",
    ]
    assert c.operator_namespace() == "nvidia-gpu-operator"
    assert [component(p) for p in c.operator_pods_on("gpu-1", "device-plugin")] == ["device-plugin"]


def test_operator_namespace_setting_limits_the_search() -> None:
    objs = [
        b.gpu_node("gpu-1"),
        b.pod("gpu-operator", "gpu-operator-1", labels={"app": "gpu-operator"}),
        b.pod("other", "gpu-operator-2", labels={"app": "gpu-operator"}),
    ]
    c = b.ctx(objs, node="gpu-1", settings=Settings(operator_namespace="other"))
    assert [p["metadata"]["namespace"] for p in c.operator_pods()] == ["other"]


def test_failed_reads_are_cached_and_reraised() -> None:
    calls = []

    def refuse() -> list[object]:
        calls.append(1)
        raise b.forbidden("list", "nodes")

    c = b.ctx([b.gpu_node("gpu-1")], node="gpu-1")
    for _ in range(2):
        with pytest.raises(SourceError) as err:
            c.cached("nodes", refuse)
        assert err.value.kind == "forbidden" and "list" in err.value.hint()
    assert len(calls) == 1  # a 403 is reported by each layer that needs it, not retried by each


def test_standalone_chart_gfd_is_not_taken_for_the_device_plugin() -> None:
    plugin = b.pod(
        "nvidia-device-plugin",
        "nvdp-nvidia-device-plugin-4xk8p",
        node="gpu-1",
        containers=("nvidia-device-plugin-ctr",),
        labels={"app.kubernetes.io/name": "nvidia-device-plugin"},
    )
    gfd = b.pod(
        "nvidia-device-plugin",
        "nvdp-nvidia-device-plugin-gpu-feature-discovery-2m8qz",
        node="gpu-1",
        containers=("gpu-feature-discovery-ctr",),
        labels={"app.kubernetes.io/name": "nvidia-device-plugin"},
    )
    assert component(plugin) == "device-plugin"
    assert component(gfd) == "gfd"


def test_no_telemetry_follows_the_clock_on_a_live_cluster() -> None:
    from layers.sources import NoTelemetry

    ticks = iter([100.0, 200.0])
    live = NoTelemetry(now=lambda: next(ticks))
    assert (live.now(), live.now()) == (100.0, 200.0)  # a bot running for weeks keeps today's date
    assert NoTelemetry(now=5.0).now() == 5.0  # a scenario's instant stays fixed
