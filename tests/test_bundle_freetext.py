"""Secrets of 80 shapes of our own in a bundle's free text, through the real bundle writer, in pod,
node and fleet bundles: none reaches any member, and each bundle replays the live walk's verdict
(issue 28, item 2: default-deny, bot/actions/freetext.py).

The shapes are not issue 28's (tests/test_freetext.py has those) nor issue 20's
(tests/test_bundle_secrets_shapes.py): vendor tokens, passwords in URLs of many schemes, cookies,
Authorization headers in many spellings, keys in YAML, JSON, INI, TOML, XML, properties, env and
CLI-flag forms inside log lines, base64-, URL- and hex-encoded secrets, bare hex keys, secrets
wrapped across lines (a JWT, an OpenSSH key, an EC PEM), secrets after non-English words
(German, Spanish, French, Portuguese, Russian, Chinese, Japanese), prose ("the secret is …"), the
second word of a quoted secret, and env values that are not what their names promise. They sit in
an operand's log (every bundle holds it), the operator's log, the target's logs, a node condition's
message and event messages. The cluster is the fake API server read by the real kubernetes client.
"""

from __future__ import annotations

import base64
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bot.actions.bundle_writer import collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from layers.walk import walk
from tests.bundle_scenario import scenario
from tests.fakes.kube_api import serve

TARGET = ("ml", "trainer-0")
UUID = "GPU-adb24b25-1db1-436e-d958-ddee5da83d07"
PLANTED: list[str] = []


def s(secret: str) -> str:
    PLANTED.append(secret)
    return secret


