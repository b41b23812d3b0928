"""The driver container's log signatures, on real driver logs (samples 14 and 15)."""

from __future__ import annotations

from layers import driverlogs as dl
from layers import fleet
from tests.layers import builders as b
from tests.layers.fake_telemetry import sample_text


def with_timestamps(text: str) -> str:
    """As `kubectl logs --timestamps` prints it."""
    return "\n".join(
        f"2026-11-29T10:00:{i % 60:02d}.123456789Z {ln}" for i, ln in enumerate(text.splitlines())
    )


def test_unresolved_kernel_names_the_cause_and_the_kernel_sample_14() -> None:
    for text in (sample_text("14_"), with_timestamps(sample_text("14_"))):
        scan = dl.scan_driver_log(text)
        assert scan.kernel == "3.10.0-862.el7.x86_64"
        cause, line = scan.failures[0]
        assert cause.startswith("no kernel headers/packages for the running kernel")
        assert line.endswith("Could not resolve Linux kernel version")
        assert scan.host_driver == []


def test_unsigned_module_is_secure_boot_first_sample_15() -> None:
    failed = dl.scan_driver_log(sample_text("15_"))
    causes = [cause for cause, _ in failed.failures]
    assert causes[0].startswith("the kernel refused the unsigned NVIDIA module")
    assert any(c.startswith("the NVIDIA kernel module was built but would not load") for c in causes)


def test_failures_before_the_ready_marker_are_history_sample_14() -> None:
    recovered = dl.scan_driver_log(sample_text("14_") + "\nDone, now waiting for signal\n")
    # The kernel is read from the whole log; failures only after the last ready marker.
    assert recovered.failures == [] and recovered.kernel == "3.10.0-862.el7.x86_64"


def test_fleet_majority_and_split() -> None:
    nodes = [b.gpu_node(f"n{i}") for i in range(3)]
    versions = {"n0": "550.90.07", "n1": "550.90.07", "n2": "535.183.01"}
    spread = fleet.spread(nodes, "driver", lambda n: versions[n["metadata"]["name"]])
    assert spread.majority == "550.90.07" and spread.odd_nodes == ["n2"]
    assert spread.odd("n2") and not spread.odd("n0")
    split = fleet.spread(nodes[1:], "driver", lambda n: versions[n["metadata"]["name"]])
    assert split.majority is None and split.odd("n1") and split.odd("n2")
