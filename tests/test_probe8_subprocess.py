"""Probe 8, black-box: `gpubot serve` with each bad setting stops with one line naming it, exit 2,
and never prints a token; a handful of bad inputs through the installed `gpubot` as a subprocess.

Every setting is checked by `gpubot serve` before it connects anywhere, so the in-process cases
return at once; the subprocess cases show the same through the real entry point (no traceback
from the interpreter, nothing written).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli.main import main
from tests.fakes.kube_api import write_kubeconfig

BOT_TOKEN = "xoxb-1111-2222-probe8botsecret"
APP_TOKEN = "xapp-1-A111-probe8appsecret"
SIGNING = "probe8signingsecret0123456789"
SECRETS = (BOT_TOKEN, APP_TOKEN, SIGNING, "probe8botsecret", "probe8appsecret", "hunter2")

BAD_SETTINGS = [
    ("GPUBOT_DIGEST_TIME", "25:00"),
    ("GPUBOT_DIGEST_TIME", "9am"),
    ("GPUBOT_TIMEZONE", "Mars/Olympus"),
    ("GPUBOT_CORDON_MAX_FRACTION", "abc"),
    ("GPUBOT_CORDON_MAX_FRACTION", "-0.5"),
    ("GPUBOT_CORDON_MAX_FRACTION", "nan"),
    ("GPUBOT_CORDON_MAX_FRACTION", "inf"),
    ("GPUBOT_WORKERS", "0"),
    ("GPUBOT_WORKERS", "ten"),
    ("GPUBOT_WORKERS", "1e3"),
    ("GPUBOT_HTTP_TIMEOUT_S", "-1"),
    ("GPUBOT_HTTP_MAX_CONNECTIONS", "2"),
    ("GPUBOT_SLACK_HISTORY", "yes"),
    ("GPUBOT_SLACK_CHANNEL_PACE_SECONDS", "-1"),
    ("GPUBOT_SLACK_CHANNEL_PACE_SECONDS", "nan"),
    ("GPUBOT_ALERT_REWALK_MINUTES", "1.5"),
    ("GPUBOT_ALERT_MAX_THREADS_PER_HOUR", "-3"),
    ("GPUBOT_HEARTBEAT_SECONDS", "nan"),
    ("GPUBOT_STATE_RETENTION_DAYS", "0"),
    ("GPUBOT_STREAM_MAXLEN", "5"),
    ("GPUBOT_LOG_LEVEL", "verbose"),
    ("GPUBOT_OPERATORS", "bob"),
    ("GPUBOT_OPERATOR_GROUPS", "U123ABC"),
    ("GPUBOT_DIGEST_CHANNEL", "#bad channel"),
    ("GPUBOT_ALERT_CHANNEL", "#bad channel"),
    ("GPUBOT_OPERATOR_NAMESPACE", "GPU_Operator"),
    ("GPUBOT_ALERT_TOKEN", "short"),
    ("REDIS_URL", "redis://[::1"),
    ("REDIS_URL", "redis://:hunter2@cache:99999"),
    ("REDIS_URL", "http://redis"),
    ("PROMETHEUS_URL", "prometheus:9090"),
    ("PROMETHEUS_URL", "http://prometheus:70000"),
    ("SLACK_API_URL", "ftp://slack.example"),
    ("SLACK_BOT_TOKEN", "xoxp-a-user-token-probe8botsecret"),
    ("SLACK_APP_TOKEN", "xoxb-not-an-app-token-probe8appsecret"),
    ("SLACK_APP_TOKEN", ""),  # empty is unset: Socket Mode needs it
    ("GPUBOT_SCENARIO", "/nonexistent/scenario.yaml"),
    ("GPUBOT_SCENARIO", "no-such-bundled-scenario"),
    ("KUBECONFIG", "/nonexistent/kubeconfig"),
]


@pytest.fixture
def own_logging() -> Iterator[None]:
    """serve installs its log handler (on the captured stderr) once the settings pass: undo it."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS)