B64_CREDS = s(base64.b64encode(b"svc-backup:Vault0Pass2026").decode())
B64_JSON = s(base64.b64encode(json.dumps({"user": "ci", "password": "JsonInB64Pw"}).encode()).decode())
JWT_HEAD = "eyJhbGciOiJSUzI1NiIsImtpZCI6Ik9wM3JhdDByIn0.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bWwifQ."
JWT_SIG1, JWT_SIG2 = s("Qm9vU2lnUGFydE9uZUFiYw"), s("x9Tail")
OPENSSH = [s("b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"), s("QyNTUxOQAAACBh")]
EC_PEM = [s("MHcCAQEEIBkq3Wv8h2Lx0sR4nT6yPzU1mQ9cF7dE2aB5kJ8gH4iLoAoGCCqGSM49"), s("AwEHoUQDQgAE")]
LOG = [
    # vendor tokens, bare
    f"cloning with {s('github_pat_11AZQW3RT0abcdEFGHijklMNOPqr_stUVwxYZ0123456789abcdefGHIJKLmnopQRSTuv')}",
    f"runner registered {s('glrt-9sQx2Lm8Vn4Kp7Rt1Wz5')}",
    f"posting as {s('xoxp-2718281828-3141592653-1618033988-9f8e7d6c5b4a39281706f5e4d3c2b1a0')}",
    f"socket mode {s('xapp-1-A0PLANT77-5550123456789-a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6')}",
    f"billing via {s('rk_live_51PlantedRestrictedKey0aBcDeF')}",
    f"twilio {s('SK0123456789abcdef0123456789abcdef')}",
    f"mail {s('key-3ax6xnjp29jd6fds4gc373sgvjxteol0')}",
    f"claude {s('sk-ant-api03-PlAnTeDkEy0123456789-abcdefGHIJKL_mnopqrstUVWX')}",
    f"hub {s('hf_PlantedHubTokenQwErTyUiOp0123456789')}",
    f"ngc {s('nvapi-PlAnTeD0123456789abcdefghijklmnopqrstuvwxyzABCDEF')}",
    f"databricks {s('dapi0123456789abcdef0123456789abcdef')}",
    f"do {s('dop_v1_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef')}",
    f"shop {s('shpat_0123456789abcdef0123456789abcdef')}",
    f"jira {s('ATATT3xFfGF0PlantedAtlassianToken0123456789abcdefghij')}",
    f"maps {s('AIzaSyPlantedGoogleKey0123456789abcdefg')}",
    # passwords in URLs
    f"mongo mongodb+srv://admin:{s('M0ngoPlantPw')}@cluster0.mongodb.net/runs",
    f"queue amqp://guest:{s('RabbitPlant9')}@rabbit:5672/",
    f"db mysql://root:{s('MyPlantPw42')}@db:3306/x",
    f"ftp://files:{s('FtpPlant77')}@files.internal/pub",
    f"git fetch https://oauth2:{s('glpat-PlantedGitlab0123')}@gitlab.com/ml/repo.git",
    f"DATABASE_URL=postgresql://u:{s('PgUrlPlant1')}@h/db",
    # cookies
    f"Cookie: sessionid={s('Sess1onPlant0abc')}; csrftoken={s('CsrfPlantTok9')}",
    f"Set-Cookie: AWSALB={s('AlbStickyPlant55')}; Path=/",
    f"cookie jar _oauth2_proxy={s('OauthProxyPlant0xyz')}",
    # Authorization in many spellings
    f"authorization: Basic {s('YWRtaW46cGxhbnRlZDIwMjY=')}",
    f"AUTHORIZATION=Token {s('tok_PlantUpper88')}",
    f'{{"Authorization":"Bearer {s("ya29.PlantedGoogleOauth0123")}"}}',
    f"curl -H 'authorization: Bearer {s('CurlHdrPlant7')}' https://api.internal/v1",
    f"Proxy-Authorization: Negotiate {s('YIIBhgYGKwYBBQUCoIIBejPlant')}",
    f"X-Api-Key: {s('9f8e7d6c5b4a39281706f5e4d3c2b1a0')}",
    f"x-auth-token: {s('AuthTokHdrPlant3')}",
    f"headers={{'Authorization': 'Bearer {s('PyDictPlant4')}'}}",
    f'authorization => "Digest username=ci, response={s("DigestRespPlant5")}"',
    # keys in YAML / JSON / INI / TOML / XML / properties / env / CLI forms
    f"  secretKey: {s('YamlSecretPlant6')}",
    f'{{"clientSecret":"{s("JsonClientPlant7")}","retries":3}}',
    f"aws_secret_access_key = {s('je7MtGbClwBF/2Zp9Utk/PlantEXAMPLEKEY')}",
    f'password = "{s("TomlPlantPw8")}"',
    f"<password>{s('XmlPlantPw9')}</password>",
    f"spring.datasource.password={s('SpringPlant10')}",
    f"export OPENAI_API_KEY={s('sk-proj-PlantedOpenAi0123456789')}",
    f"--db-password={s('CliDbPlant11')} --verbose",
    f"--api-token {s('CliTokPlant12')}",
    f"docker login -u ci -p {s('DockerPlant13')} nvcr.io",
    f"helm repo add nv https://helm.ngc.nvidia.com --password {s('HelmPlant14')}",
    f"PGPASSWORD={s('PgEnvPlant15')} psql -h db",
    f"bearer {s('BearerWordPlant16')}",
    f"sig:{s('SigColonPlant17')}",
    f'db_pass = "alpha {s("Bravo7x")}"',
    f"settings: {{user: ci, passwd: {s('FlowYamlPlant18')}}}",
    f"--set auth.rootPassword={s('HelmSetPlant19')}",
    # encoded
    f"loaded {B64_CREDS} from vault",
    f"config blob {B64_JSON}",
    f"redirect ?passwd=p%40ss{s('%2FPlantUrlEnc20')}%21",
    f"callback=https%3A%2F%2Fu%3A{s('Secr3tUrlEnc21')}%40host",
    f"payload {s('7365637265745f6b65795f3132333435')}",
    f"signing with {s('4f3c2b1a09f8e7d6c5b4a3928170f6e5d4c3b2a1908f7e6d5c4b3a2918f7e6d5')}",
    f"using {s('5d41402abc4b2a76b9719d911017c592')} for upload",
    f"api key for wandb: {s('0a1b2c3d4e5f60718293a4b5c6d7e8f901234567')}",
    # wrapped across lines
    f"sa token {JWT_HEAD}{JWT_SIG1}",
    JWT_SIG2,
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    *OPENSSH,
    "-----END OPENSSH PRIVATE KEY-----",
    "-----BEGIN EC PRIVATE KEY-----",
    *EC_PEM,
    "-----END EC PRIVATE KEY-----",
    # non-English
    f"Passwort: {s('GeheimPlant22')}",
    f"contraseña={s('ClavePlant23')}",
    f"mot de passe : {s('Fr4nceMdpPlant')}",
    f"пароль: {s('SekretPlant24')}",
    f"密码={s('MimaPlant25abc')}",
    f"パスワード：{s('NihonPlant26')}",
    f"senha={s('BrasilPlant27')}",
    # prose
    f"the secret is {s('Xyzzy4242')}",
    f"your one-time passcode {s('918273')}",
]
NODE_CONDITION = f"PLEG is not healthy; kubelet token={s('NodeCondPlant28')}"
NODE_EVENT = f"Node gpu-7 status: registry credential {s('NodeEvtPlant29')} rejected"
POD_EVENT = f"Failed to pull image: unauthorized, using token {s('PodEvtPlant30')}"
OPERATOR_LOG = [
    json.dumps({"level": "info", "msg": "reconcile", "password": s("OpJsonPlant31")}),
    json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "password": s("DockerCfgPlant32")}}}),
]
TRAINER_LOG = [f"wandb: W&B API key is {s('0f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6')}"]
ENV = {  # values that are not what their names promise
    "NVIDIA_VISIBLE_DEVICES": s("Sh0uldBeDev1ces"),
    "NVIDIA_DRIVER_CAPABILITIES": f"compute,utility,{s('CapPlant33')}",
    "DEVICE_LIST_STRATEGY": s("envvarPlant34"),
}


