"""Faults on the Kubernetes API (403, 500, timeouts, dropped connections) on every path a walk reads.

The walk runs through the real CLI (`bot.cli.main`) against the fake API server
(tests/fakes/kube_api.py). A fault on a read the layers make: the affected
checks say `unknown`, naming what could not be read (and for a 403 the RBAC
rule to grant), the other checks still run, and the exit code is 0. A fault on
the target pod itself: exit 2 or 3 with one line on stderr. Never a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from bot.sources.kube import KubeCluster
from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import Scenario, build_sources, load_scenario
from tests.fakes.kube_api import FakeKubeAPI, serve, write_kubeconfig

# Reads time out fast in these tests; an injected delay is well past it.
CLIENT_TIMEOUT_S = 0.3
DELAY_S = 1.0

# The paths the layers read, as regular expressions over the request path.
PATHS = {
    "nodes": r"^/api/v1/nodes$",
    "pods": r"^/api/v1/(namespaces/[^/]+/)?pods$",
    "events": r"^/api/v1/(namespaces/[^/]+/)?events$",
    "logs": r"^/api/v1/namespaces/[^/]+/pods/[^/]+/log$",
    "clusterpolicies": r"^/apis/nvidia\.com/v1/clusterpolicies$",
    "daemonsets": r"^/apis/apps/v1/(namespaces/[^/]+/)?daemonsets$",
}
# How an unknown finding names each read (case-insensitive), and the RBAC rule a 403 asks for.
NAMED_AS = {
    "nodes": r"\bnodes?\b",
    "pods": r"\bpods?\b",
    "events": r"\bevents?\b",
    "logs": r"\blogs?\b",
    "clusterpolicies": r"clusterpolic",
    "daemonsets": r"daemonsets?",
}
RBAC = {
    "nodes": "'list' on 'nodes'",
    "pods": "'list' on 'pods'",
    "events": "'list' on 'events'",
    "logs": "'get' on 'pods/log'",
    "clusterpolicies": "'list' on 'clusterpolicies.nvidia.com'",
    "daemonsets": "'list' on 'daemonsets.apps'",
}
FAULTS: dict[str, dict[str, Any]] = {
    "403": {"status": 403},
    "500": {"status": 500},
    "timeout": {"delay": DELAY_S},
    "dropped": {"drop": True},
}
# What the message says about each fault (besides naming the read).
WHY = {
    "403": r"forbidden|grant",
    "500": r"\b500\b",
    "timeout": r"no answer within",
    "dropped": r"connection dropped|unreachable",
}


def bundled_expecting(*codes: str) -> Scenario:
    """The first bundled scenario whose `x-expect.codes` hold all of `codes`."""
    for path in bundled_scenarios():
        sc = load_scenario(path)
        if set(codes) <= set((sc.extra.get("x-expect") or {}).get("codes") or []):
            return sc
    raise AssertionError(f"no bundled scenario expects {codes}: the fault tests need one")


# A pod bound to a GPU node whose device plugin marked a GPU unhealthy: every layer has reads to make.
BOUND_XID = ("L1_POD_SCHEDULED", "L5_DEVICE_UNHEALTHY")


def target_of(sc: Scenario) -> str:
    return str((sc.extra.get("x-expect") or {}).get("target"))


# --- running the CLI -------------------------------------------------------------------------


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def walk(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.out)
        return data


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the command line chooses the sources here; a short client timeout keeps delays quick."""
    for name in (
        "KUBECONFIG",
        "GPUBOT_SCENARIO",
        "PROMETHEUS_URL",
        "GPUBOT_OPERATOR_NAMESPACE",
        "GPUBOT_DEBUG",
    ):
        monkeypatch.delenv(name, raising=False)
    original = KubeCluster.from_config.__func__  # type: ignore[attr-defined]

    def quick(
        cls: type[KubeCluster],
        kubeconfig: str | None = None,
        context: str | None = None,
        timeout_s: float = CLIENT_TIMEOUT_S,
    ) -> KubeCluster:
        return original(cls, kubeconfig, context, timeout_s)  # type: ignore[no-any-return]

    monkeypatch.setattr(KubeCluster, "from_config", classmethod(quick))


