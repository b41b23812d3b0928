"""The ledger follows the card and counts incidents, from trusted evidence only (issue 26).

On production-shaped fleets (tests/ledger_fleets.py) and a real redis-server: one NVSwitch cascade is
one node event; a card moved between nodes keeps its history and its rules; a replaced card leaves
its old node's rules; six fatal Xids over six days of reboots (two plugin instances' logs and DCGM's
windowed Xid count) meet REPEAT_NODE_FAULTS and two Xid 13 6.7 h apart meet REPEAT_APP_XID; a
tenant's pod imitating the device plugin writes nothing; every key the ledger writes expires.
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.actions.bundle_writer import collect_bundle
from bot.cli.main import main
from bot.ledger.digest_hook import with_ledger
from bot.ledger.service import export_rows, fleet_offenders, node_report
from bot.ledger.store import Ledger, MemoryBackend, RedisBackend
from bot.ops.config import load_config
from bot.sources.bundle_reader import read_bundle
from bot.sources.opener import open_sources
from bot.sources.scenario import build_sources, parse_scenario
from layers.digest import collect_digest
from layers.ledger import NodeLedger
from layers.ledger_rules import (
    REPEAT_APP_XID,
    REPEAT_FATAL_XID,
    REPEAT_NODE_FAULTS,
    RMA_ROW_REMAP_FAILURE,
    evaluate,
    is_fatal_xid,
    rules_with,
)
from layers.walk import walk
from tests import ledger_fleets as lf
from tests.incidents.fleets import uuid_of
from tests.services import RedisServer

CFG = load_config({})
DAY_M = 24 * 60


@pytest.fixture
def client(redis_server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_server.url, decode_responses=True)
    c.flushdb()
    yield c
    c.close()


def report(f: lf.Fleet, folder: Path, ledger: Ledger, node: str = lf.NODE) -> NodeLedger:
    path = lf.write(f, folder)
    src = open_sources(CFG, scenario=str(path))
    return node_report(CFG, src.cluster, src.telemetry, ledger, node)


def hits(rep: NodeLedger, reason: str) -> list[Any]:
    return [h for h in rep.hits if h.reason == reason]


def all_uuids(node: str, n: int = 8) -> dict[int, str]:
    return {g: uuid_of(node, g) for g in range(n)}


# --- one incident is one event -------------------------------------------------------------------


def test_an_nvswitch_cascade_on_eight_gpus_in_one_minute_is_one_node_event(
    tmp_path: Path, client: redis.Redis
) -> None:
    f = lf.fleet("ledger-nvswitch-cascade")
    lf.operator_owned(f)
    lf.gpus_present(f, lf.NODE, all_uuids(lf.NODE))
    lines = "".join(lf.plugin_xid_line(uuid_of(lf.NODE, g), 79, 42 - g / 60) for g in range(8))
    f.plugin_log(lf.NODE, lines)
    for g in range(8):  # each GPU's counter rose once; DCGM's windowed count pulsed once per GPU
        lf.xid_counter(f, lf.NODE, g, 79, [[-7 * 86400, 0], [-3000, 0], [-2400, 1], [0, 1]])
        lf.xid_count_pulses(f, lf.NODE, g, 79, [42])
    rep = report(f, tmp_path, Ledger(RedisBackend(client), 90))
    xids = [e for e in rep.events if e.kind == "xid"]
    assert len(xids) == 8 and {e.gpu for e in xids} == set(all_uuids(lf.NODE).values())  # one entry per GPU
    assert all(set(e.witnesses) == {"device-plugin", "dcgm"} for e in xids)  # sources folded into it
    assert hits(rep, REPEAT_NODE_FAULTS) == []  # was "8 fatal events in 7 d" from per-GPU increases summed
    assert hits(rep, REPEAT_FATAL_XID) == []
    # Counted with a threshold of one, the node has exactly one fatal event: one GPU's entry stands for it.
    one = [
        h
        for h in evaluate(rep.events, rep.now, rules_with({REPEAT_NODE_FAULTS: 1}))
        if h.reason == REPEAT_NODE_FAULTS
    ]
    assert len(one) == 1 and len(one[0].entries) == 1 and one[0].entries[0].gpu in all_uuids(lf.NODE).values()
    # A second look (another walk) adds nothing.
    again = report(f, tmp_path / "again", Ledger(RedisBackend(client), 90))
    assert len([e for e in again.events if e.kind == "xid"]) == 8


# --- the ledger follows the card -----------------------------------------------------------------


def test_a_card_moved_between_nodes_keeps_its_history_and_its_rule(
    tmp_path: Path, client: redis.Redis
) -> None:
    card = uuid_of(lf.NODE, 2)
    other = "a100-train-05"
    ledger = Ledger(RedisBackend(client), 90)
    # Yesterday evening: three Xid 79 on the card in a100-train-03.
    before = lf.fleet("ledger-card-on-03")
    lf.operator_owned(before)
    lf.gpus_present(before, lf.NODE, all_uuids(lf.NODE), until_s=14 * 3600)
    for minutes in (20 * 60, 18 * 60, 16 * 60):
        before.plugin_log(lf.NODE, lf.plugin_xid_line(card, 79, minutes))
    rep3 = report(before, tmp_path / "before", ledger)
    assert hits(rep3, REPEAT_FATAL_XID) == []  # three: under the threshold
    # The card moved to a100-train-05 (into its GPU 6's slot), where it faulted three more times.
    after = lf.fleet("ledger-card-on-05")
    lf.operator_owned(after)
    swapped = {**all_uuids(other), 6: card}
    lf.gpus_present(after, other, swapped, since_s=13 * 3600)
    lf.gpus_present(after, lf.NODE, {**all_uuids(lf.NODE), 2: uuid_of(lf.NODE, 9)}, since_s=13 * 3600)
    for minutes in (9 * 60, 5 * 60, 60):
        after.plugin_log(other, lf.plugin_xid_line(card, 79, minutes))
    rep5 = report(after, tmp_path / "after", ledger, other)
    met = hits(rep5, REPEAT_FATAL_XID)
    assert [h.gpu for h in met] == [card]
    hit = met[0]
    assert "Xid 79 6× in 24 h" in hit.detail
    assert [e.node for e in hit.entries] == [lf.NODE] * 3 + [other] * 3  # each entry where it was seen
    assert hit.since == hit.entries[0].at  # "since" is the first entry that meets it
    doc = rep5.to_dict()
    gpu = next(g for g in doc["gpus"] if g["uuid"] == card)
    assert [r["reason"] for r in gpu["rules"]] == [REPEAT_FATAL_XID]
    assert len(gpu["rules"][0]["entries"]) == 6 and {"at", "node"} <= set(gpu["rules"][0]["entries"][0])
    # Its old node no longer carries it: no rule there, its three entries stay in the export.
    rep3_now = report(after, tmp_path / "after-03", ledger, lf.NODE)
    assert hits(rep3_now, REPEAT_FATAL_XID) == []
    rows = list(csv.DictReader(io.StringIO(export_rows([rep3_now]))))
    assert [r["kind"] for r in rows if r["gpu_uuid"] == card] == ["xid"] * 3
    # The export of both nodes has the card's six entries once each, each with the node it was seen on.
    both = list(csv.DictReader(io.StringIO(export_rows([rep3_now, rep5]))))
    assert [r["node"] for r in both if r["gpu_uuid"] == card] == [lf.NODE] * 3 + [other] * 3
    # The digest reads the same ledger: the card's row is on the node it is in now.
    path = lf.write(after, tmp_path / "digest")
    src = open_sources(CFG, scenario=str(path))
    rows, _ = fleet_offenders(CFG, src.cluster, src.telemetry, ledger, [lf.NODE, other])
    assert [(h.reason, h.node, h.gpu) for h in rows if h.reason == REPEAT_FATAL_XID] == [
        (REPEAT_FATAL_XID, other, card)
    ]


def test_a_replaced_card_leaves_its_old_nodes_rules(tmp_path: Path, client: redis.Redis) -> None:
    old, new = uuid_of(lf.NODE, 5), uuid_of(lf.NODE, 15)
    ledger = Ledger(RedisBackend(client), 90)
    # Two days ago: the row-remap failure flag on GPU 5, recorded by a look at the node then.
    first = lf.fleet("ledger-remap-failure")
    lf.operator_owned(first)
    lf.gpus_present(first, lf.NODE, all_uuids(lf.NODE), since_s=3 * 86400)
    lf.remap_flag(first, lf.NODE, 5, "DCGM_FI_DEV_ROW_REMAP_FAILURE", [[-3 * 86400, 1], [0, 1]])
    assert [h.gpu for h in hits(report(first, tmp_path / "first", ledger), RMA_ROW_REMAP_FAILURE)] == [old]
    # The card was replaced 30 hours ago: the old UUID's series stop then, a new UUID sits in slot 5.
    later = lf.fleet("ledger-card-replaced")
    lf.operator_owned(later)
    lf.gpus_present(later, lf.NODE, {g: u for g, u in all_uuids(lf.NODE).items() if g != 5})
    lf.gpus_present(later, lf.NODE, {5: old}, since_s=6 * 86400, until_s=30 * 3600)
    lf.gpus_present(later, lf.NODE, {5: new}, since_s=29 * 3600)
    lf.remap_flag(later, lf.NODE, 5, "DCGM_FI_DEV_ROW_REMAP_FAILURE", [[-6 * 86400, 1], [-30 * 3600, 1]])
    rep = report(later, tmp_path / "later", ledger)
    assert hits(rep, RMA_ROW_REMAP_FAILURE) == []
    # Its history stays: `ledger export` still has the old card's entry.
    assert old in export_rows([rep]) and "row_remap_failure" in export_rows([rep])


# --- the two repeat rules from two plugin instances and DCGM's windowed count ----------------------


def test_six_fatal_xids_over_six_days_and_two_xid_13_meet_their_rules(
    tmp_path: Path, client: redis.Redis
) -> None:
    f = lf.fleet("ledger-six-days-of-reboots")
    lf.operator_owned(f)
    lf.gpus_present(f, lf.NODE, all_uuids(lf.NODE))
    # Six fatal Xids on six GPUs, a day or more apart, the node rebooted after each.
    faults = [(0, 79, 5 * DAY_M + 120), (1, 95, 4 * DAY_M + 300), (3, 64, 3 * DAY_M), (4, 119, 2 * DAY_M),
              (6, 79, 20 * 60), (7, 62, 120)]  # fmt: skip
    assert all(is_fatal_xid(x) for _, x, _ in faults)
    for gpu, xid, minutes in faults:
        lf.xid_count_pulses(f, lf.NODE, gpu, xid, [minutes])
    # The plugin's current instance saw the last; its previous instance (before the last reboot) the one before.
    f.plugin_log(lf.NODE, lf.plugin_xid_line(uuid_of(lf.NODE, 7), 62, 120))
    lf.previous_plugin_log(f, lf.NODE, lf.plugin_xid_line(uuid_of(lf.NODE, 6), 79, 20 * 60))
    # Xid 13 twice on GPU 2, 6.7 h apart: the plugin skips 13, DCGM's windowed count names the GPU.
    lf.xid_count_pulses(f, lf.NODE, 2, 13, [7 * 60 + 30, 48])
    rep = report(f, tmp_path, Ledger(RedisBackend(client), 90))
    node_hits = hits(rep, REPEAT_NODE_FAULTS)
    assert len(node_hits) == 1 and node_hits[0].gpu == ""
    entries = node_hits[0].entries
    assert [(e.gpu, e.xid) for e in entries] == [(uuid_of(lf.NODE, g), x) for g, x, _ in faults]
    assert node_hits[0].since == entries[0].at
    assert "6 fatal events in 7 d" in node_hits[0].detail
    both = [e for e in entries if len(e.witnesses) > 1]  # the plugin's two lines and DCGM's pulses: one each
    assert {e.gpu for e in both} == {uuid_of(lf.NODE, 6), uuid_of(lf.NODE, 7)}
    app = hits(rep, REPEAT_APP_XID)
    assert [h.gpu for h in app] == [uuid_of(lf.NODE, 2)]
    assert [e.xid for e in app[0].entries] == [13, 13]
    gap_h = (app[0].entries[1].at - app[0].entries[0].at) / 3600
    assert 6.6 < gap_h < 6.8 and app[0].since == app[0].entries[0].at


def test_a_counter_reset_is_not_an_event(tmp_path: Path) -> None:
    f = lf.fleet("ledger-counter-reset")
    lf.operator_owned(f)
    # The exporter restarted twice with the node: the counter fell from 3 to 0, then from 1 to 0.
    # Scraped every 5 minutes: 3, then 0 after a restart; 1 ten minutes ago (an Xid), 0 after the next.
    points = [[float(-t), 3.0 if t > 6600 else (1.0 if t == 600 else 0.0)] for t in range(7200, -1, -300)]
    lf.xid_counter(f, lf.NODE, 4, 79, points)
    rep = report(f, tmp_path, Ledger(MemoryBackend(), 90))
    xids = [e for e in rep.events if e.kind == "xid"]
    assert [(e.gpu, round((rep.now - e.at) / 60)) for e in xids] == [(uuid_of(lf.NODE, 4), 10)]


# --- only trusted evidence -----------------------------------------------------------------------


@pytest.mark.parametrize("cluster_policy", [True, False], ids=["cluster-policy", "daemonset-owners-only"])
def test_a_tenants_imitation_of_the_device_plugin_writes_nothing(
    tmp_path: Path, client: redis.Redis, capsys: pytest.CaptureFixture[str], cluster_policy: bool
) -> None:
    f = lf.fleet("ledger-impostor")
    lf.operator_owned(f, cluster_policy=cluster_policy)
    lf.gpus_present(f, lf.NODE, all_uuids(lf.NODE))
    f.running_pod("trainer-0", "ml", lf.NODE, 1)
    fake = lf.impostor(f, lf.NODE, "ml", uuid_of(lf.NODE, 3), 79, [300, 250, 200, 150, 100, 50])
    path = lf.write(f, tmp_path)
    src = open_sources(CFG, scenario=str(path))
    ledger = Ledger(RedisBackend(client), 90)
    rep = node_report(CFG, src.cluster, src.telemetry, ledger, lf.NODE)
    assert [e for e in rep.events if e.kind in ("xid", "unhealthy")] == []
    assert rep.hits == ()
    stored = client.hgetall(f"gpubot:ledger:{{{lf.NODE}}}")
    assert [k for k in stored if k.startswith("ev:")] == []  # nothing written for 90 days
    # `gpubot node` shows none.
    assert main(["node", lf.NODE, "--scenario", str(path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e for g in doc["gpus"] for e in g["events"]] == [] and doc["rules"] == []
    # The walk says so, once, and finds no Xid.
    result = walk(src.cluster, src.telemetry, "ml", "trainer-0")
    codes = [fd.code for layer in result.layers for fd in layer.findings]
    assert codes.count("L2_OPERAND_IMPOSTOR") == 1 and "L5_XID" not in codes
    said = next(fd for layer in result.layers for fd in layer.findings if fd.code == "L2_OPERAND_IMPOSTOR")
    assert any(f"ml/{fake}" in line for line in said.evidence)


def test_the_operator_setting_still_names_the_namespace(tmp_path: Path) -> None:
    # With GPUBOT_OPERATOR_NAMESPACE set, the real plugin's Xids count and the imitation's do not.
    f = lf.fleet("ledger-impostor-setting")
    lf.plugin_xid(f, lf.NODE, 1, 79, 30)
    lf.impostor(f, lf.NODE, "ml", uuid_of(lf.NODE, 3), 79, [20, 10])
    path = lf.write(f, tmp_path)
    cfg = load_config({"GPUBOT_OPERATOR_NAMESPACE": "gpu-operator"})
    src = open_sources(cfg, scenario=str(path))
    rep = node_report(cfg, src.cluster, src.telemetry, Ledger(MemoryBackend(), 90), lf.NODE)
    assert {e.gpu for e in rep.events if e.kind == "xid"} == {uuid_of(lf.NODE, 1)}


# --- every key expires ---------------------------------------------------------------------------


def test_every_ledger_key_expires_with_the_retention(tmp_path: Path, client: redis.Redis) -> None:
    f = lf.fleet("ledger-expiry")
    lf.operator_owned(f)
    lf.gpus_present(f, lf.NODE, all_uuids(lf.NODE))
    lf.plugin_xid(f, lf.NODE, 2, 79, 30)
    ledger = Ledger(RedisBackend(client), 7)
    report(f, tmp_path, ledger)
    ledger.record(lf.NODE, [], now=None)  # a later write keeps the index's TTL too
    keys = sorted(client.keys("gpubot:ledger:*"))
    assert "gpubot:ledger:nodes" in keys and f"gpubot:ledger:{{{lf.NODE}}}" in keys
    assert f"gpubot:ledger:gpu:{{{uuid_of(lf.NODE, 2)}}}" in keys
    for key in keys:
        ttl = client.ttl(key)
        assert 0 < ttl <= 7 * 86400, (key, ttl)


@pytest.mark.parametrize("replaced", [False, True], ids=["flag-now", "card-replaced-30h-ago"])
def test_the_digests_rma_rows_read_the_ledger_and_forget_a_replaced_card(
    tmp_path: Path, client: redis.Redis, replaced: bool
) -> None:
    f = lf.fleet("ledger-digest-remap")
    lf.operator_owned(f)
    until = 30 * 3600 if replaced else 0
    lf.remap_flag(
        f, lf.NODE, 5, "DCGM_FI_DEV_ROW_REMAP_FAILURE", [[-t, 1] for t in range(3 * 86400, until - 1, -300)]
    )
    path = lf.write(f, tmp_path)
    src = open_sources(CFG, scenario=str(path))
    ledger = Ledger(RedisBackend(client), 90)
    digest = with_ledger(CFG, src.cluster, src.telemetry, collect_digest(src.cluster, src.telemetry), ledger)
    rows = [(x.reason, x.node, x.gpu) for x in digest.offenders]
    assert rows == ([] if replaced else [(RMA_ROW_REMAP_FAILURE, lf.NODE, uuid_of(lf.NODE, 5))])


def test_must_gather_keeps_the_imitation_but_not_its_logs_and_its_replay_says_so(tmp_path: Path) -> None:
    f = lf.fleet("ledger-impostor-bundle")
    lf.operator_owned(f)
    f.running_pod("trainer-0", "ml", lf.NODE, 1)
    fake = lf.impostor(f, lf.NODE, "ml", uuid_of(lf.NODE, 3), 79, [300, 200, 100])
    snap, telemetry = build_sources(parse_scenario(f.scenario({"target": None}), "<impostor>"))
    out = tmp_path / "b.tar.gz"
    collect_bundle(snap, telemetry, out, node=lf.NODE)
    with tarfile.open(out, "r:gz") as tar:
        names = [m.name for m in tar.getmembers()]
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert not [n for n in names if n.startswith(f"logs/{fake}/")]
    assert any(fake in s["what"] and "not the operator's pod" in s["why"] for s in manifest["skipped"])
    cluster, tele = build_sources(read_bundle(out))
    codes = [fd.code for layer in walk(cluster, tele, "ml", "trainer-0").layers for fd in layer.findings]
    assert "L2_OPERAND_IMPOSTOR" in codes and "L5_XID" not in codes
