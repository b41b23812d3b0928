"""44 planted secrets through the real bundle writer: none leaks, ordinary evidence stays (issue 10, item 4).

The secrets sit where real clusters keep them: env values whose names do not say
"token" (containers and init containers), `args` and `command` (`--token X`,
`--api-key=X`, `curl -u user:pass`), JSON in annotations, and log lines
(`export DB_PASS=X`, `using token X`, `cookie: session=X`, a PEM block, …), one
of them on the Xid line the walk quotes in summary.md. The cluster is served by
the fake API server and read by the real kubernetes client. Every file of the
bundle is searched, scenario.yaml and summary.md included.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from bot.actions.bundle_writer import collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from layers.walk import walk
from tests.bundle_scenario import scenario
from tests.fakes.kube_api import serve

TARGET = ("ml", "trainer-0")
UUID = "GPU-adb24b25-1db1-436e-d958-ddee5da83d07"

ENV = {  # name -> the secret in its value (containers)
    "DB_PASS": "Zq7pDbPass-4412",
    "DD_APP_KEY": "ddappkey0a1b2c3d4e5f60718293a4b5c6d7e8f9",
    "KAGGLE_KEY": "kagglekey5e1c0f6d2b9a83",
    "NGC_KEY": "nvapi-Ng3kQ0sT9vLmXa7bYc2dWe5fRg8hJk1lMn4oPq6rSt",
    "SENTRY_DSN": "https://5f1e2d3c4b5a69788796a5b4c3d2e1f0@o123456.ingest.sentry.io/7654321",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T0FAKE01/B0FAKE02/wEbHoOkSeCrEt0123456789ab",
    "AZURE_STORAGE_CONNECTION_STRING": "AccountName=gpuckpt;AccountKey=AzUr3AcC0untK3yBase64Value+abc/def==",
    "PROXY_AUTH": "Basic dXNlcjpwcm94eVBhc3M5OQ==",
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "MLFLOW_TRACKING_URI": "https://mluser:MlFl0wPassw0rd@mlflow.internal:5000",
}
INIT_ENV = {  # init containers
    "OPENAI": "sk-proj-Op3nAiK3yValue0123456789abcdef",
    "GH": "ghp_GhPat0123456789abcdefghijKLMNOPQRST",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLQ",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzSecretKey1",
    "SESSION": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJncHVib3QifQ.c2lnbmF0dXJlMDEyMzQ1Njc4OQ",
}
ARGS = ["--token", "TokArgValue7781", "--api-key=ApiKeyArg9932x", "--password", "ArgPassw0rd55"]
ARG_SECRETS = ["TokArgValue7781", "ApiKeyArg9932x", "ArgPassw0rd55"]
COMMAND = ["sh", "-c", "curl -u admin:CurlPassw0rd99 https://registry.internal/v2/"]
INIT_ARGS = ["-u", "svc:CurlArgPass77", "--client-secret", "ClientSecretArg31"]
ANNOTATIONS = {
    "example.com/config": json.dumps({"apiKey": "AnnApiKey4455", "endpoint": "https://x.internal"}),
    "example.com/sidecar": json.dumps({"env": [{"name": "X", "value": "AnnEnvValue8899"}]}),
    "example.com/notify": "https://hooks.slack.com/services/T0/B0/AnnWebhookSecret123",
    "example.com/db-password": "AnnDbPassw0rd",
}
ANN_SECRETS = ["AnnApiKey4455", "AnnEnvValue8899", "AnnWebhookSecret123", "AnnDbPassw0rd"]
LOG_LINES = {  # the secret -> the line that carries it
    "LogExportPass42": "+ export DB_PASS=LogExportPass42",
    "LogSessionCookie55": "GET /api cookie: session=LogSessionCookie55",
    "LogBotTokenAbc": "POST chat.postMessage Authorization: Bearer xoxb-1234567890-0987654321-LogBotTokenAbc",
    "dXNlcjpsb2dCYXNpY1Bhc3M=": "proxy: Authorization: Basic dXNlcjpsb2dCYXNpY1Bhc3M=",
    "LogPgPassw0rd": "connecting to postgres://trainer:LogPgPassw0rd@db:5432/runs",
    "LogRedisPass11": "cache at redis://:LogRedisPass11@redis:6379/0",
    "MIIEpAIBAAKCAQEAlogPemBody0123456789": (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAlogPemBody0123456789\n-----END RSA PRIVATE KEY-----"
    ),
    "nvapi-LogNgcKey0123456789abcdefghij": "NGC_API_KEY=nvapi-LogNgcKey0123456789abcdefghij",
    "hf_LogHfToken0123456789abcdefghij": "huggingface login hf_LogHfToken0123456789abcdefghij",
    "ghp_LogGithubPat0123456789abcdefghij": "git clone https://ghp_LogGithubPat0123456789abcdefghij@github.com/x/y",
    "sk-LogOpenAiKey0123456789abcdefghij": "OPENAI key sk-LogOpenAiKey0123456789abcdefghij loaded",
    "AKIALOGKEY0123456789": "s3 upload as AKIALOGKEY0123456789",
    "LogAwsSecret0123456789abcdefghijklmnopqr": "aws_secret_access_key=LogAwsSecret0123456789abcdefghijklmnopqr",
    "LogAzureAccKey0123456789+/==": "DefaultEndpointsProtocol=https;AccountKey=LogAzureAccKey0123456789+/==;x=y",
    "LogSentryKey0123456789abcdef": "SENTRY_DSN=https://LogSentryKey0123456789abcdef@o1.ingest.sentry.io/1",
    "LogWebhook0123456789": "posting to https://hooks.slack.com/services/T0LOG/B0LOG/LogWebhook0123456789",
    "xapp-1-A0LOG-LogAppToken0123456789": "socket mode with xapp-1-A0LOG-LogAppToken0123456789",
    "eyJsb2ciOiJqd3QifQ": "jwt=eyJhbGciOiJSUzI1NiJ9.eyJsb2ciOiJqd3QifQ.TG9nSnd0U2lnbmF0dXJlMDEy",
}
XID_SECRET = "LogUsingToken77"  # on the Xid line the walk quotes: summary.md must mask it
SECRETS = [
    *ENV.values(),
    *INIT_ENV.values(),
    *ARG_SECRETS,
    "CurlPassw0rd99",
    "CurlArgPass77",
    "ClientSecretArg31",
    *ANN_SECRETS,
    *LOG_LINES,
    XID_SECRET,
]
# Where a whole value is not the secret itself, the part that must not survive.
PARTS = {"AccountName=gpuckpt;AccountKey=AzUr3AcC0untK3yBase64Value+abc/def==": "AzUr3AcC0untK3y"}


def _planted() -> dict[str, Any]:
    data = scenario()
    plugin = next(
        o for o in data["objects"] if o["metadata"]["name"] == "nvidia-device-plugin-daemonset-x7k2p"
    )
    spec = plugin["spec"]
    spec["containers"][0]["env"] = [
        *({"name": k, "value": v} for k, v in ENV.items()),
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "MIG_STRATEGY", "value": "single"},
    ]
    spec["containers"][0]["args"] = ARGS
    spec["containers"][1]["command"] = COMMAND
    spec["initContainers"][0]["env"] = [{"name": k, "value": v} for k, v in INIT_ENV.items()]
    spec["initContainers"][0]["args"] = INIT_ARGS
    plugin["metadata"]["annotations"] = ANNOTATIONS
    key = "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin"
    lines = data["logs"][key].splitlines()
    lines = [f"{ln} (using token {XID_SECRET})" if "XidCriticalError" in ln else ln for ln in lines]
    data["logs"][key] = "\n".join([*lines, *LOG_LINES.values()]) + "\n"
    return data


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_none_of_44_planted_secrets_leaks_and_the_evidence_stays(tmp_path: Path) -> None:
    assert len(SECRETS) == len(set(SECRETS)) == 44
    sc = parse_scenario(_planted(), "<planted>")
    snap, telemetry = build_sources(sc)
    original = walk(snap, telemetry, *TARGET).to_dict()
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        collect_bundle(KubeCluster.from_config(api.kubeconfig), telemetry, out, target=TARGET, node="gpu-7")
    files = _members(out)
    assert {"scenario.yaml", "summary.md", "gpu_operand_pods.yaml", "manifest.json"} <= set(files)
    leaks = [
        f"{secret} in {name}"
        for name, body in files.items()
        for secret in SECRETS
        if PARTS.get(secret, secret).encode() in body
    ]
    assert leaks == []
    # Ordinary evidence is not masked: the Xid line, GPU UUID, versions, node and image names.
    log = files["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"]
    assert f"Xid=79 on Device={UUID}".encode() in log
    assert b"XidCriticalError" in files["summary.md"] and UUID.encode() in files["summary.md"]
    pods = files["gpu_operand_pods.yaml"]
    for evidence in (
        b"nvcr.io/nvidia/nvidia-device-plugin:v1",
        b"gpu-7",
        b"NVIDIA_VISIBLE_DEVICES",
        b"single",
    ):
        assert evidence in pods, evidence
    assert b"550.54.15" in files["gpu_nodes.labels"] and b"v1.29.4" in files["gpu_nodes.status"]
    assert b"secretKeyRef" not in pods or b"hf-token" in pods
    # The manifest counts the masked values of each file.
    counts = {f["name"]: f.get("masked") for f in json.loads(files["manifest.json"])["files"]}
    assert counts["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"] >= len(LOG_LINES)
    assert counts["gpu_operand_pods.yaml"] >= len(ENV) + len(INIT_ENV) + len(ARG_SECRETS) + 3
    assert counts["scenario.yaml"] >= counts["gpu_operand_pods.yaml"]
    assert counts["summary.md"] >= 1
    assert counts["gpu_nodes.labels"] == 0
    # Masking changed no diagnosis: the bundle replays the same findings (their quoted lines are masked).
    replay = walk(*build_sources(read_bundle(out)), *TARGET).to_dict()
    assert _codes(replay) == _codes(original) and replay["verdict"] == original["verdict"]


def _codes(result: dict[str, Any]) -> list[tuple[int, list[str]]]:
    return [(layer["layer"], [f["code"] for f in layer["findings"]]) for layer in result["layers"]]