def gpubot(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "Traceback" not in out
    return Run(code, out, err)


def why(capsys: pytest.CaptureFixture[str], api: FakeKubeAPI, target: str, *extra: str) -> Run:
    return gpubot(capsys, "why", target, "--kubeconfig", api.kubeconfig, "--format", "json", *extra)


def one_error_line(run: Run) -> str:
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("gpubot: ")
    assert run.out == ""
    return lines[0]


# --- the scenario under fault ----------------------------------------------------------------


@dataclass
class Served:
    scenario: Scenario
    api: FakeKubeAPI
    target: str


@pytest.fixture
def bound() -> Iterator[Served]:
    sc = bundled_expecting(*BOUND_XID)
    snapshot, _telemetry = build_sources(sc)
    with serve(snapshot) as api:
        yield Served(sc, api, target_of(sc))


def findings(walk: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(layer["layer"], f) for layer in walk["layers"] for f in layer["findings"]]


def unknowns(walk: dict[str, Any]) -> list[str]:
    return [f["summary"] for _layer, f in findings(walk) if f["severity"] == "unknown"]


def assert_fault_reported(baseline: dict[str, Any], faulted: dict[str, Any], path: str, fault: str) -> None:
    # Every layer still ran: the fault costs checks, not the walk.
    assert [la["layer"] for la in faulted["layers"]] == [1, 2, 3, 4, 5]
    new = [s for s in unknowns(faulted) if s not in unknowns(baseline)]
    assert new, f"a {fault} on {path} changed nothing that says unknown"
    assert any(re.search(NAMED_AS[path], s, re.I) for s in new), new
    assert any(re.search(WHY[fault], s, re.I) for s in new), new
    if fault == "403":
        assert any("grant the bot's ServiceAccount " + RBAC[path] in s for s in new), new
    # No silent change: a layer that concludes differently says why.
    for before, after in zip(baseline["layers"], faulted["layers"], strict=True):
        if before != after:
            assert any(f["severity"] == "unknown" for f in after["findings"]), (
                f"layer {after['layer']} changed under a {fault} on {path} without an unknown finding",
                before,
                after,
            )
    # Something was still concluded from the reads that worked.
    assert any(f["severity"] != "unknown" for _layer, f in findings(faulted))


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("path", ["nodes", "pods", "events", "logs"])
def test_fault_on_a_read_makes_its_checks_unknown(
    bound: Served, capsys: pytest.CaptureFixture[str], path: str, fault: str
) -> None:
    baseline = why(capsys, bound.api, bound.target, "--all")
    assert baseline.code == 0 and baseline.err == ""
    # The fault must land on a read this walk makes, or the test proves nothing.
    assert bound.api.count(PATHS[path]) > 0, f"the walk never reads {path}"
    bound.api.fail(PATHS[path], **FAULTS[fault])
    faulted = why(capsys, bound.api, bound.target, "--all")
    assert faulted.code == 0 and faulted.err == ""
    assert_fault_reported(baseline.walk, faulted.walk, path, fault)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault_on_the_cluster_policy(capsys: pytest.CaptureFixture[str], fault: str) -> None:
    # Only a pre-installed driver conflict needs the ClusterPolicy (is spec.driver.enabled set?).
    sc = bundled_expecting("L3_PREINSTALLED_DRIVER_CONFLICT")
    snapshot, _telemetry = build_sources(sc)
    with serve(snapshot) as api:
        baseline = why(capsys, api, target_of(sc), "--all")
        assert baseline.code == 0 and api.count(PATHS["clusterpolicies"]) > 0
        assert "L3_PREINSTALLED_DRIVER_CONFLICT" in {f["code"] for _l, f in findings(baseline.walk)}
        api.fail(PATHS["clusterpolicies"], **FAULTS[fault])
        faulted = why(capsys, api, target_of(sc), "--all")
    assert faulted.code == 0 and faulted.err == ""
    assert_fault_reported(baseline.walk, faulted.walk, "clusterpolicies", fault)
    # Without the policy the conflict cannot be confirmed: layer 3 must not claim it.
    layer3 = faulted.walk["layers"][2]
    assert "L3_PREINSTALLED_DRIVER_CONFLICT" not in {f["code"] for f in layer3["findings"]}


def test_daemonsets_are_not_read_by_a_walk(bound: Served, capsys: pytest.CaptureFixture[str]) -> None:
    # The layers find the operator by its pods, not its daemonsets: a 403 there changes nothing.
    baseline = why(capsys, bound.api, bound.target, "--all")
    bound.api.fail(PATHS["daemonsets"], status=403)
    faulted = why(capsys, bound.api, bound.target, "--all")
    assert bound.api.count(PATHS["daemonsets"]) == 0
    assert faulted.code == 0 and faulted.walk == baseline.walk


@pytest.mark.parametrize("fault", list(FAULTS))
def test_default_walk_under_a_fault_still_runs(
    bound: Served, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    # Without --all: the walk follows `next`; a failed read along it does not end it early.
    bound.api.fail(PATHS["pods"], **FAULTS[fault])
    run = why(capsys, bound.api, bound.target)
    assert run.code == 0 and run.err == ""
    walked = [la["layer"] for la in run.walk["layers"]]
    assert walked[0] == 1 and len(walked) >= 2
    assert any(re.search(NAMED_AS["pods"], s, re.I) for s in unknowns(run.walk))


def test_every_unknown_is_one_line_in_text_too(bound: Served, capsys: pytest.CaptureFixture[str]) -> None:
    bound.api.fail(PATHS["nodes"], status=403)
    run = gpubot(capsys, "why", bound.target, "--kubeconfig", bound.api.kubeconfig, "--all")
    assert run.code == 0 and run.err == ""
    assert "grant the bot's ServiceAccount 'list' on 'nodes' cluster-wide" in run.out
    assert "\x1b[" not in run.out  # captured, not a terminal: no colour


# --- the target pod itself ---------------------------------------------------------------------


def pod_path(target: str) -> str:
    ns, pod = target.split("/")
    return rf"^/api/v1/namespaces/{ns}/pods/{pod}$"


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("500", r"answered 500 to get pods"),
        ("timeout", rf"unreachable \(no answer within {CLIENT_TIMEOUT_S:g}s\)"),
        ("dropped", r"unreachable \(connection dropped\)"),
    ],
)
def test_target_pod_unreadable_is_exit_3(
    bound: Served, capsys: pytest.CaptureFixture[str], fault: str, says: str
) -> None:
    bound.api.fail(pod_path(bound.target), **FAULTS[fault])
    run = why(capsys, bound.api, bound.target)
    assert run.code == 3
    line = one_error_line(run)
    assert re.search(says, line), line
    assert bound.api.url in line  # which server


