"""Start-up cost is guarded by what gets imported, not by timing (benchmarks/cli_bench.py times it).

`python -X importtime` lists every module a process imported. Help must not pull in
Slack, matplotlib or the kubernetes client at all; a real `why` over a kubeconfig may
load the client's configuration and transport but never its generated API classes or
models (pydantic classes, ~1 s to build).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import build_sources, load_scenario
from tests.fakes.kube_api import serve
from tests.services import free_port

ROOT = Path(__file__).resolve().parents[1]
NEVER_FOR_HELP = (
    "slack_bolt",
    "slack_sdk",
    "matplotlib",
    "kubernetes",
    "prometheus_api_client",
    "urllib3",
    "redis",
)
NEVER_FOR_WHY = ("slack_bolt", "matplotlib", "kubernetes.client.models.", "kubernetes.client.api.", "cel")
# With a plain kubeconfig (a token) and a Prometheus: not the client's package roots, its kubeconfig
# loader, the ApiClient and pydantic (bot/sources/kubeclient.py, kubeconfig.py).
NEVER_FOR_PLAIN_WHY = (
    *NEVER_FOR_WHY,
    "kubernetes.dynamic",
    "kubernetes.config.kube_config",
    "kubernetes.client.api_client",
    "pydantic",
    "oauthlib",
    "bot.sources.scenario",
    "prometheus_client",
)


def imported(*args: str) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    """The modules `python -X importtime -m bot.cli ARGS` imported, and the process."""
    env = {**os.environ, "NO_COLOR": "1"}
    env.pop("PROMETHEUS_URL", None)
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "bot.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "bot.cli.serve" in modules, proc.stderr[-2000:]  # the CLI really built its parser
    return modules, proc


def loaded(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    """Modules named by a prefix: "a" is a and a.*, "a." only what lies below a."""
    return sorted(
        m
        for m in modules
        if any(m.startswith(p) if p.endswith(".") else m == p or m.startswith(p + ".") for p in prefixes)
    )


@pytest.mark.parametrize("args", [("--help",), ("why", "--help")])
def test_help_loads_no_backend(args: tuple[str, ...]) -> None:
    modules, proc = imported(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert loaded(modules, NEVER_FOR_HELP) == []


def test_why_over_a_kubeconfig_loads_no_models_nor_slack() -> None:
    path = next(p for p in bundled_scenarios() if p.stem == "gfd-crashloop-driver-rpc-timeout-xid79")
    sc = load_scenario(path)
    target = str((sc.extra.get("x-expect") or {})["target"])
    snapshot, _ = build_sources(sc)
    with serve(snapshot) as api:
        prometheus = f"http://127.0.0.1:{free_port()}"  # refused: the walk says unknown, and exits 0
        modules, proc = imported(
            "why",
            target,
            "--all",
            "--kubeconfig",
            api.kubeconfig,
            "--prometheus-url",
            prometheus,
            "--format",
            "json",
        )
        assert api.count() > 0  # it really read the fake API server
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kubernetes.client.rest" in modules  # the official client does the transport
    assert "bot.sources.prom" in modules
    assert loaded(modules, NEVER_FOR_PLAIN_WHY) == []
