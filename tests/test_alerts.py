"""deploy/alerts.yaml: valid for promtool, unit-tested by promtool, and about real series."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def _promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.skip("promtool is not installed (scripts/test.sh installs Debian's prometheus)")
    return found


def test_promtool_check_rules() -> None:
    out = subprocess.run(
        [_promtool(), "check", "rules", str(DEPLOY / "alerts.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 7 rules found" in out.stdout


def test_promtool_unit_tests() -> None:
    out = subprocess.run(
        [_promtool(), "test", "rules", "alerts_test.yaml"],
        cwd=DEPLOY,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_rules_use_the_exporters_and_gpubots_series() -> None:
    from bot import metrics

    rules = {
        r["alert"]: r["expr"]
        for g in yaml.safe_load((DEPLOY / "alerts.yaml").read_text())["groups"]
        for r in g["rules"]
    }
    assert 'kube_node_status_allocatable{resource="nvidia_com_gpu"}' in rules["GPUAllocatableBelowCapacity"]
    assert "DCGM_FI_DEV_ROW_REMAP_FAILURE" in rules["GPURowRemapFailure"]
    exposed = metrics.render().decode()
    for alert in ("GpubotWalksFailing", "GpubotSlackAPIErrors", "GpubotDigestMissing"):
        names = set(re.findall(r"\bgpubot_\w+", rules[alert]))
        assert names, alert
        for name in names:
            base = name.removesuffix("_total")
            assert f"# TYPE {base}" in exposed, f"{alert} uses {name}, which bot/metrics.py does not expose"
