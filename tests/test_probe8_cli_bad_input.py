"""Probe 8, black-box: bad input at every `gpubot` entry point is one clear line on stderr, the
documented exit code (2 bad input or not found, 3 a backend), nothing half-written, no secret.

Each case is run through the CLI's real main() in-process (argparse, the sources, the walk);
tests/test_probe8_subprocess.py runs a handful as real subprocesses.
"""

from __future__ import annotations

import gzip
import http.server
import io
import socket
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.main import main
from bot.ops.config import ConfigError, load_config
from bot.sources.scenario import build_sources, load_scenario
from bot.sources.snapshot import SnapshotCluster
from tests.fakes.kube_api import FakeKubeAPI, serve

SCENARIO = "xid79-fell-off-bus"
SCENARIO_FILE = Path(__file__).resolve().parents[1] / "bot" / "scenarios" / f"{SCENARIO}.yaml"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own usage errors
        code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("gpubot: "), lines[0]
    return lines[0]


# --- names ---------------------------------------------------------------------------------

BAD_POD_REFS = [
    ("ML/trainer-0", "invalid namespace 'ML'"),
    ("ml/Trainer-0", "invalid pod name 'Trainer-0'"),
    ("a" * 254, "invalid pod name"),
    ("ns/", "invalid pod name ''"),
    ("/pod", "invalid namespace ''"),
    ("a/b/c", "invalid pod reference 'a/b/c'"),
    ("trainér-0", "invalid pod name"),
    ("ml/x;rm -rf ~", "invalid pod name"),
    ("$(id)", "invalid pod name '$(id)'"),
    ("", "no pod named"),
    ("   ", "no pod named"),
]


@pytest.mark.parametrize(("ref", "said"), BAD_POD_REFS)
def test_why_refuses_a_malformed_pod_reference(
    ref: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "why", ref, "--scenario", SCENARIO)
    assert code == 2 and not out
    assert said in _one_line(err)


BAD_NODES = ["GPU-7", "a" * 254, "gpu;reboot", "gpu node", "", "-"]


@pytest.mark.parametrize("node", BAD_NODES)
def test_node_commands_refuse_a_malformed_node_name(
    node: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "mg.tar.gz"
    for argv in (
        ("cordon", node, "--reason", "probe", "--scenario", SCENARIO),
        ("uncordon", node, "--scenario", SCENARIO),
        # An empty --node '' (an unset shell variable) used to collect the whole fleet.
        ("must-gather", f"--node={node}", "--scenario", SCENARIO, "--out", str(out_file)),
    ):
        code, _, err = _run(capsys, *argv)
        assert code == 2, (argv, err)
        line = _one_line(err)
        assert "node name" in line or "expected one argument" in line, line
    assert list(tmp_path.iterdir()) == []


def test_missing_pod_namespace_and_node_are_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "why", "no-such-pod", "--scenario", SCENARIO)
    assert code == 2 and 'pods "no-such-pod" not found in namespace default' in _one_line(err)
    code, _, err = _run(capsys, "why", "trainer-0", "-n", "no-such-ns", "--scenario", SCENARIO)
    assert code == 2 and "did you mean ml/trainer-0?" in _one_line(err)
    out_file = tmp_path / "mg.tar.gz"
    for argv in (
        ("cordon", "no-such-node", "--reason", "probe"),
        ("uncordon", "no-such-node"),
        ("must-gather", "--node", "no-such-node", "--out", str(out_file)),
    ):
        code, _, err = _run(capsys, *argv, "--scenario", SCENARIO)
        assert code == 2 and '"no-such-node" not found' in _one_line(err), (argv, err)
    assert not out_file.exists()


# --- scenario files and bundles -------------------------------------------------------------


def _bad_scenarios(root: Path) -> list[tuple[Path, str]]:
    cases = {
        "empty.yaml": ("", "expected a mapping with `kind: Scenario`"),
        "nul.yaml": ("\x00\x01: : [", "YAML error"),
        "list.yaml": ("- a\n- b\n", "expected a mapping"),
        "scalar.yaml": ("hello\n", "expected a mapping"),
        "truncated.json": ('{"kind": "Scenario", "objects": [{"apiVersion": "v1"', "JSON syntax error"),
        "no-kind.yaml": ("objects: []\n", "expected `kind: Scenario`"),
        "bad-point.yaml": (
            SCENARIO_FILE.read_text().replace(
                "metrics:\n",
                "metrics:\n  - {metric: {__name__: DCGM_FI_DEV_XID_ERRORS, Hostname: gpu-node-1}, "
                "values: [[notatime, 79]]}\n",
                1,
            ),
            "metrics[0].values[0][0]: expected seconds relative to now",
        ),
    }
    out = []
    for name, (text, said) in cases.items():
        path = root / name
        path.write_text(text)
        out.append((path, said))
    binary = root / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    out.append((binary, "not UTF-8 text"))
    out.append((root, "Is a directory"))
    out.append((root / "missing.yaml", "No such file or directory"))
    return out