@pytest.mark.usefixtures("own_logging")
def test_serve_with_a_bad_setting_is_one_line_naming_it(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in list(os.environ):
        if var.startswith(("GPUBOT_", "SLACK_", "PROMETHEUS_", "REDIS_")) or var == "KUBECONFIG":
            monkeypatch.delenv(var)
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING)
    monkeypatch.setenv("GPUBOT_SCENARIO", "xid79-fell-off-bus")  # a cluster that needs no kubeconfig
    if name == "KUBECONFIG":  # a scenario would stand in for the cluster
        monkeypatch.delenv("GPUBOT_SCENARIO")
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv(name, value)
    code = main(["serve", "--port", "1"])  # port 1 is never bound: every case stops before
    out, err = capsys.readouterr()
    assert code == 2 and not out
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert (
        name in lines[0]
        or (name == "GPUBOT_SCENARIO" and "scenario" in lines[0])
        or (name == "KUBECONFIG" and "kubeconfig" in lines[0])
    ), lines[0]
    assert not any(secret in err for secret in SECRETS), err


def _gpubot() -> list[str]:
    exe = shutil.which("gpubot", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "bot.cli"]


def _sub(
    *argv: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUBOT_", "SLACK_", "PROMETHEUS_", "REDIS_"))
    }
    return subprocess.run(
        [*_gpubot(), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, **(env or {})},
        cwd=cwd,
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_bad_input_through_the_real_entry_point(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        refused = write_kubeconfig(tmp_path / "kc.yaml", f"http://127.0.0.1:{s.getsockname()[1]}")
    cases = [
        (("why", "ML/Trainer-0", "--scenario", "xid79-fell-off-bus"), 2, "invalid namespace 'ML'"),
        (
            ("why", "ml/trainer-0", "--scenario", "xid79-fell-off-bus", "--prometheus-url", "http://[::1"),
            2,
            "--prometheus-url has a malformed host or port",
        ),
        (("digest", "--bundle", str(refused)), 2, "not a must-gather bundle"),
        (
            ("must-gather", "--kubeconfig", refused, "--out", str(tmp_path / "out" / "mg.tar.gz")),
            2,
            "no folder",
        ),
        (
            ("must-gather", "--kubeconfig", refused, "--out", str(tmp_path / "mg.tar.gz")),
            3,
            "Connection refused",
        ),
        (("cordon", "gpu-node-1", "--reason", "x", "--kubeconfig", refused), 3, "Connection refused"),
    ]
    for argv, code, said in cases:
        proc = _sub(*argv, cwd=tmp_path)
        assert proc.returncode == code, (argv, proc.stderr)
        assert proc.stdout == "", (argv, proc.stdout)
        assert said in _one_line(proc), (argv, proc.stderr)
    # Nothing half-written: no bundle, no .partial, no folder created.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kc.yaml"]


def test_serve_with_a_bad_setting_prints_no_token_as_a_subprocess(tmp_path: Path) -> None:
    proc = _sub(
        "serve",
        "--port",
        "1",
        env={
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_APP_TOKEN": APP_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING,
            "REDIS_URL": "redis://:hunter2@cache:99999",
            "GPUBOT_SCENARIO": "xid79-fell-off-bus",
        },
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "REDIS_URL" in _one_line(proc)
    assert not any(secret in proc.stderr + proc.stdout for secret in SECRETS)


def test_a_scenario_from_a_pipe_works_and_an_endless_device_is_refused(tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[1] / "bot" / "scenarios" / "xid79-fell-off-bus.yaml"
    with scenario.open("rb") as stdin:
        proc = subprocess.run(
            [*_gpubot(), "why", "ml/trainer-0", "--scenario", "/dev/stdin", "--format", "json"],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 0 and '"verdict"' in proc.stdout, proc.stderr
    # /dev/zero used to be read without end (memory filling, no answer); now one line at once.
    proc = _sub("why", "ml/trainer-0", "--scenario", "/dev/zero", cwd=tmp_path)
    assert proc.returncode == 2
    assert "/dev/zero: cannot read the file: NUL bytes, not a text file" in _one_line(proc)
