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
    assert "SUCCESS: 10 rules found" in out.stdout


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
    from bot.ops import metrics

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
            assert f"# TYPE {base}" in exposed, (
                f"{alert} uses {name}, which bot/ops/metrics.py does not expose"
            )


def test_the_receiver_example_is_a_valid_alertmanager_config_with_a_bearer_webhook() -> None:
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool is not installed (Debian's prometheus-alertmanager)")
    path = DEPLOY / "alertmanager-receiver.yaml"
    out = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = yaml.safe_load(path.read_text())
    [hook] = next(r for r in doc["receivers"] if r["name"] == "gpubot")["webhook_configs"]
    assert hook["url"].endswith("/alertmanager") and hook["send_resolved"] is True
    assert hook["http_config"]["authorization"]["type"] == "Bearer"
    # max_alerts is set, and that many alerts of up to 3 kB each fit gpubot's alert body limit: a
    # notification over it would be refused whole, and Alertmanager does not retry a 413.
    from bot.slack.alert_webhook import MAX_BODY_MIB

    assert hook["max_alerts"] > 0 and hook["max_alerts"] * 3000 < MAX_BODY_MIB << 20
    # Every route grouping keeps the labels gpubot maps subjects from (handlers/alert_subjects.py).
    from handlers.alert_subjects import NODE_LABELS

    gpubot = next(r for r in doc["route"]["routes"] if r["receiver"] == "gpubot")
    assert {"Hostname", "hostname", "node"} <= set(gpubot["group_by"]) and set(NODE_LABELS) - {
        "kubernetes_node"
    } <= set(gpubot["group_by"])


def test_gpu_rules_keep_the_labels_that_name_a_subject() -> None:
    from handlers.alert_subjects import NODE_LABELS

    groups = {g["name"]: g["rules"] for g in yaml.safe_load((DEPLOY / "alerts.yaml").read_text())["groups"]}
    for rule in groups["gpu-nodes"]:
        by = set(re.findall(r"by \(([^)]*)\)", rule["expr"])[0].replace(" ", "").split(","))
        assert by & set(NODE_LABELS) or {"namespace", "pod"} <= by, rule["alert"]


def test_health_agent_rules_cover_every_agent_condition() -> None:
    """The alert's condition regex and layers/facts/healthagents.py's table name the same conditions."""
    from layers.facts.healthagents import AGENTS

    rules = {
        r["alert"]: r["expr"]
        for g in yaml.safe_load((DEPLOY / "alerts.yaml").read_text())["groups"]
        for r in g["rules"]
    }
    [regex] = re.findall(r'condition=~"([^"]+)"', rules["GPUHealthAgentCondition"])
    for agent in AGENTS:
        for ctype in agent.types:
            if agent.fault_status == "True":
                assert re.fullmatch(regex, ctype), (agent.name, ctype)
            else:
                assert ctype in rules["GPUAcceleratedHardwareNotReady"], (agent.name, ctype)
    assert not re.fullmatch(regex, "Ready") and not re.fullmatch(regex, "MemoryPressure")
