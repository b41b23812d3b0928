"""A valid node name of 240 characters through the must-gather button and the CLI (issue 10, item 10).

Names of the temporary file, the archive, its members and the upload are
derived from the node name; each must stay a valid file name (255 bytes) and
two long names sharing their first 60 characters must not collide.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from bot.actions.archive import name_part
from bot.ops.config import load_config
from bot.slack.node_actions import ClusterNodeActions
from bot.sources.opener import open_sources
from layers.findings import Target
from tests.bundle_scenario import scenario
from tests.slack_harness import bot_env

# Four 59-character DNS labels: a valid node name (a DNS subdomain, at most 253 characters).
LONG = ".".join(["gpu-node-h100-80gb-hbm3-pool-a-rack-17-slot-04-" + c * 11 for c in "abcd"])


def _scenario_with(node: str, folder: Path) -> Path:
    doc = json.loads(json.dumps(scenario()).replace('"gpu-7"', json.dumps(node)))
    path = folder / "long.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_name_is_valid_and_long() -> None:
    assert 230 <= len(LONG) <= 253 and all(len(label) <= 63 for label in LONG.split("."))


def test_the_must_gather_button_bundles_a_node_with_a_240_character_name(tmp_path: Path) -> None:
    cfg = load_config(bot_env("http://127.0.0.1:9/api/"), need_slack=True, http=True)
    sources = open_sources(cfg, scenario=str(_scenario_with(LONG, tmp_path)))
    bundle = ClusterNodeActions(sources, cfg).must_gather(LONG, Target(None, None, node=LONG), None)
    try:
        assert len(Path(bundle.path).name) <= 255 and len(bundle.filename) <= 255
        with tarfile.open(bundle.path, "r:gz") as tar:
            names = tar.getnames()
            tar.extractall(tmp_path / "out", filter="data")  # "File name too long" would raise here
    finally:
        Path(bundle.path).unlink()
    assert all(len(part) <= 255 for name in names for part in name.split("/"))
    assert any(name.startswith("dcgm/") for name in names)
    assert LONG.encode() in (tmp_path / "out" / "gpu_nodes.labels").read_bytes()  # the name itself is kept


def test_the_cli_names_the_bundle_of_a_long_node_safely(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["must-gather", "--scenario", str(_scenario_with(LONG, tmp_path)), "--node", LONG]) == 0
    made = [p for p in tmp_path.iterdir() if p.name.startswith("gpubot-must-gather_")]
    assert len(made) == 1 and len(made[0].name) <= 255


def test_long_names_sharing_a_prefix_do_not_collide() -> None:
    other = LONG[:-1] + "z"
    assert name_part(LONG) != name_part(other)
    assert len(name_part(LONG)) <= 60 and name_part("gpu-7") == "gpu-7"