def test_target_pod_forbidden_is_exit_3_with_the_rule(
    bound: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    bound.api.fail(pod_path(bound.target), status=403)
    run = why(capsys, bound.api, bound.target)
    assert run.code == 3
    ns = bound.target.split("/")[0]
    line = one_error_line(run)
    assert f"grant the bot's ServiceAccount 'get' on 'pods' in namespace {ns}" in line, line
    # No layer ran: the pod's was the only request.
    assert len(bound.api.requests) == 1


def test_server_down_is_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    sc = bundled_expecting(*BOUND_XID)
    snapshot, _telemetry = build_sources(sc)
    with serve(snapshot) as api:
        url = api.url
    # The server is gone; a kubeconfig still points at its address.
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", url)
    run = gpubot(capsys, "why", target_of(sc), "--kubeconfig", kubeconfig)
    assert run.code == 3
    line = one_error_line(run)
    assert url in line and "cannot connect" in line, line


def test_missing_pod_is_exit_2(bound: Served, capsys: pytest.CaptureFixture[str]) -> None:
    ns = bound.target.split("/")[0]
    run = why(capsys, bound.api, f"{ns}/no-such-pod-0")
    assert run.code == 2
    line = one_error_line(run)
    assert "no-such-pod-0" in line and "not found" in line, line


def test_malformed_name_makes_no_api_call(bound: Served, capsys: pytest.CaptureFixture[str]) -> None:
    run = why(capsys, bound.api, "ml/Trainer_0")
    assert run.code == 2
    assert "Trainer_0" in one_error_line(run)
    assert bound.api.requests == []
