"""Secrets planted in every shape issue 20 found leaking, through the real bundle writer: none
reaches the bundle, and the bundle still replays the same diagnosis.

The shapes: short flags (`-p`, `-a`, `-pX`), `--bearer X`, `--pw`, `--authorization`, secrets in
`sh -c` strings, probe and lifecycle `httpHeaders`, JSON and YAML annotations with keys `bearer`,
`pw`, `key`, `creds` and nested ones, last-applied-configuration, kubeconfig `client-key-data`,
`.netrc`, `key => value`, pre-signed URL signatures (`X-Amz-Signature`, `sig=`, `Signature=`),
vendor tokens (`SG.`, `pypi-`, `dckr_pat_`, `hvs.`, `GOCSPX-`, `sk_test_` …), ClusterPolicy
`spec.driver.args` and env, NVIDIADriver env, event messages, ConfigMaps the target mounts and
log lines. The cluster is the fake API server read by the real kubernetes client; every member
of the tar is searched.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import yaml

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
    """Plant one secret: it is returned to be placed and remembered to be searched for."""
    PLANTED.append(secret)
    return secret


SG = "SG." + "kq3Zr8Tn1Lx0Pw7Yb5Mv2A" + "." + "Hf4Jd8Sk2Lq9Wz1Xc6Vb3Nm7Rt5Yp0Ue8Io2Ka4Sd9F"
PYPI = "pypi-AgEIcHlwaS5vcmc" + "CJDYz3Nl9Qm2Xw7Rk4Tb1Hs8Lp5Vn0Gd6Fj3Ka9Zc2Ye7Ux4Wq1Pr8Ms5Ot0Ib6Nh3El9Dg2Cf"
VENDOR = [
    s(SG),
    s(PYPI),
    s("dckr_pat_7Hq2Lm9Xw3Rk8Tb1Ys5Vn0Pd4Gc6"),
    s("hvs.CAESIK7n2Rq9Lm4Xw8Tb1Ys5Vd3Pg6Hc0Jf"),
    s("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j"),
    s("sk_test_51Hq2Lm9Xw3Rk8Tb1Ys5Vn0Pd"),
    s("sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    s("ghp_Zx8Cv7Bn6Mq5Wr4Ty3Ui2Op1As0Df9Gh8Jk7L"),
    s("glpat-Qw7Er6Ty5Ui4Op3As2Df1G"),
    s("xoxb-2048-4096-Sl4ckB0tT0k3nVaLu3xYz"),
    s("AKIAZ7XQ2LM9RK8TB1YS"),
    s("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJzaGFwZXMifQ.U2hhcGVzSnd0U2lnMDEyMzQ1"),
    s("npm_Qw7Er6Ty5Ui4Op3As2Df1Gh0Jk9Lz8Xc7Vb6N"),
    s("sq0csp-Zx8Cv7Bn6Mq5Wr4Ty3Ui2Op1As0Df9Gh8Jk7Lz6Xc5V"),
    s("0f3a9c2e7b1d4f6a8c0e2b4d6f8a1c3e-us14"),
    s("AzAcc0untK3yShap3s" + "Qw7Er6Ty5Ui4Op3As2Df1Gh0Jk9Lz8Xc7Vb6NmQw7Er6Ty5Ui4Op3As2Df1Gh0Jk9Lz8Xc7Vb6N=="),
    s("sk-proj-Sh4p3sOp3nAi0123456789T3BlbkFJSh4p3sOp3nAi0123456789"),
]
PEM_BODY = s("MIIEowIBAAKCAQEAsh4p3sPemB0dy0123456789")
LOG_SECRETS = {  # the line that carries each secret (one secret a line)
    f"loaded key {VENDOR[0]}": VENDOR[0],
}
LOG_LINES = [
    f"+ pip upload with {VENDOR[1]}",
    f"docker login -u ci --password-stdin <<< {VENDOR[2]}",
    f"vault read with {VENDOR[3]} ok",
    f"oauth client configured: {VENDOR[4]}",
    f"stripe test mode {VENDOR[5]}",
    f"stripe {VENDOR[6]}",
    f"git remote {VENDOR[7]}",
    f"gitlab {VENDOR[8]}",
    f"slack {VENDOR[9]}",
    f"s3 as {VENDOR[10]}",
    f"session {VENDOR[11]}",
    f"//registry.npmjs.org/:_authToken={VENDOR[12]}",
    f"square {VENDOR[13]}",
    f"mailchimp {VENDOR[14]}",
    f"DefaultEndpointsProtocol=https;AccountName=x;AccountKey={VENDOR[15]};EndpointSuffix=core.windows.net",
    f"openai {VENDOR[16]}",
    f"GET https://ckpt.s3.amazonaws.com/m.pt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={s('AKIAQW7ER6TY5UI4OP3A')}%2F20261129&X-Amz-Signature={s('4b1c9e0f7a2d3c8b6e5f4a3b2c1d0e9f8a7b6c5d')}&X-Amz-Security-Token={s('FwoGZXIvYXdzEShapesSecTok0123')}",
    f"PUT https://acct.blob.core.windows.net/ckpt/m.pt?sv=2022-11-02&se=2026-12-01&sig={s('Sh4p3sAzSasSig0123%2Bxyz%3D')}",
    f"fetch https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4&X-Goog-Signature={s('9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b')}",
    f"fetch https://d111.cloudfront.net/o?Expires=1732874400&Signature={s('Sh4p3sCfSig0123~abc')}&Key-Pair-Id=K2JCJMDEHXQW5F",
    f"config => {{ 'db_password' => '{s('Sh4p3sPerlPw77')}' }}",
    f"machine files.example.com login ci password {s('Sh4p3sNetrcLog1')}",
    f"  client-key-data: {s('LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVkgU2hhcGVz')}",
    f"  token: {s('Sh4p3sKubeTok3n0123')}",
    f"mysql -h db -u root -p{s('Sh4p3sMysqlGlued9')} runs",
    f"redis-cli -a {s('Sh4p3sRedisLog2')} ping",
    f"launch --bearer {s('Sh4p3sBearerLog3')} --pw={s('Sh4p3sPwLog4')} --authorization {s('Sh4p3sAuthLog5')}",
    f"Authorization: Bearer {s('Sh4p3sAuthHdrLog6')}",
    f'settings {{"api_key": "{s("Sh4p3sJsonLog7Qw8Er9")}"}}',
    f"export DB_PASSWORD={s('Sh4p3sExportLog8')}",
    f"postgres://trainer:{s('Sh4p3sPgLog9')}@db:5432/runs",
    f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----",
]
XID_SECRET = s("Sh4p3sOnXidLine10")  # on the Xid line layer 5 quotes in summary.md
TRAINER_LOG = [
    f"wandb login {s('Sh4p3sWandbKey0123456789abcdef0123456789ab')}",
    f"HF_TOKEN=hf_{s('Sh4p3sHfTok0123456789abcdef')}",
]
PREVIOUS_LOG = [f"retrying with password {s('Sh4p3sPrevLog11')}"]

ENV = {  # names that say nothing: structure masks them
    "DB_HOST_CONFIG": s("Sh4p3sEnv01"),
    "MODE": s("Sh4p3sEnv02"),
    "UPLOAD_URL": f"https://x.s3.amazonaws.com/o?X-Amz-Signature={s('Sh4p3sEnv03Sig')}",
    "OPTS": f"--pw {s('Sh4p3sEnv04')}",
    "PIN": s("83920571"),
    "CFG": json.dumps({"creds": {"pw": s("Sh4p3sEnv06")}}),
    "SENDGRID": s("SG.Sh4p3sEnv07Qw8Er9Ty0U.Io1Pa2Sd3Fg4Hj5Kl6Zx7Cv8Bn9Mq0Wr1Ty2Ui3Op4As5D"),
    "VAULT": s("hvs.Sh4p3sEnv08Qw8Er9Ty0Ui1Op"),
}
INIT_ENV = {"SEED": s("Sh4p3sInitEnv1"), "CACHE": s("Sh4p3sInitEnv2")}
ARGS = [
    "--fail-on-init-error=false",
    "-p",
    s("Sh4p3sArgP1"),
    "-a",
    s("Sh4p3sArgA2"),
    f"-p{s('Sh4p3sArgGlued3')}",
    "--bearer",
    s("Sh4p3sArgBearer4"),
    "--pw",
    s("Sh4p3sArgPw5"),
    f"--pw={s('Sh4p3sArgPwEq6')}",
    "--authorization",
    s("Sh4p3sArgAuth7"),
    f"--client-secret={s('Sh4p3sArgCs8')}",
    s("Sh4p3sArgPositional9"),
    "--endpoint",
    f"https://bob:{s('Sh4p3sArgUrl10')}@api.internal",
]
INIT_ARGS = ["--config", s("Sh4p3sInitArg1"), f"--sig={s('Sh4p3sInitArg2')}"]
SCRIPT = (
    f"export TOKEN={s('Sh4p3sSh1')}; "
    f"mysql -uroot -p{s('Sh4p3sSh2')} db && "
    f'curl -H "Authorization: Bearer {s("Sh4p3sSh3")}" https://api.internal/x | '
    f"redis-cli -a {s('Sh4p3sSh4')} ping; "
    f"curl -u admin:{s('Sh4p3sSh5')} https://registry.internal; "
    f"run --secret {s('Sh4p3sSh6')}"
)
PROBE_HEADERS = [s("Sh4p3sProbe1"), s("Sh4p3sProbe2"), s("Sh4p3sProbe3"), s("Sh4p3sProbe4")]
ANNOTATIONS = {
    "example.com/json": json.dumps(
        {"bearer": s("Sh4p3sAnn1"), "pw": s("Sh4p3sAnn2"), "key": s("Sh4p3sAnn3"), "creds": s("Sh4p3sAnn4")}
    ),
    "example.com/nested": json.dumps({"a": {"b": [{"c": s("Sh4p3sAnn5")}]}}),
    "example.com/yaml": f"auth:\n  user: ci\n  token: {s('Sh4p3sAnn6')}\nkey: {s('Sh4p3sAnn7')}\n",
    "example.com/plain": s("Sh4p3sAnn8"),
    "example.com/url": f"https://x.blob.core.windows.net/c?sig={s('Sh4p3sAnn9')}",
    "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"annotations": {"x/y": s("Sh4p3sAnn10")}},
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "env": [{"name": "K", "value": s("Sh4p3sAnn11")}],
                        "args": ["--pw", s("Sh4p3sAnn12")],
                    }
                ]
            },
        }
    ),
}
POLICY = {
    "args": ["--token", s("Sh4p3sCpArg1"), f"--pw={s('Sh4p3sCpArg2')}", "-p", s("Sh4p3sCpArg3")],
    "env": [{"name": "X", "value": s("Sh4p3sCpEnv4")}, {"name": "Y", "value": s("Sh4p3sCpEnv5")}],
    "plugin_env": [{"name": "Z", "value": s("Sh4p3sCpEnv6")}],
    "annotation": s("Sh4p3sCpAnn7"),
}
DRIVER_CR = {"env": [{"name": "A", "value": s("Sh4p3sNdEnv1")}], "args": ["--bearer", s("Sh4p3sNdArg2")]}
EVENTS = {
    "pod": f"Pulling from https://reg.internal/v2?X-Amz-Signature={s('Sh4p3sEvt1')} with token {s('Sh4p3sEvt2')}",
    "node": f"kubelet: curl -H 'Authorization: Bearer {s('Sh4p3sEvt3')}'",
    "operator": f"reconcile failed: password={s('Sh4p3sEvt4')} rejected",
}
TARGET_ENV = {
    "WANDB": s("Sh4p3sTgtEnv1"),
    "S3": s("Sh4p3sTgtEnv2"),
    "X": s("Sh4p3sTgtEnv3"),
    "Y": s("Sh4p3sTgtEnv4"),
}
TARGET_ARGS = [
    "train.py",
    f"--api-key={s('Sh4p3sTgtArg1')}",
    "--resume",
    s("Sh4p3sTgtArg2"),
    "-a",
    s("Sh4p3sTgtArg3"),
]
TARGET_ANNOTATIONS = {
    "example.com/creds": s("Sh4p3sTgtAnn1"),
    "example.com/cfg": json.dumps({"pw": s("Sh4p3sTgtAnn2")}),
}
OPERATOR_LOG = [
    json.dumps({"level": "error", "msg": "registry auth failed", "token": s("Sh4p3sOpLog1")}),
    json.dumps({"level": "info", "msg": f"pulling with --password {s('Sh4p3sOpLog2')}"}),
]
DRIVER_MANAGER_ENV = [
    {"name": "ENABLE_GPU_POD_EVICTION", "value": "true"},
    {"name": "K", "value": s("Sh4p3sDmEnv1")},
]
CONFIGMAP = {
    "run.sh": (
        "#!/bin/sh\nset -e\n"
        f"export HF_TOKEN={s('Sh4p3sCm1')}\n"
        f"python3 train.py --wandb-key {s('Sh4p3sCm2')} -p {s('Sh4p3sCm3')}\n"
    ),
    "kubeconfig": yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "users": [
                {
                    "name": "ci",
                    "user": {
                        "client-key-data": s("LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tU2hhcGVzQ20"),
                        "token": s("Sh4p3sCm5"),
                        "password": s("Sh4p3sCm6"),
                    },
                }
            ],
        }
    ),
    ".netrc": f"machine api.internal\n  login ci\n  password {s('Sh4p3sCm7')}\n",
    "settings.json": json.dumps({"storage": {"creds": {"key": s("Sh4p3sCm8")}}, "retries": 3}),
    "app.conf": f"db_pass => {s('Sh4p3sCm9')}\n",
}


def _planted() -> dict[str, Any]:
    data = scenario()
    objs = data["objects"]
    plugin = next(o for o in objs if o["metadata"]["name"] == "nvidia-device-plugin-daemonset-x7k2p")
    spec = plugin["spec"]
    c0, c1 = spec["containers"]
    c0["env"] = [
        *({"name": k, "value": v} for k, v in ENV.items()),
        {"name": "MIG_STRATEGY", "value": "single"},
    ]
    c0["env"].append({"name": "HF", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}})
    c0["args"] = ARGS
    c1["command"] = ["sh", "-c", SCRIPT]
    header = [{"name": "X-Api-Key", "value": v} for v in PROBE_HEADERS]
    c0["livenessProbe"] = {"httpGet": {"path": "/health", "port": 8080, "httpHeaders": header[:1]}}
    c0["readinessProbe"] = {"httpGet": {"path": "/ready", "port": 8080, "httpHeaders": header[1:2]}}
    c0["startupProbe"] = {"httpGet": {"path": "/start", "port": 8080, "httpHeaders": header[2:3]}}
    c0["lifecycle"] = {"postStart": {"httpGet": {"path": "/hook", "port": 8080, "httpHeaders": header[3:]}}}
    spec["initContainers"][0]["env"] = [{"name": k, "value": v} for k, v in INIT_ENV.items()]
    spec["initContainers"][0]["args"] = INIT_ARGS
    plugin["metadata"]["annotations"] = ANNOTATIONS
    policy = next(o for o in objs if o["kind"] == "ClusterPolicy")
    policy["metadata"]["annotations"] = {"example.com/owner-token": POLICY["annotation"]}
    policy["spec"]["driver"].update(args=POLICY["args"], env=POLICY["env"])
    policy["spec"]["devicePlugin"] = {"env": POLICY["plugin_env"]}
    objs.append(
        {
            "apiVersion": "nvidia.com/v1alpha1",
            "kind": "NVIDIADriver",
            "metadata": {"name": "default"},
            "spec": {"driverType": "gpu", **DRIVER_CR},
        }
    )
    trainer = next(o for o in objs if o["metadata"]["name"] == "trainer-0")
    trainer["spec"]["containers"][0].update(env=[{"name": k, "value": v} for k, v in TARGET_ENV.items()])
    trainer["spec"]["containers"][0].update(command=["python3"], args=TARGET_ARGS)
    trainer["metadata"]["annotations"] = TARGET_ANNOTATIONS
    driver = next(o for o in objs if o["metadata"]["name"] == "nvidia-driver-daemonset-8xk2l")
    driver["spec"]["initContainers"][0]["env"] = DRIVER_MANAGER_ENV
    trainer["spec"]["volumes"] = [{"name": "scripts", "configMap": {"name": "trainer-scripts"}}]
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "trainer-scripts", "namespace": "ml"},
            "data": CONFIGMAP,
        }
    )
    for event in objs:
        if event["kind"] == "Event":
            kind = event["involvedObject"]["kind"]
            event["message"] += " " + (EVENTS["pod"] if kind == "Pod" else EVENTS["node"])
    objs.append(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "policy.1", "namespace": "gpu-operator"},
            "involvedObject": {"kind": "ClusterPolicy", "name": "cluster-policy"},
            "reason": "Reconcile",
            "type": "Warning",
            "message": EVENTS["operator"],
            "lastTimestamp": "2026-11-29T11:50:00Z",
        }
    )
    key = "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin"
    lines = data["logs"][key].splitlines()
    lines = [f"{ln} (using token {XID_SECRET})" if "XidCriticalError" in ln else ln for ln in lines]
    data["logs"][key] = "\n".join([*lines, *LOG_SECRETS, *LOG_LINES]) + "\n"
    data["logs"]["gpu-operator/gpu-operator-6d5b8f7c9-abcde/gpu-operator"] += "\n".join(OPERATOR_LOG) + "\n"
    data["logs"]["ml/trainer-0/trainer"] += "\n".join(TRAINER_LOG) + "\n"
    data["logs"]["ml/trainer-0/trainer#previous"] += "\n".join(PREVIOUS_LOG) + "\n"
    return data


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_no_planted_secret_of_any_shape_reaches_the_bundle_and_it_replays(tmp_path: Path) -> None:
    sc = parse_scenario(_planted(), "<planted>")
    assert len(PLANTED) == len(set(PLANTED)) >= 114
    snap, telemetry = build_sources(sc)
    original = walk(snap, telemetry, *TARGET)
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        collect_bundle(KubeCluster.from_config(api.kubeconfig), telemetry, out, target=TARGET, node="gpu-7")
    files = _members(out)
    assert {"scenario.yaml", "summary.md", "cluster_policy.yaml", "target/configmaps.yaml"} <= set(files)
    leaks = [
        f"{secret} in {name}" for name, body in files.items() for secret in PLANTED if secret.encode() in body
    ]
    assert leaks == []
    # The evidence stays: the Xid line, the GPU UUID, a plain flag, the program, env names and refs.
    log = files["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"]
    assert f"Xid=79 on Device={UUID}".encode() in log
    pods = files["gpu_operand_pods.yaml"]
    for evidence in (
        b"--fail-on-init-error=false",
        b"MIG_STRATEGY",
        b"single",
        b"hf-token",
        b"X-Api-Key",
        b"- sh",
    ):
        assert evidence in pods, evidence
    assert b"ENABLE_GPU_POD_EVICTION" in pods and b"value: 'true'" in pods
    assert b"run.sh" in files["target/configmaps.yaml"] and b"python3" in files["target/configmaps.yaml"]
    # The diagnosis replays from the bundle: the same layers, codes and verdict.
    replay = walk(*build_sources(read_bundle(out)), *TARGET)
    assert _codes(replay.to_dict()) == _codes(original.to_dict())
    assert replay.verdict is not None and original.verdict is not None
    assert replay.verdict.code == original.verdict.code


def _codes(result: dict[str, Any]) -> list[tuple[int, list[str]]]:
    return [(layer["layer"], [f["code"] for f in layer["findings"]]) for layer in result["layers"]]
