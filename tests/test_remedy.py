"""Cordon rules and the circuit breaker, decided on plain node dicts."""

from __future__ import annotations

import pytest

from layers import remedy as rm
from tests.bundle_scenario import node, pod

NOW = 1_795_953_600.0  # 2026-11-29T12:00:00Z


def fleet(n: int, cordoned: int = 0) -> list[dict]:
    return [node(f"gpu-{i}", 8, 8, unsched=i < cordoned) for i in range(n)] + [node("cpu-1", 0, 0, gpu=False)]


def test_breaker_edge_four_nodes_quarter() -> None:
    first = rm.cordon_plan(fleet(4), "gpu-3", "Xid 79", "cli:me@host", NOW, max_fraction=0.25)
    assert first.action == "cordon" and first.breaker is not None
    assert (first.breaker.cordoned_after, first.breaker.gpu_nodes) == (1, 4)
    second = rm.cordon_plan(fleet(4, cordoned=1), "gpu-3", "Xid 79", "cli:me@host", NOW, max_fraction=0.25)
    assert second.action == "refused" and second.patch is None
    assert "2 of 4 GPU nodes" in second.message and "25%" in second.message


def test_breaker_exact_with_fractions_that_are_not_binary() -> None:
    # 3/10 with a 0.3 limit: float 0.3 * 10 is 3.0000000000000004, a naive compare would still pass,
    # but 0.1 * 3 style rounding must not refuse the exact edge either.
    ok = rm.cordon_plan(fleet(10, cordoned=2), "gpu-9", "r", "a", NOW, max_fraction=0.3)
    assert ok.action == "cordon"
    no = rm.cordon_plan(fleet(10, cordoned=3), "gpu-9", "r", "a", NOW, max_fraction=0.3)
    assert no.action == "refused"


def test_cordon_patch_has_annotations_and_rfc3339_time() -> None:
    d = rm.cordon_plan(fleet(8), "gpu-2", "  Xid 79\non GPU 3 ", "slack:U123", NOW)
    assert d.patch == {
        "metadata": {
            "annotations": {
                "gpubot/cordoned-by": "slack:U123",
                "gpubot/cordon-reason": "Xid 79 on GPU 3",
                "gpubot/cordoned-at": "2026-11-29T12:00:00Z",
            }
        },
        "spec": {"unschedulable": True},
    }


def test_already_cordoned_names_who() -> None:
    nodes = fleet(4)
    nodes[0]["spec"]["unschedulable"] = True
    d = rm.cordon_plan(nodes, "gpu-0", "r", "a", NOW)
    assert d.action == "already-cordoned" and d.patch is None and "not gpubot" in d.message


def test_unknown_and_non_gpu_nodes_and_empty_reason() -> None:
    assert rm.cordon_plan(fleet(4), "gpu-99", "r", "a", NOW).action == "not-found"
    assert rm.cordon_plan(fleet(4), "cpu-1", "r", "a", NOW).action == "refused"
    with pytest.raises(rm.RemedyInputError, match="reason is empty"):
        rm.cordon_plan(fleet(4), "gpu-1", "   ", "a", NOW)


def test_uncordon_only_ours_unless_forced() -> None:
    theirs = node("gpu-1", 8, 8, unsched=True)
    assert rm.uncordon_plan(theirs, "gpu-1").action == "refused"
    forced = rm.uncordon_plan(theirs, "gpu-1", force=True)
    assert forced.action == "uncordon" and forced.patch == {"spec": {"unschedulable": None}}
    ours = node(
        "gpu-1", 8, 8, unsched=True, ann={"gpubot/cordoned-by": "cli:me@h", "gpubot/cordon-reason": "x"}
    )
    d = rm.uncordon_plan(ours, "gpu-1")
    assert d.patch == {
        "spec": {"unschedulable": None},
        "metadata": {"annotations": {"gpubot/cordoned-by": None, "gpubot/cordon-reason": None}},
    }
    assert rm.uncordon_plan(node("gpu-1", 8, 8), "gpu-1").action == "not-cordoned"


def test_gather_scope_and_log_streams() -> None:
    dp = pod(
        "gpu-operator",
        "nvidia-device-plugin-daemonset-x7k2p",
        "gpu-7",
        "nvidia-device-plugin-daemonset",
        ["nvidia-device-plugin", "config-manager"],
        inits=["toolkit-validation"],
    )
    assert rm.log_streams(dp)[:2] == [("toolkit-validation", False), ("toolkit-validation", True)]
    assert len(rm.log_streams(dp)) == 6
    scope = rm.GatherScope(node="gpu-7")
    assert all(f == "spec.nodeName=gpu-7" for _, f in scope.pod_selectors()[:3])
    assert ("app=gpu-operator", None) in scope.pod_selectors()
    assert scope.series_nodes == ("gpu-7",) and not scope.want_fleet_gpu_pods()
    assert rm.GatherScope().series_nodes is None
    drv = pod(
        "gpu-operator",
        "nvidia-driver-daemonset-8xk2l",
        "gpu-7",
        "nvidia-driver-daemonset",
        ["nvidia-driver-ctr"],
    )
    assert (
        rm.is_driver_pod(drv) and not rm.is_driver_pod(dp) and rm.driver_container(drv) == "nvidia-driver-ctr"
    )


def _recordoned(taint_added: str) -> dict:
    n = node(
        "gpu-1",
        8,
        8,
        unsched=True,
        ann={
            "gpubot/cordoned-by": "U0OPS",
            "gpubot/cordon-reason": "Xid 79",
            "gpubot/cordoned-at": "2026-11-28T09:00:00Z",
        },
    )
    n["spec"]["taints"] = [
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": taint_added}
    ]
    return n


def test_uncordon_refuses_a_cordon_a_person_made_again_after_ours() -> None:
    # kubectl uncordon on the 28th left our annotations; a person cordoned it again on the 30th.
    again = _recordoned("2026-11-30T14:12:05Z")
    d = rm.uncordon_plan(again, "gpu-1")
    assert (
        d.action == "refused"
        and "cordoned it again by hand" in d.message
        and "2026-11-30T14:12:05Z" in d.message
    )
    assert rm.uncordon_plan(again, "gpu-1", force=True).action == "uncordon"
    # the controller's taint seconds after our own patch is still our cordon
    assert rm.uncordon_plan(_recordoned("2026-11-28T09:00:02Z"), "gpu-1").action == "uncordon"
