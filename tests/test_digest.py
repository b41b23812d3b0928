"""The digest's fleet checks, its JSON, text and Slack blocks, over a fleet with each reason and the near-misses."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from slack_sdk.models.blocks import Block

from bot.sources.series import SeriesData
from bot.sources.snapshot import SnapshotCluster
from handlers.digest import (
    DIAGNOSE,
    button_value,
    digest_id,
    digest_message,
    digest_table,
    parse_button_value,
)
from layers import digest as dg
from layers.sources import K8sObject, NoTelemetry
from tests import fixtures
from tests.layers import builders as b
from tests.layers.fake_telemetry import CountingTelemetry, series, telemetry

NOW = 1_795_953_600.0  # 2026-11-29T12:00:00Z
# The spec's digest JSON example, kept beside the tests; CI (which has the spec beside the clone)
# also checks the copy against the spec itself.
SPEC_EXAMPLE = fixtures.FIXTURES / "digest-spec-example.json"
SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "interfaces.md"
SAMPLES = fixtures.SAMPLES
CORR, UNCORR = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
FAIL, XID = "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_XID_ERRORS"
RISING = [(-86000, 0), (-3600, 12), (0, 14)]
FLAT = [(-86000, 2), (-43000, 2), (0, 2)]
# Labels exactly as sample 40 exports them: lowercase `hostname` holding the exporter pod's name.
A30_LABELS = {
    "gpu": "1",
    "UUID": "GPU-fc60126e-514d-3522-2828-c5daa8e99d85",
    "pci_bus_id": "00000000:B1:00.0",
    "device": "nvidia1",
    "modelName": "NVIDIA RTX 2000 Ada Generation",
    "hostname": "dcgm-exporter-wwwjh",
}
EXPECTED = {
    "ocio-gpu01": ("ALLOCATABLE_BELOW_CAPACITY",),
    "gpu-gap": ("ALLOCATABLE_BELOW_CAPACITY",),
    "gpu-rising": ("REMAPPED_ROWS_RISING",),
    "gpu-uncorrectable": ("REMAPPED_ROWS_RISING",),
    "gpu-remap-failed": ("ROW_REMAP_FAILURE",),
    "gpu-all": ("ALLOCATABLE_BELOW_CAPACITY", "REMAPPED_ROWS_RISING", "ROW_REMAP_FAILURE"),
    "mig-gap": ("ALLOCATABLE_BELOW_CAPACITY",),
    "a30-node": ("REMAPPED_ROWS_RISING",),
}


def sample_05_node() -> K8sObject:
    """The real `kubectl get node -o yaml` status of sample 05: capacity 16, allocatable 0."""
    text = "\n".join(
        ln
        for ln in (SAMPLES / "05_node_capacity16_allocatable0.yaml").read_text().splitlines()
        if not ln.lstrip().startswith("#")
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "ocio-gpu01", "labels": {"kubernetes.io/hostname": "ocio-gpu01"}},
        "spec": {},
        "status": yaml.safe_load(text)["status"],
    }


def gpu(node: str, n: int = 3) -> dict[str, str]:
    return {"gpu": str(n), "UUID": f"GPU-{node}-{n}", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": node}


def rows(node: str, correctable: Sequence[tuple[float, float]], uncorrectable: Sequence[tuple[float, float]] | None = None,
         labels: dict[str, str] | None = None) -> list[SeriesData]:  # fmt: skip
    lab = labels or gpu(node)
    return [
        series(CORR, lab, correctable, NOW),
        series(UNCORR, lab, uncorrectable or [(-86000, 0), (0, 0)], NOW),
        series(FAIL, lab, [(-86000, 0), (0, 0)], NOW),
        series(XID, lab, [(0, 0)], NOW),
    ]


def fleet() -> tuple[list[K8sObject], list[SeriesData]]:
    """Every reason once, the near-misses, the exporter-pod host label; healthy nodes around them."""
    objects = [
        sample_05_node(),
        b.gpu_node("gpu-gap", 8, allocatable=7),
        b.gpu_node("gpu-rising"),
        b.gpu_node("gpu-uncorrectable"),
        b.gpu_node("gpu-remap-failed"),
        b.gpu_node("gpu-all", 8, allocatable=7),
        b.gpu_node("gpu-flat"),
        b.gpu_node("gpu-cordoned-ok", unschedulable=True),
        b.node(
            "mig-gap",
            labels={"nvidia.com/gpu.present": "true", "nvidia.com/mig.strategy": "mixed"},
            capacity={"nvidia.com/mig-1g.10gb": 7, "nvidia.com/mig-3g.40gb": 1},
            allocatable={"nvidia.com/mig-1g.10gb": 6, "nvidia.com/mig-3g.40gb": 0},
        ),
        b.node(
            "mig-ok",
            labels={"nvidia.com/gpu.present": "true", "nvidia.com/mig.strategy": "mixed"},
            capacity={"nvidia.com/mig-1g.10gb": 7},
        ),
        b.gpu_node("a30-node", 2),
        b.gpu_node("gpu-healthy"),
        b.node("cpu-only"),
        b.operand("nvidia-dcgm-exporter", "a30-node", name="dcgm-exporter-wwwjh"),
    ]
    data: list[SeriesData] = []
    for healthy in ("gpu-gap", "gpu-flat", "gpu-cordoned-ok", "gpu-healthy", "mig-ok"):
        data += rows(healthy, FLAT)
    data += rows("gpu-rising", RISING)
    data += rows("gpu-uncorrectable", FLAT, [(-86000, 0), (-600, 1), (0, 1)])
    data += rows("gpu-remap-failed", FLAT)
    data.append(series(FAIL, gpu("gpu-remap-failed"), [(-7200, 1), (0, 1)], NOW))
    data += rows("gpu-all", [(-86000, 3), (-1800, 9), (0, 9)])
    data.append(series(FAIL, gpu("gpu-all"), [(-7200, 0), (-600, 1)], NOW))
    data.append(series(XID, gpu("gpu-all"), [(0, 79)], NOW))
    data += rows("a30-node", RISING, labels=A30_LABELS)
    # The same GPU's second series for the failure gauge replaces the flat one: keep one per label set.
    seen: dict[tuple[tuple[str, str], ...], SeriesData] = {}
    for s in data:
        seen[tuple(sorted(s.labels.items()))] = s
    return objects, list(seen.values())


def collect(objects: list[K8sObject], data: list[SeriesData]) -> dg.Digest:
    return dg.collect_digest(SnapshotCluster(objects), telemetry(data, NOW))


def test_flagged_set_has_each_reason_and_none_of_the_near_misses() -> None:
    digest = collect(*fleet())
    assert {f.node: f.reasons for f in digest.flagged} == EXPECTED
    assert digest.gpu_nodes == 12  # cpu-only is not a GPU node
    assert digest.metrics_error is None and digest.notes == ()


def test_each_node_once_with_its_numbers() -> None:
    digest = collect(*fleet())
    assert len({f.node for f in digest.flagged}) == len(digest.flagged)
    by = {f.node: f for f in digest.flagged}
    assert (by["gpu-rising"].correctable_rows_24h, by["gpu-rising"].uncorrectable_rows_24h) == (14, 0)
    assert (by["gpu-uncorrectable"].correctable_rows_24h, by["gpu-uncorrectable"].uncorrectable_rows_24h) == (
        0,
        1,
    )
    every = by["gpu-all"]
    assert (every.capacity, every.allocatable, every.xids_24h, every.row_remap_failure) == (8, 7, (79,), True)
    assert every.gpus == ("GPU 3 (GPU-gpu-all-3)",)
    assert (by["ocio-gpu01"].capacity, by["ocio-gpu01"].allocatable) == (16, 0)
    mig = by["mig-gap"]
    assert (mig.capacity, mig.allocatable) == (8, 6)
    assert [(r.resource, r.capacity, r.allocatable) for r in mig.gaps] == [
        ("nvidia.com/mig-1g.10gb", 7, 6),
        ("nvidia.com/mig-3g.40gb", 1, 0),
    ]
    # Worst first: the failed remaps, then lost capacity, then rising rows.
    assert [f.node for f in digest.flagged][:2] == ["gpu-all", "gpu-remap-failed"]
    assert digest.flagged[-1].reasons == ("REMAPPED_ROWS_RISING",)


def test_cordoned_state_is_reported() -> None:
    objects, data = fleet()
    objects[1] = b.gpu_node("gpu-gap", 8, allocatable=7, unschedulable=True)
    by = {f.node: f for f in collect(objects, data).flagged}
    assert by["gpu-gap"].cordoned and not by["gpu-rising"].cordoned


def test_exporter_pods_are_listed_only_when_a_host_label_is_no_node() -> None:
    class Counting(SnapshotCluster):
        pod_lists = 0

        def list_pods(self, *a: Any, **k: Any) -> list[K8sObject]:
            # Only the exporter lists count here: the device plugin pods of capacity-gap nodes are
            # listed for their Xids (test_plugin_log_xids_join_dcgm_ones).
            if k.get("label_selector") in dg.EXPORTER_SELECTORS:
                Counting.pod_lists += 1
            return super().list_pods(*a, **k)

    objects, data = fleet()
    tel = CountingTelemetry(telemetry(data, NOW))
    dg.collect_digest(Counting(objects), tel)
    assert Counting.pod_lists == len(dg.EXPORTER_SELECTORS)
    # Seven (the since-start Xid counter is read by its rise), an eighth because a GPU's last-Xid
    # series began in the window (relabelled or new), and a ninth because rows rose: one range read
    # of the rising GPUs tells growth from a reset's dip.
    assert sum(tel.calls.values()) <= 9 and tel.calls["range"] <= 1
    Counting.pod_lists = 0
    plain = [s for s in data if "hostname" not in s.labels]
    digest = dg.collect_digest(Counting(objects), telemetry(plain, NOW))
    assert Counting.pod_lists == 0 and "a30-node" not in {f.node for f in digest.flagged}


def test_unmapped_exporter_host_is_a_note_not_a_flag() -> None:
    objects, data = fleet()
    objects = [o for o in objects if o["kind"] != "Pod"]
    digest = collect(objects, data)
    assert "a30-node" not in {f.node for f in digest.flagged}
    [note] = digest.notes
    assert "dcgm-exporter-wwwjh" in note and "NODE_NAME" in note


def test_exporter_pods_forbidden_is_said() -> None:
    objects, data = fleet()
    cluster = b.FailingCluster(objects, None, {"list_pods": b.forbidden("list", "pods")})
    digest = dg.collect_digest(cluster, telemetry(data, NOW))
    assert any("could not be listed" in n and "forbidden" in n for n in digest.notes)


def test_telemetry_down_still_lists_capacity_gaps_and_says_why() -> None:
    objects, _ = fleet()
    digest = dg.collect_digest(SnapshotCluster(objects), NoTelemetry(NOW))
    assert {f.node for f in digest.flagged} == {"ocio-gpu01", "gpu-gap", "gpu-all", "mig-gap"}
    assert digest.metrics_error is not None
    assert "no metrics source configured" in digest.metrics_error and "capacity gaps" in digest.metrics_error
    assert "Metrics could not be read" in json.dumps(digest_message(digest, "digest-x").blocks)
    assert "UNKNOWN:" in digest_table(digest)


def test_no_dcgm_series_at_all_is_a_note() -> None:
    objects, _ = fleet()
    digest = collect(objects, [])
    assert any("no remapped-row series" in n for n in digest.notes)


# --- JSON --------------------------------------------------------------------------------


def spec_example() -> dict[str, Any]:
    example: dict[str, Any] = json.loads(SPEC_EXAMPLE.read_text())
    return example


@pytest.mark.skipif(not SPEC.exists(), reason="the spec is not beside this clone (CI has it)")
def test_the_kept_example_is_the_specs() -> None:
    block = re.search(r"### `digest --format json`\s*```json\n(.*?)```", SPEC.read_text(), re.S)
    assert block, "the spec's digest JSON example moved"
    assert json.loads(block.group(1)) == spec_example()


def same_shape(spec: Any, ours: Any, where: str = "$") -> None:
    """Every key of the spec is in ours with a value of the same JSON type (extra keys allowed)."""
    assert type(ours) is type(spec), f"{where}: {type(ours).__name__} != {type(spec).__name__}"
    if isinstance(spec, dict):
        for k, v in spec.items():
            assert k in ours, f"{where}.{k} missing"
            same_shape(v, ours[k], f"{where}.{k}")
    elif isinstance(spec, list) and spec:
        for i, item in enumerate(ours):
            same_shape(spec[0], item, f"{where}[{i}]")


def test_json_shape_is_the_spec() -> None:
    data = json.loads(json.dumps(collect(*fleet()).to_dict()))
    spec = spec_example()
    same_shape(spec, data)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", data["generated_at"])
    assert data["generated_at"] == "2026-11-29T12:00:00Z"
    gpu_all = next(f for f in data["flagged"] if f["node"] == "gpu-all")
    assert gpu_all["reasons"] == spec["flagged"][0]["reasons"]
    assert {r for f in data["flagged"] for r in f["reasons"]} <= set(dg.REASONS)


def test_row_counts_are_whole_numbers() -> None:
    assert [dg.row_count(x) for x in (0.0, -0.0, 0.2, 6.0027, 13.6)] == [0, 0, 1, 6, 14]


# --- text and Slack ------------------------------------------------------------------------------


def test_text_table_lists_every_flagged_node_with_numbers() -> None:
    text = digest_table(collect(*fleet()))
    assert "8 of 12 GPU node(s) flagged" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("gpu-all "))
    assert re.search(
        r"gpu-all\s+8\s+7\s+6/0\s+79\s+no\s+ALLOCATABLE_BELOW_CAPACITY,REMAPPED_ROWS_RISING,ROW_REMAP_FAILURE",
        line,
    )
    assert "mig-1g.10gb 7/6" in text and "gpu-flat" not in text and "mig-ok" not in text


def assert_valid_slack(blocks: list[dict[str, Any]], text: str) -> None:
    assert len(blocks) <= 50 and len(text) <= 4000
    assert len(json.dumps(blocks)) < 13000
    for block in blocks:
        parsed = Block.parse(block)
        assert parsed is not None
        parsed.validate_json()
        assert parsed.to_dict() == block  # no key silently dropped
    ids = [bl["block_id"] for bl in blocks if "block_id" in bl]
    assert len(ids) == len(set(ids))


def test_blocks_have_reasons_numbers_and_the_three_buttons() -> None:
    digest = collect(*fleet())
    did = digest_id(digest)
    msg = digest_message(digest, did)
    assert_valid_slack(msg.blocks, msg.text)
    assert did == "digest-20261129T120000Z" and msg.attachments == []
    dumped = json.dumps(msg.blocks)
    assert "REMAPPED_ROWS_RISING" in dumped and "+14 correctable" in dumped and "Xids: 79" in dumped
    actions = [bl for bl in msg.blocks if bl["type"] == "actions"]
    assert len(actions) == len(digest.flagged)
    first = actions[0]["elements"]
    assert [e["action_id"] for e in first] == [DIAGNOSE, "must_gather", "cordon_node"]
    assert all(parse_button_value(e["value"]) == (did, "gpu-all") for e in first)
    assert first[2]["confirm"]["confirm"]["text"] == "Cordon"


def test_cordoned_node_has_no_cordon_button_and_says_so() -> None:
    objects, data = fleet()
    objects[1] = b.gpu_node("gpu-gap", 8, allocatable=7, unschedulable=True)
    msg = digest_message(collect(objects, data), "digest-1")
    i = next(i for i, bl in enumerate(msg.blocks) if "*gpu-gap*" in json.dumps(bl))
    assert "_cordoned_" in msg.blocks[i]["text"]["text"]
    # Not gpubot's cordon: no Uncordon button (the owners' table; the CLI's --force names who).
    assert [e["action_id"] for e in msg.blocks[i + 1]["elements"]] == [DIAGNOSE, "must_gather"]


def test_cluster_text_is_escaped() -> None:
    digest = dg.build_digest([b.gpu_node("<!channel>", 8, allocatable=7)], {}, NOW)
    blocks = digest_message(digest, "digest-1").blocks
    # Button values are opaque data handed back to the bot, never rendered: only shown text counts.
    shown = json.dumps([{k: v for k, v in bl.items() if k != "elements"} for bl in blocks])
    assert "<!channel>" not in shown and "&lt;!channel&gt;" in shown


def test_all_clear_is_short() -> None:
    digest = collect([b.gpu_node("gpu-1"), b.gpu_node("gpu-2")], rows("gpu-1", FLAT) + rows("gpu-2", FLAT))
    msg = digest_message(digest, digest_id(digest))
    assert_valid_slack(msg.blocks, msg.text)
    assert "all clear" in msg.text and len(msg.blocks) <= 3 and not msg.attachments
    assert "All clear" in digest_table(digest)


def test_300_flagged_nodes_fit_and_the_full_list_is_attached() -> None:
    nodes = [b.gpu_node(f"gpu-{i:03d}", 8, allocatable=6) for i in range(300)]
    digest = dg.build_digest(nodes, {}, NOW)
    msg = digest_message(digest, digest_id(digest))
    assert_valid_slack(msg.blocks, msg.text)
    shown = sum(1 for bl in msg.blocks if bl["type"] == "actions")
    assert 0 < shown < 300
    more = msg.blocks[-1]["elements"][0]["text"]
    assert f"{300 - shown} more flagged node(s)" in more
    [(name, full)] = msg.attachments
    assert name == "gpu-digest-2026-11-29.txt"
    assert all(f"gpu-{i:03d} " in full for i in range(300))


def test_button_value_round_trip_and_rejects_others() -> None:
    assert parse_button_value(button_value("digest-20261129T090000Z", "gpu-7")) == (
        "digest-20261129T090000Z",
        "gpu-7",
    )
    for bad in ("walk-123", "digest-1|", "|gpu-7"):
        with pytest.raises(ValueError):
            parse_button_value(bad)


# --- the command ---------------------------------------------------------------------------------


def run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> Any:
    import argparse

    from benchmarks.fleet import make_fleet
    from bot.cli import digest as cli_digest
    from bot.cli.args import add_format, add_sources

    scenario = tmp_path / "fleet.json"
    scenario.write_text(json.dumps(make_fleet(12, 8, sick_every=5)))
    parser = argparse.ArgumentParser()
    cli_digest.register(parser.add_subparsers(dest="command"), add_sources, add_format)
    args = parser.parse_args(["digest", "--scenario", str(scenario), *argv])
    return cli_digest.COMMANDS["digest"](args)


def test_cli_text_and_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(tmp_path, monkeypatch) == 0
    text = capsys.readouterr().out
    assert "3 of 12 GPU node(s) flagged" in text and "gpu-00006" in text and "gpu-00002" not in text
    # The sources are said once, and the metrics source only inside that line.
    assert text.count("sources:") == 1 and text.count("metrics:") == 1, text
    assert run_cli(tmp_path, monkeypatch, "--format", "json") == 0
    data = json.loads(capsys.readouterr().out)
    assert [f["node"] for f in data["flagged"]] == ["gpu-00001", "gpu-00006", "gpu-00011"]
    assert data["flagged"][0]["reasons"] == ["ALLOCATABLE_BELOW_CAPACITY", "REMAPPED_ROWS_RISING"]


def test_cli_post_without_token_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.ops.config import ConfigError

    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        run_cli(tmp_path, monkeypatch, "--post")


def test_cli_post_sends_the_digest_and_its_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakes.slack_api import serve_slack

    with serve_slack() as slack:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-cli-test")
        monkeypatch.setenv("SLACK_API_URL", slack.url)
        monkeypatch.setenv("GPUBOT_DIGEST_CHANNEL", "C0DIGEST")
        monkeypatch.delenv("REDIS_URL", raising=False)
        assert run_cli(tmp_path, monkeypatch, "--post", "--format", "json") == 0
        [post] = slack.calls_to("chat.postMessage")
        assert post.params["channel"] == "C0DIGEST" and "3 of 12" in post.params["text"]
        [upload] = slack.calls_to("upload")
        assert upload.body.startswith(b"\x89PNG")
        assert len(slack.calls_to("files.completeUploadExternal")) == 1
    captured = capsys.readouterr()
    assert "posted to C0DIGEST" in captured.out and "buttons need the bot's REDIS_URL" in captured.out
    assert captured.err == ""  # stderr is for errors only


# --- fleet variants --------------------------------------------------------------------------


def _exporter(name: str, node: str, ns: str, standalone: bool) -> K8sObject:
    if standalone:
        return b.pod(ns, name, node=node, labels={"app.kubernetes.io/name": "dcgm-exporter"})
    return b.operand("nvidia-dcgm-exporter", node, name=name, ns=ns)


def test_fleet_labelled_only_by_exporter_pod_names_in_other_namespaces() -> None:
    # No NODE_NAME anywhere: every host label is an exporter pod (operator on OpenShift, standalone chart).
    objects: list[K8sObject] = [
        b.gpu_node("ocp-gpu-1"),
        b.gpu_node("ocp-gpu-2"),
        b.gpu_node("edge-gpu-3"),
        _exporter("nvidia-dcgm-exporter-7xq2m", "ocp-gpu-1", "nvidia-gpu-operator", False),
        _exporter("nvidia-dcgm-exporter-k8d4z", "ocp-gpu-2", "nvidia-gpu-operator", False),
        _exporter("dcgm-exporter-lcxpl", "edge-gpu-3", "monitoring", True),
    ]

    def lab(host: str, key: str = "Hostname") -> dict[str, str]:
        return {"gpu": "0", "UUID": f"GPU-{host}", "modelName": "NVIDIA A100-SXM4-80GB", key: host,
                "container": "", "namespace": "", "pod": ""}  # fmt: skip

    data = rows("x", RISING, labels=lab("nvidia-dcgm-exporter-7xq2m"))
    data += rows("x", FLAT, labels=lab("nvidia-dcgm-exporter-k8d4z"))
    data += rows("x", FLAT, labels=lab("dcgm-exporter-lcxpl", "hostname"))
    data.append(series(FAIL, lab("dcgm-exporter-lcxpl", "hostname") | {"gpu": "1"}, [(-600, 1)], NOW))
    digest = collect(objects, data)
    assert {f.node: f.reasons for f in digest.flagged} == {
        "edge-gpu-3": ("ROW_REMAP_FAILURE",),
        "ocp-gpu-1": ("REMAPPED_ROWS_RISING",),
    }
    assert not digest.notes
    rising = next(f for f in digest.flagged if f.node == "ocp-gpu-1")
    assert rising.correctable_rows_24h == 14


def test_restarted_exporter_old_pod_name_is_a_note_new_one_maps() -> None:
    objects: list[K8sObject] = [
        b.gpu_node("gpu-a"),
        _exporter("nvidia-dcgm-exporter-new11", "gpu-a", "gpu-operator", False),
    ]
    old = {
        "gpu": "0",
        "UUID": "GPU-a0",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "nvidia-dcgm-exporter-old99",
    }
    new = {**old, "Hostname": "nvidia-dcgm-exporter-new11"}
    # Scraped every 10 minutes; the new exporter pod took over 40000 s ago and saw two more rows.
    old_points = [(t, 0 if t < -60000 else 12) for t in range(-86000, -49999, 600)]
    new_points = [(t, 12 if t < -20000 else 14) for t in range(-40000, 1, 600)]
    data = [series(CORR, old, old_points, NOW), series(CORR, new, new_points, NOW)]
    digest = collect(objects, data)
    [flag] = digest.flagged
    assert flag.node == "gpu-a" and flag.correctable_rows_24h == 2
    assert any("nvidia-dcgm-exporter-old99" in n for n in digest.notes)


def test_capacity_as_yaml_integers_and_shared_resource_gap() -> None:
    node = b.gpu_node("ts-node", 1)
    node["status"]["capacity"] = {"cpu": 16, "nvidia.com/gpu.shared": 32}
    node["status"]["allocatable"] = {"cpu": 16, "nvidia.com/gpu.shared": "28"}
    whole = b.gpu_node("int-node", 8)
    whole["status"]["capacity"]["nvidia.com/gpu"] = 8
    whole["status"]["allocatable"]["nvidia.com/gpu"] = 8
    digest = collect([node, whole], [])
    [flag] = digest.flagged
    assert flag.node == "ts-node" and (flag.capacity, flag.allocatable) == (32, 28)
    assert [r.resource for r in flag.gaps] == ["nvidia.com/gpu.shared"]


def test_same_gpu_under_both_host_spellings_is_one_gpu() -> None:
    # An exporter upgrade across dcgm-exporter PR #655 renames Hostname to hostname mid-window.
    objects: list[K8sObject] = [b.gpu_node("gpu-u")]
    before = {"gpu": "2", "UUID": "GPU-u2", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "gpu-u"}
    after = {"gpu": "2", "UUID": "GPU-u2", "modelName": "NVIDIA H100 80GB HBM3", "hostname": "gpu-u"}
    data = [
        series(CORR, before, [(-86000, 0), (-50000, 12)], NOW),
        series(CORR, after, [(-40000, 12), (0, 14)], NOW),
    ]
    [flag] = collect(objects, data).flagged
    assert flag.gpus == ("GPU 2 (GPU-u2)",)


def test_plugin_log_xids_join_dcgm_ones_on_capacity_gap_nodes() -> None:
    """Xid 79 is in the device plugin's log only (DCGM cannot report it): xids_24h names it."""
    path = Path(__file__).parent / "incidents/blackbox/l45/l40s-xid79-plugin-only-nvidia-system.yaml"
    from bot.sources.scenario import build_sources, load_scenario

    cluster, tel = build_sources(load_scenario(path))
    digest = dg.collect_digest(cluster, tel)
    by = {f.node: f for f in digest.flagged}
    assert by["gpu-l40s-03"].xids_24h == (79,) and by["gpu-l40s-03"].reasons == (
        "ALLOCATABLE_BELOW_CAPACITY",
    )
    # Rows rising without a capacity gap: its plugin log is not read, its DCGM Xids stand alone.
    assert by["gpu-l40s-04"].xids_24h == () and by["gpu-l40s-04"].reasons == ("REMAPPED_ROWS_RISING",)
    assert digest.notes == ()


