"""Layer 5's words when the device plugin takes devices out without naming them (k8s-device-plugin
internal/rm/health.go): "Failed to determine uuid for event …; marking all devices as unhealthy." and
"unable to get device handle from UUID: GPU is lost; marking it as unhealthy" (no Xid, no device)."""

from __future__ import annotations

from layers.facts.pluginlog import ALL_DEVICES
from tests.layers import builders as b
from tests.layers.test_card import NODE, NOW_V, by_code, run

ALL_MARKED = (
    "I0809 13:30:00.000001       1 health.go:172] Failed to determine uuid for event {{<nil>} 8 79 "
    "4294967295 4294967295}: Unknown Error; marking all devices as unhealthy.\n"
)
LOST_AT_START = (
    "I0809 13:30:00.000001       1 health.go:380] unable to get device handle from UUID: GPU is lost; "
    "marking it as unhealthy\n"
)


def gpu_node(allocatable: int) -> dict:
    return b.node(
        NODE,
        labels={"nvidia.com/gpu.present": "true"},
        capacity={"nvidia.com/gpu": 8},
        allocatable={"nvidia.com/gpu": allocatable},
    )


def test_all_devices_marked_is_not_said_as_one_device() -> None:
    [u] = by_code(run([gpu_node(0)], ALL_MARKED, NOW_V, []), "L5_DEVICE_UNHEALTHY")
    assert f"marked {ALL_DEVICES} unhealthy ({ALL_DEVICES}):" in u.summary, u.summary
    assert "1 device" not in u.summary
    assert "act on the Xid" not in u.summary and "the plugin gave no Xid" in u.summary


def test_unnamed_device_without_xid_points_at_the_card() -> None:
    [u] = by_code(run([gpu_node(7)], LOST_AT_START, NOW_V, []), "L5_DEVICE_UNHEALTHY")
    assert "marked 1 device unhealthy (a device the plugin did not name)" in u.summary, u.summary
    assert u.summary.endswith("drain the node and check the card (the plugin gave no Xid)")