def _planted() -> dict[str, Any]:
    data = scenario()
    objs = data["objects"]
    plugin = next(o for o in objs if o["metadata"]["name"] == "nvidia-device-plugin-daemonset-x7k2p")
    plugin["spec"]["containers"][0]["env"] = [{"name": k, "value": v} for k, v in ENV.items()]
    for obj in objs:
        if obj["kind"] == "Node" and obj["metadata"]["name"] == "gpu-7":
            obj["status"]["conditions"].append(
                {
                    "type": "PLEGHealthy",
                    "status": "False",
                    "reason": "PLEGNotHealthy",
                    "message": NODE_CONDITION,
                }
            )
        if obj["kind"] == "Event":
            pod_event = obj["involvedObject"]["kind"] == "Pod"
            obj["message"] += " " + (POD_EVENT if pod_event else NODE_EVENT)
    key = "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin"
    data["logs"][key] += "\n".join(LOG) + "\n"
    data["logs"]["gpu-operator/gpu-operator-6d5b8f7c9-abcde/gpu-operator"] += "\n".join(OPERATOR_LOG) + "\n"
    data["logs"]["ml/trainer-0/trainer"] += "\n".join(TRAINER_LOG) + "\n"
    return data


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _codes(result: dict[str, Any]) -> list[tuple[int, list[str]]]:
    return [(layer["layer"], [f["code"] for f in layer["findings"]]) for layer in result["layers"]]


SCOPES = {"pod": {"target": TARGET, "node": "gpu-7"}, "node": {"node": "gpu-7"}, "fleet": {}}


@pytest.mark.parametrize("scope", list(SCOPES))
def test_no_planted_secret_reaches_any_member_and_the_bundle_replays(tmp_path: Path, scope: str) -> None:
    assert len(PLANTED) == len(set(PLANTED)) >= 80
    snap, telemetry = build_sources(parse_scenario(_planted(), "<planted>"))
    live = walk(snap, telemetry, *TARGET).to_dict()
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        collect_bundle(KubeCluster.from_config(api.kubeconfig), telemetry, out, **SCOPES[scope])  # type: ignore[arg-type]
    files = _members(out)
    assert {"scenario.yaml", "summary.md", "manifest.json"} <= set(files)
    log = files["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"]
    assert b"OpJsonPlant31" not in log and len(log) > 1000  # the planted lines are in it, masked
    leaks = [
        f"{secret} in {name}" for name, body in files.items() for secret in PLANTED if secret.encode() in body
    ]
    assert leaks == []
    # The evidence stays: the Xid line with its GPU UUID, the node, the env names.
    assert f"Xid=79 on Device={UUID}".encode() in log
    assert b"NVIDIA_VISIBLE_DEVICES" in files["scenario.yaml"] and b"gpu-7" in files["scenario.yaml"]
    replay = walk(*build_sources(read_bundle(out)), *TARGET).to_dict()
    assert _codes(replay) == _codes(live)
    assert (replay.get("verdict") or {}).get("code") == (live.get("verdict") or {}).get("code")
