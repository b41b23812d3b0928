"""Bad input and broken backends a user meets: one line on stderr, the right exit code."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.main import main
from tests.fakes.kube_api import write_kubeconfig


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def web_server() -> Iterator[str]:
    """A plain web server: answers 404 pages, not Kubernetes Status objects."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_web_server_is_not_taken_for_a_missing_pod(
    web_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "kc.yaml", web_server)
    code, _, err = _run(capsys, "why", "ml/trainer-0", "--kubeconfig", kubeconfig)
    line = _one_line(err)
    assert code == 3
    assert "not a Kubernetes API server" in line and web_server in line


def test_kubeconfig_with_a_yaml_syntax_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "kc.yaml"
    bad.write_text("apiVersion: v1\nclusters:\n- name: x\n  cluster: [server: a\n")
    code, _, err = _run(capsys, "why", "ml/trainer-0", "--kubeconfig", str(bad))
    assert code == 2
    assert "kubeconfig" in _one_line(err) and str(bad) in err


@pytest.mark.parametrize("url", ["ftp://prom:9090", "http://", "prometheus:9090"])
def test_prometheus_url_flag_is_checked_like_the_variable(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys, "why", "ml/trainer-0", "--scenario", "xid79-fell-off-bus", "--prometheus-url", url
    )
    assert code == 2
    assert "--prometheus-url" in _one_line(err)


def test_missing_ca_bundle_file_stops_with_its_name(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PROMETHEUS_CA_BUNDLE", "/nonexistent/ca.pem")
    code, _, err = _run(
        capsys,
        "why",
        "ml/trainer-0",
        "--scenario",
        "xid79-fell-off-bus",
        "--prometheus-url",
        "https://127.0.0.1:1",
    )
    assert code == 2
    assert "PROMETHEUS_CA_BUNDLE" in _one_line(err)


def test_must_gather_into_a_missing_folder(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys,
        "must-gather",
        "--scenario",
        "xid79-fell-off-bus",
        "--node",
        "gpu-node-1",
        "--out",
        "/nonexistent/dir/bundle.tar.gz",
    )
    assert code == 2
    assert "/nonexistent/dir" in _one_line(err)


def test_scenario_and_bundle_together_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(
        capsys, "why", "ml/trainer-0", "--scenario", "xid79-fell-off-bus", "--bundle", "/tmp/x.tar.gz"
    )
    assert code == 2
    assert "--scenario" in _one_line(err) and "--bundle" in err


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ml}, spec: 5}", "objects[0].spec"),
        (
            "- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ml}, spec: {containers: 5}}",
            "objects[0].spec.containers",
        ),
        (
            "- {apiVersion: v1, kind: Node, metadata: {name: n}, status: {capacity: [1]}}\n"
            "- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ml}}",
            "objects[0].status.capacity",
        ),
        (
            "- {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: ml},"
            " status: {containerStatuses: [{name: c, lastState: 7}]}}",
            "objects[0].status.containerStatuses[0].lastState",
        ),
    ],
)
def test_misshapen_objects_are_scenario_errors(
    body: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Scenario\nobjects:\n" + body + "\n")
    code, _, err = _run(capsys, "why", "ml/p", "--scenario", str(path), "--all")
    line = _one_line(err)
    assert code == 2, line
    assert str(path) in line and key in line


def test_a_pod_in_another_namespace_is_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "why", "trainer-0", "--scenario", "xid79-fell-off-bus")
    assert code == 2
    assert "did you mean ml/trainer-0?" in _one_line(err)


def test_cordon_on_a_scenario_says_it_is_simulated(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUBOT_CORDON_MAX_FRACTION", "0.5")
    code, out, _ = _run(
        capsys, "cordon", "gpu-node-1", "--reason", "Xid 79", "--scenario", "xid79-fell-off-bus"
    )
    assert code == 0
    assert "simulated" in out and "gpu-node-1" in out


def test_version_and_scenarios_listing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("gpubot ")
    code, out, _ = _run(capsys, "scenarios")
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("xid79-fell-off-bus "))
    assert line.split() == ["xid79-fell-off-bus", "ml/trainer-0", "L5_XID"]
