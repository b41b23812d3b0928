"""(case id, mutation) -> the cause, for metamorphic cases that fail today because of a bug in another
helper's area (tests/metamorphic/KNOWN_FAILURES.md explains each cause and names its owner). Each is a
strict xfail: when the fix lands the case passes, its xfail fails, and the lead removes the entry."""

from __future__ import annotations

# Issue 18 item 1 (helper `pools`: layers/versions.py, the new layers/facts/driverpool.py): driver and
# kernel versions are compared across the whole fleet, not within a driver pool, so a healthy pool on
# another driver branch adds (or, as the majority shifts, removes) L3_DRIVER_VERSION_SKEW / L3_KERNEL_SKEW.
DRIVER_POOLS = "pools: versions compared across driver pools, not within one (issue 18 item 1)"
# Helper `pools` (layers/facts/placement.py, taint_reasons): once the scheduler's message names an
# untolerated taint, every GPU node with a taint the pod does not tolerate is reported, including nodes
# the pod cannot use anyway (another pool it does not select, no node offering the resource it asks for)
# and health-controller taints on sick nodes, with "add a toleration": L1_UNTOLERATED_TAINT is added,
# and outranks L1_RESOURCE_MISMATCH / L1_SELECTOR_MISMATCH as the verdict.
NON_CANDIDATE_TAINTS = (
    "pools: L1_UNTOLERATED_TAINT counts tainted nodes that are not candidates (placement.py)"
)

KNOWN_FAILURES: dict[tuple[str, str], str] = {}
