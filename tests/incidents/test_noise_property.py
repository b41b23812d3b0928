"""Property: faults on nodes that are not the pod's candidates never change its verdict (spec: noise elsewhere).

Hypothesis builds a fleet of pools (GPU models from tests/incidents/fleets.py), a pending pod that selects
the first pool, and the pod's real situation there (a missing toleration, a full or cordoned pool, a lost
GPU on a candidate, a Kueue gate, a selector nothing matches). The same fleet is walked again with faults
added on nodes of the other pools (lost GPUs with the plugin's Xid lines, DCGM Xids, rising remapped rows,
a plugin that never registered, KubeVirt passthrough, operands off): the verdict and the node it names
stay the same, and no `warn` or `fault` finding names a noise node, in the default walk or with `--all`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.sources.scenario import build_sources, parse_scenario
from layers.findings import Severity, WalkResult
from layers.walk import walk
from tests.incidents.fleets import MODELS, Fleet

GPU_TAINT = {"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}
CAUSES = ("taint", "exhausted", "cordoned", "sick_candidate", "gated", "no_match")
NOISE = ("lost", "xid", "rows", "silent", "passthrough", "operands_off")

pools = st.lists(
    st.tuples(st.sampled_from(sorted(MODELS)), st.integers(min_value=1, max_value=4)), min_size=2, max_size=4
)


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[tuple[str, int]], str, list[tuple[int, int, str]]]:
    shape = draw(pools)
    cause = draw(st.sampled_from(CAUSES))
    others = [(p, i) for p, (_, n) in enumerate(shape) if p > 0 for i in range(n)]
    noise = draw(
        st.lists(
            st.tuples(st.sampled_from(others), st.sampled_from(NOISE)),
            min_size=1,
            max_size=6,
            unique_by=lambda x: x[0],
        )
    )
    return shape, cause, [(p, i, kind) for (p, i), kind in noise]


def build(shape: list[tuple[str, int]], cause: str, noise: list[tuple[int, int, str]]) -> Fleet:
    f = Fleet("property-fleet", "control case: generated")
    f.control_plane()
    for p, (model, count) in enumerate(shape):
        for i in range(count):
            name = f"p{p}-{model}-{i}"
            target = p == 0
            f.gpu_node(name, model, gpus=4, pool=f"pool-{p}", operands="plugin",
                       taints=[GPU_TAINT] if target and cause == "taint" else None)  # fmt: skip
            if target and cause == "exhausted":
                f.running_pod(f"busy-{p}-{i}", "other", name, 4)
            if target and cause == "cordoned":
                f.node(name)["spec"]["unschedulable"] = True
            if target and cause == "sick_candidate" and i == 0:
                f.sick_lost_gpu(name)
                f.noise.remove(name)
    for p, i, kind in noise:
        add_noise(f, f"p{p}-{shape[p][0]}-{i}", shape[p][0], kind)
    total = 1 + sum(n for _, n in shape)
    first = shape[0][1]
    reason = {
        "taint": f"{first} node(s) had untolerated taint {{nvidia.com/gpu: present}}",
        "exhausted": f"{first} Insufficient nvidia.com/gpu",
        "cordoned": f"{first} node(s) were unschedulable",
        "sick_candidate": f"{first} Insufficient nvidia.com/gpu",
        "gated": "",
        "no_match": f"{first} node(s) didn't match Pod's node affinity/selector",
    }[cause]
    rest = total - 1 - first
    msg = (
        f"0/{total} nodes are available: 1 node(s) had untolerated taint {{node-role.kubernetes.io/control-plane: }}, "
        f"{reason}, {rest} node(s) didn't match Pod's node affinity/selector."
    )
    selector = {"pool": "pool-none" if cause == "no_match" else "pool-0"}
    f.pending_pod("job-0", "ml", None if cause == "gated" else msg, gpus=4, selector=selector,
                  gates=["kueue.x-k8s.io/admission"] if cause == "gated" else None)  # fmt: skip
    return f


def add_noise(f: Fleet, name: str, model: str, kind: str) -> None:
    if kind == "lost":
        f.sick_lost_gpu(name)
    elif kind == "xid":
        f.sick_xid_series(name, model)
    elif kind == "rows":
        f.sick_rows_rising(name, model)
    elif kind == "silent":
        f.sick_not_advertising(name)
    elif kind == "passthrough":
        f.passthrough(name)
    else:
        f.operands_off(name)


def run(f: Fleet, all_layers: bool = False) -> WalkResult:
    cluster, telemetry = build_sources(parse_scenario(f.scenario({}), "property"))
    return walk(cluster, telemetry, "ml", "job-0", all_layers=all_layers)


def verdict(result: WalkResult) -> tuple[str, str | None] | None:
    v = result.verdict
    return None if v is None else (v.code, v.node)


def loud(result: WalkResult, noise: set[str]) -> list[Any]:
    return [
        (f.code, f.node)
        for layer in result.layers
        for f in layer.findings
        if f.severity >= Severity.WARN and (f.node in noise or any(n in f.summary for n in noise))
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets())
def test_faults_on_non_candidates_never_change_the_verdict(
    case: tuple[Any, str, list[tuple[int, int, str]]],
) -> None:
    shape, cause, noise = case
    clean, noisy = build(shape, cause, []), build(shape, cause, noise)
    noise_nodes = set(noisy.noise)
    assert noise_nodes, "the generator added no noise"
    before, after = run(clean), run(noisy)
    assert verdict(after) == verdict(before)
    assert [r.layer for r in after.layers] == [r.layer for r in before.layers]
    assert not loud(after, noise_nodes)
    assert not loud(run(noisy, all_layers=True), noise_nodes)


def test_the_generator_can_fail_the_property() -> None:
    """The property is not vacuous: the same noise on the pod's own pool does change the answer."""
    shape = [("h100", 2), ("l4", 2)]
    clean = build(shape, "exhausted", [])
    sick = build(shape, "exhausted", [])
    sick.sick_lost_gpu("p0-h100-0")
    assert verdict(run(sick)) != verdict(run(clean))