def test_unreadable_plugin_pods_are_a_note() -> None:
    from layers.sources import SourceError

    class Forbidden(SnapshotCluster):
        def list_pods(self, *a: Any, **k: Any) -> list[K8sObject]:
            raise SourceError("forbidden", "pods is forbidden", verb="list", resource="pods")

    objects, data = fleet()
    digest = dg.collect_digest(
        Forbidden(objects), telemetry([s for s in data if "hostname" not in s.labels], NOW)
    )
    assert any(n.startswith("device plugin log not read on gpu-all") for n in digest.notes), digest.notes


def test_unreadable_rows_are_unknown_not_zero_and_silent_gpu_nodes_are_noted() -> None:
    from handlers.digest import digest_table

    silent = b.gpu_node("gpu-new", 8)
    silent["status"]["capacity"].pop("nvidia.com/gpu")
    silent["status"]["allocatable"].pop("nvidia.com/gpu")
    digest = collect([b.gpu_node("gpu-1", 8, allocatable=7), silent], [])
    assert not digest.rows_read
    table = digest_table(digest)
    row = next(line for line in table.splitlines() if line.startswith("gpu-1 "))
    assert row.split()[3] == "?"  # not "0/0": nothing was read
    assert any("advertise no GPU resource" in n and "gpu-new" in n for n in digest.notes)