def test_unusable_scenario_files_are_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, said in _bad_scenarios(tmp_path):
        for argv in (("why", "ml/trainer-0"), ("digest",)):
            code, out, err = _run(capsys, *argv, "--scenario", str(path))
            line = _one_line(err)
            assert code == 2 and not out, (path, line)
            assert str(path) in line and said in line, (path, line)


def _tar(path: Path, members: dict[str, bytes], symlink: str | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if symlink:
            info = tarfile.TarInfo("scenario.yaml")
            info.type, info.linkname = tarfile.SYMTYPE, symlink
            tar.addfile(info)
    return path


def test_unusable_bundles_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.tar.gz"
    code, _, err = _run(capsys, "must-gather", "--scenario", SCENARIO, "--out", str(good))
    assert code == 0, err
    not_gzip = tmp_path / "not-gzip.tar.gz"
    not_gzip.write_text("hello")
    gzip_not_tar = tmp_path / "gzip-not-tar.tar.gz"
    gzip_not_tar.write_bytes(gzip.compress(b"hello" * 100))
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    scenario = SCENARIO_FILE.read_bytes()
    traversal = _tar(tmp_path / "traversal.tar.gz", {"../../evil/scenario.yaml": scenario})
    symlink = _tar(tmp_path / "symlink.tar.gz", {}, symlink="/etc/passwd")
    cases = [
        (not_gzip, "not a gzip file"),
        (gzip_not_tar, "not a must-gather bundle"),
        (truncated, "not a must-gather bundle"),
        (tmp_path / "missing.tar.gz", "no such file"),
        (tmp_path, "not a must-gather bundle (a .tar.gz): Is a directory"),
        (traversal, "no scenario.yaml inside"),  # read by its exact name, never extracted
        (symlink, "not a regular file"),
    ]
    for path, said in cases:
        for argv in (("why", "ml/trainer-0"), ("digest",)):
            code, out, err = _run(capsys, *argv, "--bundle", str(path))
            line = _one_line(err)
            assert code == 2 and not out, (path, line)
            assert said in line, (path, line)
    assert not (tmp_path.parent / "evil").exists()


# --- kubeconfig and the Kubernetes API -------------------------------------------------------


@pytest.fixture(scope="module")
def kube_snapshot() -> SnapshotCluster:
    cluster, _ = build_sources(load_scenario(SCENARIO_FILE))
    return cluster


@pytest.fixture
def api(kube_snapshot: SnapshotCluster) -> Iterator[FakeKubeAPI]:
    with serve(kube_snapshot) as fake:
        yield fake


def test_unusable_kubeconfigs(tmp_path: Path, api: FakeKubeAPI, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage"
    garbage.write_text("just some words\n")
    empty = tmp_path / "empty"
    empty.write_text("")
    cases = [
        (("--kubeconfig", str(tmp_path / "missing")), "no readable kubeconfig"),
        (("--kubeconfig", str(garbage)), "is not usable"),
        (("--kubeconfig", str(empty)), "is not usable"),
        (("--kubeconfig", str(tmp_path)), "no readable kubeconfig"),
        (("--kubeconfig", api.kubeconfig, "--context", "prod"), "context 'prod' not found"),
    ]
    for flags, said in cases:
        for argv in (("why", "ml/trainer-0"), ("digest",), ("cordon", "gpu-node-1", "--reason", "x")):
            code, _, err = _run(capsys, *argv, *flags)
            assert code == 2 and said in _one_line(err), (argv, flags, err)
    assert api.count(method="PATCH") == 0


@pytest.mark.parametrize(
    ("path", "permission"),
    [
        (r"^/api/v1/pods$", "'list' on 'pods' cluster-wide"),
        (r"^/api/v1/nodes$", "'list' on 'nodes' cluster-wide"),
        (r"/events$", "'list' on 'events' in namespace ml"),
        (r"/log$", "'get' on 'pods/log' in namespace"),
        (r"resourceslices", "'list' on 'resourceslices.resource.k8s.io' cluster-wide"),
    ],
)
def test_rbac_403_on_each_kind_names_the_permission(
    path: str, permission: str, api: FakeKubeAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    api.fail(path, status=403)
    code, out, err = _run(capsys, "why", "ml/trainer-0", "--all", "--kubeconfig", api.kubeconfig)
    assert code == 0 and not err, err  # the walk ran; the refused read is a finding, not a crash
    assert f"grant the bot's ServiceAccount {permission}" in out


def test_rbac_403_on_the_pod_itself_and_on_a_cordon_patch(
    api: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    api.fail(r"/namespaces/ml/pods/trainer-0$", status=403)
    code, out, err = _run(capsys, "why", "ml/trainer-0", "--kubeconfig", api.kubeconfig)
    assert code == 3 and not out
    assert "grant the bot's ServiceAccount 'get' on 'pods' in namespace ml" in _one_line(err)
    api.clear_faults()
    monkeypatch.setenv("GPUBOT_CORDON_MAX_FRACTION", "1")
    api.fail(r"/nodes/", status=403, method="PATCH")
    code, _, err = _run(capsys, "cordon", "gpu-node-1", "--reason", "probe", "--kubeconfig", api.kubeconfig)
    assert code == 3 and "'patch' on 'nodes' cluster-wide" in _one_line(err)
    assert not api.snapshot.get_node("gpu-node-1")["spec"].get("unschedulable")


def test_a_refusing_api_server_is_exit_3_and_writes_no_bundle(
    tmp_path: Path, api: FakeKubeAPI, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = api.kubeconfig
    api.stop()  # the port now refuses connections
    out_file = tmp_path / "mg.tar.gz"
    for argv in (
        ("why", "ml/trainer-0"),
        ("digest",),
        ("must-gather", "--out", str(out_file)),
        ("cordon", "gpu-node-1", "--reason", "x"),
        ("uncordon", "gpu-node-1"),
    ):
        code, _, err = _run(capsys, *argv, "--kubeconfig", kubeconfig)
        assert code == 3 and "Connection refused" in _one_line(err), (argv, err)
    assert list(tmp_path.iterdir()) == []


# --- Prometheus ---------------------------------------------------------------------------------

TOKEN = "prom-probe8-secret-7f3a9c"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://[::1", "malformed host or port"),  # was an internal error, exit 1
        ("http://prometheus:99999", "malformed host or port"),  # was an internal error, exit 1
        ("http://prometheus:0", "port 0"),
        ("http://", "names no host"),
        ("", "must be a URL"),  # an empty flag was silently "no metrics"
        ("prometheus:9090", "must be a URL"),
    ],
)
def test_malformed_prometheus_url_is_exit_2(url: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "why", "ml/trainer-0", "--scenario", SCENARIO, "--prometheus-url", url)
    assert code == 2 and not out
    line = _one_line(err)
    assert "--prometheus-url" in line and said in line


class _Answer(http.server.BaseHTTPRequestHandler):
    """A Prometheus stand-in that answers every query with `status` and `body`."""

    status, body, content_type = 200, b"", "application/json"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(self.status)
        self.send_header("Content-Type", self.content_type)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_POST = do_GET


@pytest.fixture(scope="module")
def prom() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize(
    ("status", "body", "content_type", "said"),
    [
        (200, b"<html><body>Sign in</body></html>", "text/html", "not JSON"),
        (500, f"proxy error: Authorization: Bearer {TOKEN} rejected".encode(), "text/plain", "HTTP 500"),
        (
            502,
            f'{{"status":"error","error":"upstream said token={TOKEN}"}}'.encode(),
            "application/json",
            "502",
        ),
        (
            200,
            f'{{"status":"success","data":{{"resultType":"vector","result":"{TOKEN}"}}}}'.encode(),
            "application/json",
            "unexpected result shape",
        ),
    ],
)
def test_a_broken_prometheus_is_unknown_and_its_answer_never_echoes_the_token(
    status: int,
    body: bytes,
    content_type: str,
    said: str,
    prom: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(_Answer, "status", status)
    monkeypatch.setattr(_Answer, "body", body)
    monkeypatch.setattr(_Answer, "content_type", content_type)
    monkeypatch.setenv("PROMETHEUS_TOKEN", TOKEN)
    for fmt in ("text", "json"):
        code, out, err = _run(
            capsys,
            "why",
            "ml/trainer-0",
            "--all",
            "--format",
            fmt,
            "--scenario",
            SCENARIO,
            "--prometheus-url",
            prom,
        )
        assert code == 0 and not err, err
        assert said in out and ("UNKNOWN" in out or '"unknown"' in out)
        assert TOKEN not in out  # the 500 page that echoed the bearer token used to reach the output
    code, out, err = _run(capsys, "digest", "--scenario", SCENARIO, "--prometheus-url", prom)
    assert code == 0 and "UNKNOWN" in out and TOKEN not in out + err


def test_a_refusing_prometheus_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    code, out, err = _run(capsys, "digest", "--scenario", SCENARIO, "--prometheus-url", closed)
    assert code == 0 and not err
    assert "cannot connect (Connection refused)" in out


# --- settings ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("REDIS_URL", "redis://[::1"),  # was a ValueError out of urllib
        ("REDIS_URL", "redis://cache:99999"),
        ("REDIS_URL", "redis://:hunter2-secret@cache:0"),
        ("REDIS_URL", "unix://relative.sock"),
        ("PROMETHEUS_URL", "http://[fe80::1"),
        ("SLACK_API_URL", "https://slack.example:70000/api/"),
        ("SLACK_API_URL", "https://"),
    ],
)
def test_malformed_urls_in_settings_are_config_errors_without_their_value(name: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config({name: value})
    message = str(caught.value)
    assert message.startswith(name) and "\n" not in message
    assert "hunter2" not in message


def test_a_unix_socket_redis_url_is_accepted() -> None:
    # redis-py's form; check_url used to demand a host and refused it.
    assert (
        load_config({"REDIS_URL": "unix:///run/redis/redis.sock"}).redis_url == "unix:///run/redis/redis.sock"
    )


def test_must_gather_into_an_unwritable_folder_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    # /proc refuses new files even to root: was an internal error (FileNotFoundError), exit 1.
    code, out, err = _run(capsys, "must-gather", "--scenario", SCENARIO, "--out", "/proc/probe8.tar.gz")
    assert code == 2 and not out
    assert "cannot write the bundle /proc/probe8.tar.gz" in _one_line(err)
    assert not any(p.name.startswith(".probe8") for p in Path("/proc").iterdir())


@pytest.mark.parametrize("url", ["garbage", "http://redis:6379", "redis://[::1", ""])
def test_a_bad_redis_url_flag_is_bad_input_on_every_command(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was ignored where the command did not need it (a scenario's cordon ran, exit 0).
    for argv in (
        ("cordon", "gpu-node-1", "--reason", "x", "--dry-run"),
        ("why", "ml/trainer-0"),
        ("digest",),
    ):
        code, out, err = _run(capsys, *argv, "--scenario", SCENARIO, "--redis-url", url)
        assert code == 2 and not out, (argv, err)
        assert "--redis-url" in _one_line(err)


DRA_SCENARIO_FILE = SCENARIO_FILE.with_name("dra-deviceclass-missing.yaml")


@pytest.mark.parametrize("plural", ["resourceclaims", "deviceclasses", "resourceslices", "devicetaintrules"])
def test_rbac_403_on_each_dra_kind_names_the_permission(
    plural: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, _ = build_sources(load_scenario(DRA_SCENARIO_FILE))
    with serve(cluster) as dra_api:
        dra_api.fail(plural, status=403)
        code, out, err = _run(
            capsys, "why", "vision/sam2-finetune-0", "--all", "--kubeconfig", dra_api.kubeconfig
        )
    assert code == 0 and not err, err
    assert f"grant the bot's ServiceAccount 'list' on '{plural}.resource.k8s.io'" in out


def test_a_scenario_with_a_kubeconfig_flag_is_refused_and_the_flag_beats_the_variable(
    api: FakeKubeAPI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the --kubeconfig or --context silently ignored, the scenario walked instead.
    for flags in (("--kubeconfig", api.kubeconfig), ("--context", "prod")):
        code, out, err = _run(capsys, "why", "ml/trainer-0", "--scenario", SCENARIO, *flags)
        assert code == 2 and not out
        assert "not both" in _one_line(err)
    monkeypatch.setenv("GPUBOT_SCENARIO", "gpu-operator-not-installed")
    code, out, err = _run(capsys, "why", "ml/trainer-0", "--format", "json", "--kubeconfig", api.kubeconfig)
    assert code == 0, err
    assert api.count(r"/namespaces/ml/pods/trainer-0$") == 1  # the cluster the flag named was read
