"""`gpubot` from the command line: why / scenarios / demo, the three formats, and bad input.

Exit status (spec/interfaces.md): 0 the walk ran, 2 bad input or target not
found, 3 a backend unreachable, 1 a bug; one line on stderr for 2 and 3, never
a traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slack_sdk.models.blocks import Block

from bot.cli.main import main
from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import Scenario, load_scenario

REPO = Path(__file__).resolve().parent.parent
SEVERITIES = {"ok", "info", "unknown", "warn", "fault"}


@dataclass
class Run:
    code: int
    out: str
    err: str

    def error_line(self) -> str:
        """The one line on stderr of a failed command."""
        lines = self.err.splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("gpubot: ")
        return lines[0]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("GPUBOT_", "PROMETHEUS_", "SLACK_")) or name in ("KUBECONFIG", "REDIS_URL"):
            monkeypatch.delenv(name)


def gpubot(capsys: pytest.CaptureFixture[str], *argv: str) -> Run:
    capsys.readouterr()
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return Run(code, out, err)


def expect(sc: Scenario) -> dict[str, Any]:
    data: dict[str, Any] = sc.extra.get("x-expect") or {}
    return data


def xid_scenario() -> tuple[str, Scenario]:
    """A bundled incident about a bound pod whose device plugin marked a GPU unhealthy."""
    for path in bundled_scenarios():
        sc = load_scenario(path)
        if {"L1_POD_SCHEDULED", "L5_DEVICE_UNHEALTHY"} <= set(expect(sc).get("codes") or []):
            return path.stem, sc
    raise AssertionError("no bundled scenario has a bound pod with L5_DEVICE_UNHEALTHY")


@pytest.fixture(scope="module")
def incident() -> tuple[str, Scenario]:
    return xid_scenario()


# --- why: formats ------------------------------------------------------------------------------


def check_walk_schema(data: dict[str, Any]) -> None:
    """The `why --format json` schema of spec/interfaces.md, key for key."""
    assert set(data) == {"target", "layers", "verdict"}
    assert set(data["target"]) == {"namespace", "pod", "node"}
    for layer in data["layers"]:
        assert set(layer) == {"layer", "name", "status", "next", "findings"}
        assert layer["layer"] in range(1, 6) and isinstance(layer["name"], str) and layer["name"]
        assert layer["status"] in SEVERITIES
        assert layer["next"] is None or layer["next"] in range(1, 6)
        for f in layer["findings"]:
            assert set(f) == {"code", "severity", "node", "summary", "evidence", "commands"}
            assert re.fullmatch(rf"L{layer['layer']}_[A-Z0-9_]+", f["code"])
            assert f["severity"] in SEVERITIES
            assert f["node"] is None or isinstance(f["node"], str)
            assert isinstance(f["summary"], str) and "\n" not in f["summary"]
            assert all(isinstance(x, str) for x in f["evidence"] + f["commands"])
        # A layer's status is its worst finding.
        order = ["ok", "info", "unknown", "warn", "fault"]
        worst = max((order.index(f["severity"]) for f in layer["findings"]), default=0)
        assert layer["status"] == order[worst]
    verdict = data["verdict"]
    assert verdict is None or set(verdict) == {"layer", "code", "summary"}


def test_why_json_follows_the_schema(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]
) -> None:
    stem, sc = incident
    run = gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem, "--format", "json")
    assert run.code == 0 and run.err == ""
    data = json.loads(run.out)
    check_walk_schema(data)
    ns, pod = expect(sc)["target"].split("/")
    assert data["target"]["namespace"] == ns and data["target"]["pod"] == pod
    # The walk follows `next` from layer 1 and reaches the scenario's verdict.
    walked = [la["layer"] for la in data["layers"]]
    assert walked[0] == 1
    for here, there in zip(data["layers"], walked[1:], strict=False):
        assert here["next"] == there
    assert data["layers"][-1]["next"] is None or data["layers"][-1]["next"] in walked
    if "walk" in expect(sc):
        assert walked == expect(sc)["walk"]
    assert data["verdict"]["code"] == expect(sc)["verdict"]


def test_why_text_is_readable_and_plain_when_piped(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]
) -> None:
    stem, sc = incident
    run = gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem)
    assert run.code == 0 and run.err == ""
    assert "\x1b[" not in run.out  # not a terminal: no colour codes
    assert run.out.startswith(f"gpubot why {expect(sc)['target']}")
    assert re.search(r"^Layer 1 · scheduling: ", run.out, re.M)
    verdict = run.out.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: ") and expect(sc)["verdict"] in verdict


def test_why_blocks_are_valid_slack_messages(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]
) -> None:
    stem, sc = incident
    run = gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem, "--format", "blocks")
    assert run.code == 0 and run.err == ""
    messages = json.loads(run.out)
    walked = json.loads(
        gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem, "--format", "json").out
    )
    # A root message plus one per layer that ran.
    assert len(messages) == 1 + len(walked["layers"])
    for msg in messages:
        assert msg["text"] and 0 < len(msg["blocks"]) <= 50
        for block in msg["blocks"]:
            Block.parse(block).validate_json()  # type: ignore[union-attr]
    # The root names the verdict; each layer's message opens with a header and shows its findings.
    assert expect(sc)["verdict"] in json.dumps(messages[0])
    for msg, layer in zip(messages[1:], walked["layers"], strict=True):
        assert msg["blocks"][0]["type"] == "header"
        assert all(f["code"] in json.dumps(msg["blocks"]) for f in layer["findings"])


def test_why_all_runs_five_layers(capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]) -> None:
    stem, sc = incident
    run = gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem, "--all", "--format", "json")
    assert run.code == 0
    data = json.loads(run.out)
    check_walk_schema(data)
    assert [la["layer"] for la in data["layers"]] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("layer", [1, 3, 5])
def test_why_layer_runs_only_that_layer(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario], layer: int
) -> None:
    stem, sc = incident
    run = gpubot(
        capsys, "why", expect(sc)["target"], "--scenario", stem, "--layer", str(layer), "--format", "json"
    )
    assert run.code == 0
    data = json.loads(run.out)
    assert [la["layer"] for la in data["layers"]] == [layer]
    assert all(f["code"].startswith(f"L{layer}_") for f in data["layers"][0]["findings"])


def test_namespace_flag_equals_slash_form(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]
) -> None:
    stem, sc = incident
    ns, pod = expect(sc)["target"].split("/")
    a = gpubot(capsys, "why", f"{ns}/{pod}", "--scenario", stem, "--format", "json")
    b = gpubot(capsys, "why", pod, "-n", ns, "--scenario", stem, "--format", "json")
    assert a.code == b.code == 0 and a.out == b.out


def test_scenario_from_the_environment(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario], monkeypatch: pytest.MonkeyPatch
) -> None:
    stem, sc = incident
    monkeypatch.setenv("GPUBOT_SCENARIO", stem)
    run = gpubot(capsys, "why", expect(sc)["target"], "--format", "json")
    assert run.code == 0 and json.loads(run.out)["verdict"]["code"] == expect(sc)["verdict"]


# --- why: bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ref", "names"),
    [
        ("ml/Trainer_0", "Trainer_0"),
        ("ML/trainer-0", "ML"),
        ("ml/trainer-0/extra", "ml/trainer-0/extra"),
        ("-trainer", "-trainer"),
        ("ml/trainer-0-", "trainer-0-"),
        ("ml/" + "a" * 254, "a" * 20),
        ("<!channel>", "<!channel>"),
        ("   ", "no pod named"),
    ],
)
def test_malformed_pod_names(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario], ref: str, names: str
) -> None:
    stem, _sc = incident
    run = gpubot(capsys, "why", "--scenario", stem, "--", ref)
    assert run.code == 2 and run.out == ""
    assert names in run.error_line()


def test_missing_pod(capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]) -> None:
    stem, sc = incident
    ns = expect(sc)["target"].split("/")[0]
    run = gpubot(capsys, "why", f"{ns}/no-such-pod", "--scenario", stem)
    assert run.code == 2 and run.out == ""
    line = run.error_line()
    assert '"no-such-pod" not found' in line and ns in line


def test_missing_scenario_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "incident.yaml"
    run = gpubot(capsys, "why", "ml/trainer-0", "--scenario", str(path))
    assert run.code == 2
    assert str(path) in run.error_line()


def test_unknown_bundled_scenario_name(capsys: pytest.CaptureFixture[str]) -> None:
    run = gpubot(capsys, "why", "ml/trainer-0", "--scenario", "no-such-incident")
    assert run.code == 2
    assert "no-such-incident" in run.error_line()


BROKEN = {
    "yaml-syntax": ("kind: Scenario\nobjects: [\n  {kind: Node\n", r"line \d+"),
    "unknown-key": ("kind: Scenario\nname: x\nmetrix: []\n", r": metrix: unknown key"),
    "not-a-scenario": ("kind: Pod\n", r": kind: expected `kind: Scenario`"),
    "object-without-name": (
        "kind: Scenario\nobjects:\n  - {apiVersion: v1, kind: Node, metadata: {}}\n",
        r": objects\[0\]\.metadata\.name: ",
    ),
    "bad-sample": (
        "kind: Scenario\nmetrics:\n  - metric: {__name__: DCGM_FI_DEV_FB_USED, Hostname: gpu-7}\n"
        "    values: [[-60, 1], [0, lots]]\n",
        r": metrics\[0\]\.values\[1\]\[1\]: expected a number",
    ),
    "bad-log-key": ("kind: Scenario\nlogs:\n  trainer-0: hello\n", r": logs\['trainer-0'\]: "),
    "bad-now": ("kind: Scenario\nnow: yesterday\n", r": now: expected"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_scenario_names_file_and_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    text, key = BROKEN[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    run = gpubot(capsys, "why", "ml/trainer-0", "--scenario", str(path))
    assert run.code == 2 and run.out == ""
    line = run.error_line()
    assert line.startswith(f"gpubot: {path}"), line
    assert re.search(key, line), line


def test_broken_json_scenario(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "fleet.json"
    path.write_text('{"kind": "Scenario", "objects": [}')
    run = gpubot(capsys, "why", "ml/trainer-0", "--scenario", str(path))
    assert run.code == 2
    line = run.error_line()
    assert str(path) in line and "JSON" in line and "line 1" in line


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GPUBOT_TIMEZONE", "Mars/Olympus"),
        ("GPUBOT_DIGEST_TIME", "25:00"),
        ("GPUBOT_CORDON_MAX_FRACTION", "two"),
        ("PROMETHEUS_URL", "prometheus:9090"),
    ],
)
def test_bad_setting_in_the_environment(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    incident: tuple[str, Scenario],
    name: str,
    value: str,
) -> None:
    stem, sc = incident
    monkeypatch.setenv(name, value)
    run = gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem)
    assert run.code == 2 and run.out == ""
    assert name in run.error_line()


def test_layer_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], incident: tuple[str, Scenario]
) -> None:
    stem, sc = incident
    run = gpubot(capsys, "why", expect(sc)["target"], "--scenario", stem, "--layer", "7")
    assert run.code == 2 and run.out == ""
    assert "--layer" in run.err.strip().splitlines()[-1]


def test_no_command_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    run = gpubot(capsys)
    assert run.code == 2


# --- scenarios and demo ------------------------------------------------------------------------


def test_scenarios_lists_every_bundled_incident(capsys: pytest.CaptureFixture[str]) -> None:
    run = gpubot(capsys, "scenarios")
    assert run.code == 0 and run.err == ""
    lines = run.out.splitlines()[: len(bundled_scenarios())]
    stems = [p.stem for p in bundled_scenarios()]
    assert [line.split()[0] for line in lines] == stems
    # Each with the pod to ask about and what the bot concludes.
    for line, path in zip(lines, bundled_scenarios(), strict=True):
        expect = load_scenario(path).extra["x-expect"]
        assert line.split()[1:] == [expect["target"], *(expect["verdict"] or "all ok").split()]


def test_demo_ends_by_itself_without_a_terminal() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUBOT_", "PROMETHEUS_", "SLACK_"))}
    env.pop("KUBECONFIG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    n = len(bundled_scenarios())
    assert proc.stdout.count("✓ diagnosed as expected") == n
    assert proc.stdout.strip().splitlines()[-1] == f"{n}/{n} incidents diagnosed as expected"
    assert "\x1b[" not in proc.stdout


def test_demo_json_reports_every_incident(capsys: pytest.CaptureFixture[str]) -> None:
    run = gpubot(capsys, "demo", "--format", "json")
    assert run.code == 0 and run.err == ""
    cases = json.loads(run.out)
    assert [c["scenario"] for c in cases] == [p.stem for p in bundled_scenarios()]
    for case in cases:
        assert case["as_expected"], (case["scenario"], case["problems"])
        check_walk_schema(case["walk"])
