"""Suite 3 of issue 29: RBAC as shipped. gpubot runs with a ServiceAccount token bound to the Helm
chart's rendered roles (default and full values), against a real kube-apiserver with
--authorization-mode=Node,RBAC: every read and write of a walk (all layers), the digest, must-gather,
cordon and uncordon (and, with diagnostics on, the diagnostic Job's calls) succeeds, with the same
answers the admin gets, and the audit log shows no request of the ServiceAccount refused; a Secret
read and a pod delete are refused by the server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions.cordon import cordon, uncordon
from bot.actions.diag import plan
from bot.actions.diag_kube import KubeJobs
from bot.cli.main import main
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, load_scenario
from layers.digest import collect_digest
from layers.sources import NoTelemetry, SourceError
from layers.walk import walk
from tests.bundle_scenario import node
from tests.kubecp import ApiError, ControlPlane, Rest
from tests.kubeload import Kinds, load, unload
from tests.test_contract_kube import explain, scenario_target
from tests.test_helm import FULL_VALUES, helm, render  # noqa: F401 - helm is the session fixture

ROOT = Path(__file__).resolve().parents[2]
INCIDENTS = [
    ROOT / "bot" / "scenarios" / f"{n}.yaml"
    for n in ("xid79-fell-off-bus", "dra-compute-domain-imex-not-ready")
]
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
NS = "gpubot"


def _path(doc: dict[str, Any]) -> str:
    kind = doc["kind"]
    if kind == "ServiceAccount":
        return f"/api/v1/namespaces/{NS}/serviceaccounts"
    plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}.get(kind)
    if plural:
        return f"/apis/rbac.authorization.k8s.io/v1/{plural}"
    return f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/{kind.lower()}s"


class Identity:
    def __init__(self, cp: ControlPlane, sa: str, kubeconfig: Path, token: str) -> None:
        self.user = f"system:serviceaccount:{NS}:{sa}"
        self.kubeconfig = kubeconfig
        self.rest = Rest(cp.url, cp.certs.ca, token=token)
        self.diagnostics = False
        self.actions = False


@pytest.fixture(scope="module", params=["default", "full"])
def gpubot_sa(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    helm: str,  # noqa: F811 - tests/test_helm.py's session fixture
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Identity]:
    cp = control_plane
    docs = render(helm) if request.param == "default" else render(helm, "-f", str(FULL_VALUES))
    rbac = [d for d in docs if d["kind"] in RBAC_KINDS]
    assert any(d["kind"] == "ClusterRole" for d in rbac)
    try:
        cp.rest.post(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        )
    except ApiError as e:
        if e.code != 409:
            raise
    made = []
    for d in rbac:
        cp.rest.post(_path(d), d)
        made.append(f"{_path(d)}/{d['metadata']['name']}")
    [sa] = [d["metadata"]["name"] for d in rbac if d["kind"] == "ServiceAccount"]
    token = cp.rest.post(
        f"/api/v1/namespaces/{NS}/serviceaccounts/{sa}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )["status"]["token"]
    where = tmp_path_factory.mktemp(f"sa-{request.param}") / "kubeconfig"
    me = Identity(cp, sa, cp.write_kubeconfig(where, token=token), token)
    me.diagnostics = any(d["kind"] == "Role" and d["metadata"]["name"].endswith("-diag") for d in rbac)
    assert me.diagnostics == (request.param == "full")
    me.actions = any(
        "nodes" in r.get("resources", []) and "patch" in r.get("verbs", [])
        for d in rbac
        if d["kind"] == "ClusterRole"
        for r in d.get("rules") or []
    )
    yield me
    for path in reversed(made):
        cp.rest.delete(path)


def refused(cp: ControlPlane, user: str, since: int) -> list[str]:
    return [
        f"{e['verb']} {e['requestURI']}"
        for e in cp.audit(user)[since:]
        if (e.get("responseStatus") or {}).get("code") == 403
    ]


@pytest.mark.parametrize("path", INCIDENTS, ids=[p.stem for p in INCIDENTS])
def test_every_call_gpubot_makes_is_allowed(
    control_plane: ControlPlane, kinds: Kinds, gpubot_sa: Identity, path: Path, tmp_path: Path
) -> None:
    cp = control_plane
    since = len(cp.audit(gpubot_sa.user))
    sc = load_scenario(path)
    _, telemetry = build_sources(sc)
    loaded = load(cp, kinds, sc)
    try:
        ns, pod = scenario_target(sc)
        admin = KubeCluster.from_config(str(cp.kubeconfig), timeout_s=15.0)
        mine = KubeCluster.from_config(str(gpubot_sa.kubeconfig), timeout_s=15.0)
        try:
            expected = walk(admin, telemetry, ns, pod, all_layers=True)
            got = walk(mine, telemetry, ns, pod, all_layers=True)
            assert got.to_dict() == expected.to_dict(), explain(expected, got)
            assert collect_digest(mine, NoTelemetry(now=sc.now)) == collect_digest(
                admin, NoTelemetry(now=sc.now)
            )
            gpu_nodes = [
                o["metadata"]["name"]
                for o in sc.objects
                if o.get("kind") == "Node"
                and "nvidia.com/gpu" in ((o.get("status") or {}).get("capacity") or {})
                and not (o.get("spec") or {}).get("unschedulable")
            ]
            for name in gpu_nodes[:1]:
                if not gpubot_sa.actions:
                    # actions.enabled=false (the default) grants no patch on nodes: gpubot says so in one line.
                    with pytest.raises(SourceError, match="refused 'patch nodes'"):
                        cordon(mine, mine, name, "rbac check", "cli:rbac@test", max_fraction=1.0, now=sc.now)
                    since = len(cp.audit(gpubot_sa.user))
                    continue
                out = cordon(mine, mine, name, "rbac check", "cli:rbac@test", max_fraction=1.0, now=sc.now)
                assert out.applied, out
                back = uncordon(mine, mine, name, actor="cli:rbac@test", now=sc.now + 1)
                assert back.applied, back
        finally:
            admin.close()
            mine.close()
        code = main(
            ["must-gather", "--kubeconfig", str(gpubot_sa.kubeconfig), "--out", str(tmp_path / "b.tar.gz")]
        )
        assert code == 0 and (tmp_path / "b.tar.gz").stat().st_size > 0
    finally:
        unload(cp, loaded)
    assert refused(cp, gpubot_sa.user, since) == []


def test_the_diagnostic_job_calls_are_allowed_only_with_diagnostics_on(
    control_plane: ControlPlane, gpubot_sa: Identity
) -> None:
    cp = control_plane
    body = node("rbac-diag-gpu", 8, 8)
    status = body.pop("status")
    created = cp.rest.post("/api/v1/nodes", body)
    created["status"] = status
    cp.rest.put("/api/v1/nodes/rbac-diag-gpu/status", created)
    since = len(cp.audit(gpubot_sa.user))
    mine = KubeCluster.from_config(str(gpubot_sa.kubeconfig), timeout_s=15.0)
    try:
        jobs = KubeJobs(mine.api_client, mine.server)
        if not gpubot_sa.diagnostics:
            with pytest.raises(SourceError, match=r"(?i)forbidden"):
                jobs.list_jobs(NS, "app=gpubot")
            return
        p = plan(
            mine,
            jobs,
            "rbac-diag-gpu",
            1,
            namespace=NS,
            image="nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
            requested_by="cli:rbac@test",
            confirmed=1,
        )
        job = jobs.create_job(NS, p.manifest)  # the server accepts the Job gpubot builds
        name = job["metadata"]["name"]
        assert jobs.get_job(NS, name) is not None
        assert [j["metadata"]["name"] for j in jobs.list_jobs(NS, "job-name=" + name)] in ([name], [])
        mine.list_pods(namespace=NS, label_selector=f"job-name={name}")
        jobs.delete_job(NS, name)
        assert refused(cp, gpubot_sa.user, since) == []
    finally:
        mine.close()
        cp.rest.delete("/api/v1/nodes/rbac-diag-gpu")


def test_a_secret_read_and_a_pod_delete_are_refused(control_plane: ControlPlane, gpubot_sa: Identity) -> None:
    cp = control_plane
    cp.rest.post(
        f"/api/v1/namespaces/{NS}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "rbac-probe"}, "stringData": {"k": "v"}},
    )
    cp.rest.post(
        f"/api/v1/namespaces/{NS}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "rbac-probe"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    )
    try:
        for method, path in (
            ("GET", f"/api/v1/namespaces/{NS}/secrets/rbac-probe"),
            ("GET", "/api/v1/secrets"),
            ("DELETE", f"/api/v1/namespaces/{NS}/pods/rbac-probe"),
        ):
            with pytest.raises(ApiError) as e:
                gpubot_sa.rest.call(method, path)
            assert e.value.code == 403, e.value
        assert cp.rest.get(f"/api/v1/namespaces/{NS}/pods/rbac-probe")["metadata"]["name"] == "rbac-probe"
    finally:
        cp.rest.delete(f"/api/v1/namespaces/{NS}/secrets/rbac-probe")
        cp.rest.delete(f"/api/v1/namespaces/{NS}/pods/rbac-probe")