# --- one way to publish: the chart is guarded on every path ------------------------------------


def _chart_data() -> Any:
    from bot.slack.chart import read_chart_data

    objects, data = fleet()
    return read_chart_data(telemetry(data, NOW), collect(objects, data), "2026-11-29")


def test_charts_drawn_in_parallel_are_the_ones_drawn_one_at_a_time() -> None:
    """pyplot's global figure manager would let threads draw on each other's figures."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace

    from bot.slack.chart import render_chart

    base = _chart_data()
    variants = [replace(base, day=f"2026-11-{d:02d}", nodes=base.nodes[: 1 + d % 4]) for d in range(1, 9)]
    alone = [render_chart(v) for v in variants]
    assert len(set(alone)) == len(variants)
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            assert list(pool.map(render_chart, variants)) == alone


def test_the_chart_module_never_loads_pyplot() -> None:
    import subprocess
    import sys

    probe = "import sys, bot.slack.chart; print('matplotlib.pyplot' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "False"


def _broken_renderer(monkeypatch: pytest.MonkeyPatch) -> None:
    import bot.slack.chart

    def render_chart(data: Any) -> bytes:
        raise RuntimeError("Agg: cannot allocate the figure buffer")

    monkeypatch.setattr(bot.slack.chart, "render_chart", render_chart)


def _thread_notes(slack: Any) -> list[str]:
    return [c.params["text"] for c in slack.calls_to("chat.postMessage") if c.params.get("thread_ts")]


def test_scheduled_digest_posts_without_a_chart_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from zoneinfo import ZoneInfo

    from bot.slack.post import Poster
    from bot.slack.scheduler import DigestJob, Outcome
    from bot.slack.state import MemoryState
    from tests.fakes.slack_api import serve_slack

    _broken_renderer(monkeypatch)
    objects, data = fleet()
    with serve_slack() as slack:
        job = DigestJob(
            lambda: (collect(objects, data), telemetry(data, NOW)),
            Poster("xoxb-t", slack.url, backoff_s=0.01),
            "C0DIGEST",
            MemoryState(),
            ZoneInfo("UTC"),
            clock=lambda: NOW,
        )
        assert job() is Outcome.POSTED  # the day's digest is not lost to matplotlib
        uploads = [c.params["filename"] for c in slack.calls_to("files.getUploadURLExternal")]
        assert not any(name.endswith(".png") for name in uploads)
        [note] = _thread_notes(slack)
        assert "chart could not be drawn" in note and "cannot allocate the figure buffer" in note


def test_cli_post_without_a_chart_that_failed_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.fakes.slack_api import serve_slack

    _broken_renderer(monkeypatch)
    with serve_slack() as slack:
        monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-cli-test")
        monkeypatch.setenv("SLACK_API_URL", slack.url)
        monkeypatch.setenv("GPUBOT_DIGEST_CHANNEL", "C0DIGEST")
        monkeypatch.delenv("REDIS_URL", raising=False)
        assert run_cli(tmp_path, monkeypatch, "--post", "--format", "json") == 0
        assert slack.calls_to("upload") == []
    out = capsys.readouterr().out
    assert "posted to C0DIGEST" in out and "not attached: chart: RuntimeError" in out


def _slash_digest(tmp_path: Path, slack: Any) -> Any:
    from tests.slack_harness import dispatch, inprocess_bot, slash_body, write_scenario

    gpubot = inprocess_bot(slack.url, write_scenario(tmp_path))
    try:
        assert dispatch(gpubot, slash_body("digest", user="U0ASKER", channel="C0INCIDENT")).status == 200
    finally:
        gpubot.shutdown(wait=True)  # the digest runs on the pool: let it finish


def test_slash_digest_that_cannot_post_tells_the_user(tmp_path: Path) -> None:
    from tests.fakes.slack_api import serve_slack

    with serve_slack() as slack:
        slack.fail("chat.postMessage", 403, times=1)  # not_in_channel and the like: not retried
        _slash_digest(tmp_path, slack)
        [told] = slack.calls_to("chat.postEphemeral")
    assert told.params["user"] == "U0ASKER" and told.params["channel"] == "C0INCIDENT"
    assert "digest was not posted" in told.params["text"] and "403" in told.params["text"]


def test_slash_digest_without_its_chart_posts_and_tells_the_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.fakes.slack_api import serve_slack

    _broken_renderer(monkeypatch)
    with serve_slack() as slack:
        _slash_digest(tmp_path, slack)
        top = [c for c in slack.calls_to("chat.postMessage") if not c.params.get("thread_ts")]
        [told] = slack.calls_to("chat.postEphemeral")
    assert len(top) == 1 and top[0].params["channel"] == "C0INCIDENT"
    assert "chart: RuntimeError" in told.params["text"]
