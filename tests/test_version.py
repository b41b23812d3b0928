"""One version (issue 31): pyproject.toml's, read by the code from the installed package's metadata
(bot/ops/version.py) — `gpubot --version`, an agent's heartbeat and `/gpu clusters` show it — and the
chart and the image say the same; no module of bot/, handlers/ or layers/ spells it."""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

from bot.cli.main import main
from bot.ops.version import gpubot_version

ROOT = Path(__file__).resolve().parents[1]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_the_release_is_0_3_0_and_the_code_reads_the_metadata() -> None:
    assert VERSION == "0.3.0"
    assert importlib.metadata.version("gpubot") == VERSION == gpubot_version()


def test_cli_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"gpubot {VERSION}\n"


def test_chart_and_image_say_the_same() -> None:
    chart = yaml.safe_load((ROOT / "deploy" / "helm" / "gpubot" / "Chart.yaml").read_text(encoding="utf-8"))
    assert chart["appVersion"] == VERSION
    assert f"ARG VERSION={VERSION}\n" in (ROOT / "Dockerfile").read_text(encoding="utf-8")


def test_no_module_spells_a_version() -> None:
    spelled = re.compile(r"""["']0\.[0-9]+\.[0-9]+["']""")
    found = [
        f"{p.relative_to(ROOT)}:{n}"
        for pkg in ("bot", "handlers", "layers")
        for p in sorted((ROOT / pkg).rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if spelled.search(line) and "gpubot" in line.lower()
    ]
    assert found == []


def test_clusters_and_the_heartbeat_show_it(tmp_path: Path) -> None:
    """A real agent's heartbeat in a real Redis, and `/gpu clusters` through the gateway's Bolt app."""
    from bot.cluster.streams import CLUSTERS
    from tests.cluster_harness import cluster_scenario, inprocess_agent, inprocess_gateway
    from tests.fakes.slack_api import serve_slack
    from tests.services import RedisServer
    from tests.slack_harness import dispatch, slash_body, wait_for

    with serve_slack() as slack, RedisServer() as redis_at:
        gateway = inprocess_gateway(slack.url, redis_at)
        try:
            with inprocess_agent(slack.url, redis_at, "eu-1", scenario=cluster_scenario(tmp_path, "eu-1")):
                wait_for("registered", lambda: len(gateway.streams.clusters()) == 1)
                beat = json.loads(redis_at.client().hget(CLUSTERS, "eu-1"))
                assert beat["version"] == VERSION
                response = dispatch(gateway, slash_body("clusters", "U0ASKER", "C0GW"))
                assert f"• `eu-1` · gpubot {VERSION} · last seen" in json.loads(response.body)["text"]
        finally:
            gateway.shutdown(wait=False)
