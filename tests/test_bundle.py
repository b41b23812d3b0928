"""Must-gather bundles: round trip through the real client, secrets, caps, failed reads, bug reports."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from bot.actions.bundle_writer import Caps, collect_bundle
from bot.sources.bundle_reader import read_bundle
from bot.sources.kube import KubeCluster
from bot.sources.scenario import ScenarioError, build_sources, parse_scenario
from layers.sources import SourceError
from layers.walk import walk
from tests.bundle_scenario import scenario
from tests.fakes.kube_api import serve

TARGET = ("ml", "trainer-0")


def members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_round_trip_through_the_fake_api_server_replays_the_same_walk(tmp_path: Path) -> None:
    sc = parse_scenario(scenario(), "<xid79>")
    snap, telemetry = build_sources(sc)
    original = walk(snap, telemetry, *TARGET).to_dict()
    verdict = original["verdict"]
    assert isinstance(verdict, dict)  # the incident is visible, so equality below means something
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        kube = KubeCluster.from_config(api.kubeconfig)
        report = collect_bundle(kube, telemetry, out, target=TARGET)
    assert report.errors == []
    files = members(out)
    for name in (
        "cluster_policy.yaml",
        "gpu_nodes.labels",
        "gpu_nodes.descr",
        "gpu_operator_pod.log",
        "gpu_operand_pods.status",
        "gpu_operand_pod_images.txt",
        "gpu_operand_ds.yaml",
        "logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log",
        "logs/trainer-0/trainer.previous.log",
        "dcgm/gpu-7.openmetrics",
        "summary.md",
        "manifest.json",
    ):
        assert name in files, name
    assert (
        b"Xid=79 on Device=GPU-adb24b25"
        in files["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"]
    )
    assert files["dcgm/gpu-7.openmetrics"].endswith(b"# EOF\n")
    assert verdict["code"].encode() in files["summary.md"]
    replay_cluster, replay_telemetry = build_sources(read_bundle(out))
    assert walk(replay_cluster, replay_telemetry, *TARGET).to_dict() == original


def test_why_bundle_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli.main import main

    sc = parse_scenario(scenario(), "<xid79>")
    snap, telemetry = build_sources(sc)
    out = tmp_path / "b.tar.gz"
    collect_bundle(snap, telemetry, out, node="gpu-7")
    assert main(["why", "--bundle", str(out), "ml/trainer-0", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == walk(snap, telemetry, *TARGET).to_dict()


def test_node_scope_leaves_other_nodes_operands_out(tmp_path: Path) -> None:
    snap, telemetry = build_sources(parse_scenario(scenario(), "<xid79>"))
    collect_bundle(snap, telemetry, tmp_path / "b.tar.gz", node="gpu-7")
    files = members(tmp_path / "b.tar.gz")
    assert b"nvidia-device-plugin-daemonset-x7k2p" in files["gpu_operand_pods.status"]
    assert b"q9z8w" not in files["gpu_operand_pods.status"]  # gpu-8's device plugin
    assert b"gpu-operator-6d5b8f7c9-abcde" in files["gpu_operator_pod.status"]  # runs on cpu-1
    assert (
        files["gpu_nodes.labels"].startswith(b"node/gpu-7\n")
        and b"node/gpu-8" not in files["gpu_nodes.labels"]
    )


def with_secrets() -> tuple[dict[str, Any], list[str]]:
    data = scenario()
    secrets = [
        "hunter2-db-pass",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJncHVib3QifQ.c2lnbmF0dXJlLXZhbHVl",
        "AKIAIOSFODNN7EXAMPLE",
        "hf_AbCdEfGhIjKlMnOpQrStUvWx",
        "s3cr3t-api-key-987",
        "dGhpcy1pcy10aGUtc2VjcmV0LXRva2Vu",
    ]
    trainer = next(o for o in data["objects"] if o["metadata"]["name"] == "trainer-0")
    trainer["spec"]["containers"][0]["env"] = [
        {"name": "DB_PASSWORD", "value": secrets[0]},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
        {"name": "EPOCHS", "value": "3"},
    ]
    trainer["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "trainer-env"}}]
    trainer["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": json.dumps({"env": [{"value": secrets[0]}]}),
    }
    data["objects"].append(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token", "namespace": "ml"},
            "data": {"token": secrets[5]},
        }
    )
    data["logs"]["ml/trainer-0/trainer"] = (
        f"GET /v1/models Authorization: Bearer {secrets[1]}\n"
        f"connecting to postgres://trainer:{secrets[0]}@db:5432/runs\n"
        f"aws_access_key_id={secrets[2]} uploading checkpoint\n"
        f"login with token {secrets[3]}\n"
        f'config: {{"api_key": "{secrets[4]}", "epochs": 3}}\n'
        "epoch 3 step 120\n"
    )
    return data, secrets


def test_no_secret_material_in_any_file(tmp_path: Path) -> None:
    data, secrets = with_secrets()
    snap, telemetry = build_sources(parse_scenario(data, "<secrets>"))
    out = tmp_path / "b.tar.gz"
    collect_bundle(snap, telemetry, out, target=TARGET)
    files = members(out)
    for name, body in files.items():
        for secret in secrets:
            assert secret.encode() not in body, f"{secret} leaked in {name}"
    # References stay readable: the name of the Secret, not its value; harmless lines untouched.
    assert b"hf-token" in files["target/pod.yaml"] and b"trainer-env" in files["target/pod.yaml"]
    assert b"epoch 3 step 120" in files["logs/trainer-0/trainer.log"]
    replay = read_bundle(out)
    assert not any(o["kind"] == "Secret" for o in replay.objects)


def test_caps_on_a_20_mb_log(tmp_path: Path) -> None:
    data = scenario()
    key = "gpu-operator/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin"
    line = "I1129 11:58:05.486697       1 health.go:159] Processing event {Device:{Handle:0x7f7597647848} EventType:8}\n"
    data["logs"][key] = line * (20 * 2**20 // len(line)) + data["logs"][key]
    snap, telemetry = build_sources(parse_scenario(data, "<huge>"))
    out = tmp_path / "b.tar.gz"
    caps = Caps(log_tail_lines=1_000_000, log_bytes=2**20, total_bytes=3 * 2**20)
    report = collect_bundle(snap, telemetry, out, node="gpu-7", caps=caps)
    files = members(out)
    dp = files["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"]
    assert len(dp) <= 2**20 and dp.endswith(b"marked unhealthy: GPU-adb24b25-1db1-436e-d958-ddee5da83d07\n")
    cut = {c["file"]: c for c in json.loads(files["manifest.json"])["cut"]}
    assert (
        cut["logs/nvidia-device-plugin-daemonset-x7k2p/nvidia-device-plugin.log"]["reason"] == "log bytes cap"
    )
    assert sum(len(b) for b in files.values()) <= caps.total_bytes + 2**20  # essentials may pass a little
    assert report.cut
    replay = read_bundle(out)
    assert replay.logs[key].endswith(dp.decode())


def test_tail_lines_cap_and_total_cap_are_listed(tmp_path: Path) -> None:
    data = scenario()
    data["logs"]["gpu-operator/nvidia-driver-daemonset-8xk2l/nvidia-driver-ctr"] = "".join(
        f"line {i}\n" for i in range(5000)
    )
    snap, telemetry = build_sources(parse_scenario(data, "<lines>"))
    out = tmp_path / "b.tar.gz"
    report = collect_bundle(
        snap, telemetry, out, node="gpu-7", caps=Caps(log_tail_lines=100, total_bytes=60_000)
    )
    drv = members(out)["logs/nvidia-driver-daemonset-8xk2l/nvidia-driver-ctr.log"]
    assert drv.count(b"\n") == 100 and drv.endswith(b"line 4999\n")
    reasons = {c["reason"] for c in report.cut}
    assert "log tail lines cap" in reasons


def test_forbidden_reads_still_produce_a_bundle(tmp_path: Path) -> None:
    snap, telemetry = build_sources(parse_scenario(scenario(), "<xid79>"))
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        api.fail(r"/pods/[^/]+/log$", status=403)
        api.fail(r"/clusterpolicies", status=403)
        report = collect_bundle(KubeCluster.from_config(api.kubeconfig), telemetry, out, node="gpu-7")
    files = members(out)
    errors = files["errors.txt"].decode()
    assert "pods/log" in errors and "'get' on 'pods/log'" in errors
    assert "clusterpolicies" in errors and "cluster_policy.missing" in files
    assert report.errors and "scenario.yaml" in files and "manifest.json" in files


def test_missing_node_is_not_found(tmp_path: Path) -> None:
    snap, telemetry = build_sources(parse_scenario(scenario(), "<xid79>"))
    with pytest.raises(SourceError) as err:
        collect_bundle(snap, telemetry, tmp_path / "b.tar.gz", node="gpu-99")
    assert err.value.kind == "not_found" and not list(tmp_path.iterdir())


REPORT = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\nDB password=Hunter2Secret\n"


def test_bug_report_when_exec_allowed_and_when_forbidden(tmp_path: Path) -> None:
    snap, telemetry = build_sources(parse_scenario(scenario(), "<xid79>"))
    calls: list[tuple[str, str, str]] = []

    def allowed(ns: str, pod: str, container: str, command: Any) -> bytes:
        calls.append((ns, pod, container))
        return gzip.compress(REPORT.encode())

    collect_bundle(
        snap, telemetry, tmp_path / "a.tar.gz", node="gpu-7", with_bug_report=True, exec_fn=allowed
    )
    assert calls == [("gpu-operator", "nvidia-driver-daemonset-8xk2l", "nvidia-driver-ctr")]
    # The report is free text like any log (issue 28): masked default-deny, packed again.
    report = gzip.decompress(members(tmp_path / "a.tar.gz")["nvidia-bug-report_gpu-7.log.gz"]).decode()
    assert "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus." in report
    assert "Hunter2Secret" not in report and "password=<masked>" in report

    def forbidden(ns: str, pod: str, container: str, command: Any) -> bytes:
        raise SourceError("forbidden", "exec forbidden", verb="create", resource="pods/exec", namespace=ns)

    report = collect_bundle(
        snap, telemetry, tmp_path / "f.tar.gz", node="gpu-7", with_bug_report=True, exec_fn=forbidden
    )
    assert any("pods/exec not allowed: --with-bug-report skipped" in s["why"] for s in report.skipped)
    assert "nvidia-bug-report_gpu-7.log.gz" not in members(tmp_path / "f.tar.gz")


def test_read_bundle_rejects_what_is_not_a_bundle(tmp_path: Path) -> None:
    bogus = tmp_path / "x.tar.gz"
    bogus.write_bytes(b"not a tarball")
    with pytest.raises(ScenarioError, match="not a must-gather bundle"):
        read_bundle(bogus)
    empty = tmp_path / "e.tar.gz"
    with tarfile.open(empty, "w:gz"):
        pass
    with pytest.raises(ScenarioError, match=r"no scenario\.yaml inside"):
        read_bundle(empty)


def test_exec_forbidden_through_the_real_client(tmp_path: Path) -> None:
    snap, telemetry = build_sources(parse_scenario(scenario(), "<xid79>"))
    with serve(snap) as api:
        api.fail(r"/exec$", status=403)
        report = collect_bundle(
            KubeCluster.from_config(api.kubeconfig),
            telemetry,
            tmp_path / "b.tar.gz",
            node="gpu-7",
            with_bug_report=True,
        )
    assert any(
        s["why"].startswith("pods/exec not allowed: --with-bug-report skipped") for s in report.skipped
    )
    assert (tmp_path / "b.tar.gz").exists()


def test_the_walk_summary_is_masked_too(tmp_path: Path) -> None:
    # The walk quotes raw log lines as evidence: summary.md must be masked like the logs.
    data = scenario()
    data["logs"]["ml/trainer-0/trainer"] = (
        "RuntimeError: CUDA error: no CUDA-capable device is detected; password=hunter2LEAKED\n"
    )
    snap, telemetry = build_sources(parse_scenario(data, "<leak>"))
    from layers.walk import walk

    result = walk(snap, telemetry, *TARGET, all_layers=True)
    assert any("hunter2LEAKED" in e for r in result.layers for f in r.findings for e in f.evidence)
    out = tmp_path / "b.tar.gz"
    collect_bundle(snap, telemetry, out, target=TARGET, walk=result)
    for name, body in members(out).items():
        assert b"hunter2LEAKED" not in body, f"leaked in {name}"
