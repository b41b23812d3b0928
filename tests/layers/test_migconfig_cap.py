"""L1_MIG_CONFIG_FAILED reads the MIG manager of at most MAX_NODES candidate nodes whose MIG config is
not applied; the ones past the cap are named in the evidence, never dropped (issue 9).

A 22-node fleet: 14 A100 nodes asked for all-1g.10gb whose MIG manager did not apply it (failed or
pending), six H100 nodes serving whole GPUs, one of them NotReady, one cordoned, a CPU node; the pod
asks for one nvidia.com/mig-1g.10gb, which no node advertises yet.
"""

from __future__ import annotations

from layers import migconfig, scheduling
from layers.findings import LayerResult, Severity
from layers.sources import K8sObject, NoTelemetry
from tests.layers.builders import NOW, codes, ctx, gpu_node, logs_for, node, operand, pod

MIG = "nvidia.com/mig-1g.10gb"
FAILED_LOG = (
    'time="2026-11-18T09:31:42Z" level=info msg="Updating to MIG config: all-1g.10gb"\n'
    'time="2026-11-18T09:31:44Z" level=error msg="Error applying MIG configuration with hooks: error setting '
    'MIG mode: error resetting all GPUs: exit status 255"\n'
    "Changing the 'nvidia.com/mig.config.state' node label to 'failed'\n"
)


def _fleet(states: list[str]) -> tuple[list[K8sObject], dict[str, str]]:
    objs: list[K8sObject] = []
    logs: dict[str, str] = {}
    for i, state in enumerate(states, start=1):
        name = f"a100-{i:02d}"
        objs.append(
            gpu_node(
                name,
                labels={
                    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                    "nvidia.com/mig.config": "all-1g.10gb",
                    "nvidia.com/mig.config.state": state,
                },
            )
        )
        mgr = operand("nvidia-mig-manager", name, suffix=f"m{i:02d}xz")
        objs.append(mgr)
        if state == "failed":
            logs.update(logs_for(mgr, "nvidia-mig-manager", FAILED_LOG))
    objs += [gpu_node(f"h100-{i:02d}") for i in range(1, 5)]
    objs += [gpu_node("h100-05", ready=False), gpu_node("h100-06", unschedulable=True), node("cpu-01")]
    objs.append(pod("ml", "trainer-0", requests={MIG: 1}))
    return objs, logs


def _walk(states: list[str]) -> LayerResult:
    objs, logs = _fleet(states)
    return scheduling.check(ctx(objs, logs=logs, pod=("ml", "trainer-0"), telemetry=NoTelemetry(NOW)))


def _unread_line(evidence: tuple[str, ...]) -> str:
    [line] = [e for e in evidence if "more nodes with the MIG config not applied" in e]
    return line


def test_the_nodes_past_the_cap_are_named_in_every_mig_finding() -> None:
    assert migconfig.MAX_NODES == 10
    states = ["failed"] * 8 + ["pending"] * 2 + ["failed", "pending", "failed", "pending"]
    result = _walk(states)
    found = [f for f in result.findings if f.code == "L1_MIG_CONFIG_FAILED"]
    # The first ten are read: eight failed ones are findings (pending without a clock is not stuck).
    assert sorted(f.node or "" for f in found) == [f"a100-{i:02d}" for i in range(1, 9)]
    assert "L1_RESOURCE_MISMATCH" not in codes(result)  # the request is right: the layout names it
    for f in found:
        line = _unread_line(f.evidence)
        assert line.startswith("… and 4 more nodes with the MIG config not applied, not read")
        assert "a100-11, a100-12, a100-13, a100-14 (failed 2, pending 2)" in line
        assert migconfig.NOT_APPLIED_CMD in f.commands
    # The error of a read node's log is there; the unread nodes are only named.
    assert any("error resetting all GPUs" in e for e in found[0].evidence)
    assert not {f.node for f in result.findings} & {f"a100-{i}" for i in range(11, 15)}


def test_with_no_finding_among_the_read_ones_the_unread_are_an_unknown() -> None:
    """Ten pending nodes (no clock: not called stuck), then four failed ones past the cap: the failed
    ones are not dropped. Their label alone explains the MIG request (no resource mismatch), and one
    L1_UNKNOWN says they were not read."""
    result = _walk(["pending"] * 10 + ["failed"] * 4)
    assert "L1_MIG_CONFIG_FAILED" not in codes(result) and "L1_RESOURCE_MISMATCH" not in codes(result)
    [u] = [f for f in result.findings if f.code == "L1_UNKNOWN"]
    assert u.severity == Severity.UNKNOWN
    assert "first 10 candidate nodes" in u.summary and "4 more were not" in u.summary
    assert "a100-11, a100-12, a100-13, a100-14 (failed 4)" in _unread_line(u.evidence)


def test_at_the_cap_nothing_is_left_to_say() -> None:
    result = _walk(["failed"] * 10)
    found = [f for f in result.findings if f.code == "L1_MIG_CONFIG_FAILED"]
    assert len(found) == 10
    assert not any("more nodes with the MIG config not applied" in e for f in found for e in f.evidence)
    assert "L1_UNKNOWN" not in codes(result)
