"""The chart's RBAC for diagnostics (tests/test_helm.py's style, a real Helm): with diagnostics off no
write verb beyond the cordon's `patch nodes`; on, a Role in the release's namespace with exactly
the Job calls bot/actions/diag_kube.py makes and the pod reads bot/actions/diag.py makes."""

from __future__ import annotations

import inspect
import re
from typing import Any

from bot.actions import diag_kube
from tests.test_helm import by_kind, helm, render

__all__ = ["helm"]  # the session fixture, shared with tests/test_helm.py

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection", "*"})
Rule = tuple[str, str, str]


def _rules(docs: list[dict[str, Any]], kind: str) -> set[Rule]:
    return {
        (g, r, v)
        for role in by_kind(docs, kind)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def _writes(docs: list[dict[str, Any]]) -> set[Rule]:
    return {r for r in _rules(docs, "ClusterRole") | _rules(docs, "Role") if r[2] in WRITE_VERBS}


def _job_calls() -> set[Rule]:
    """The batch/v1 calls KubeJobs makes, read from its source: BatchV1Api's method names say the verb."""
    src = inspect.getsource(diag_kube.KubeJobs)
    verbs = {"create": "create", "read": "get", "list": "list", "delete": "delete"}
    found = {verbs[m] for m in re.findall(r"self\._batch\.(create|read|list|delete)_namespaced_job", src)}
    return {("batch", "jobs", v) for v in found}


def test_job_calls_are_derived() -> None:
    assert _job_calls() == {("batch", "jobs", v) for v in ("create", "get", "list", "delete")}


def test_diagnostics_off_grants_no_write_beyond_the_cordon(helm: str) -> None:
    assert _writes(render(helm)) == set()
    assert not by_kind(render(helm), "Role")
    with_actions = render(helm, "--set", "actions.enabled=true")
    assert _writes(with_actions) == {("", "nodes", "patch")}
    assert not by_kind(with_actions, "Role") and not by_kind(with_actions, "RoleBinding")
    env = {
        e["name"]: e
        for e in by_kind(with_actions, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["GPUBOT_DIAG_ENABLED"]["value"] == "false" and "GPUBOT_DIAG_NAMESPACE" not in env


def test_diagnostics_on_adds_a_namespaced_role_only(helm: str) -> None:
    docs = render(helm, "--set", "actions.enabled=true,diagnostics.enabled=true")
    (role,) = by_kind(docs, "Role")
    (binding,) = by_kind(docs, "RoleBinding")
    assert role["metadata"]["namespace"] == "gpubot" and binding["metadata"]["namespace"] == "gpubot"
    assert _rules(docs, "Role") == _job_calls() | {
        ("", "pods", "get"),
        ("", "pods", "list"),
        ("", "pods/log", "get"),
    }
    # The ClusterRole is what it was: Jobs are never granted cluster-wide.
    assert not {r for r in _rules(docs, "ClusterRole") if r[1] == "jobs"}
    assert _writes(docs) == {("", "nodes", "patch")} | {r for r in _job_calls() if r[2] in WRITE_VERBS}
    (account,) = by_kind(docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "gpubot"}
    ]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    env = {
        e["name"]: e
        for e in by_kind(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["GPUBOT_DIAG_ENABLED"]["value"] == "true"
    assert env["GPUBOT_DIAG_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_a_gateway_gets_no_diagnostics_role(helm: str) -> None:
    docs = render(
        helm,
        "--set",
        "role=gateway,diagnostics.enabled=true,redis.url=redis://r:6379/0,slack.botToken=xoxb-1,slack.appToken=xapp-1,"
        "requestKey.existingSecret.name=gpubot-request-key",
    )
    assert not by_kind(docs, "Role")
