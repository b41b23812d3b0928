"""The ledger and its rules on fleets with histories in real log and series shapes.

Each rule met at its threshold and not met one below it (or outside its window); writes that
are idempotent (two walks and an alert seeing one Xid are one entry) on a real redis-server
and in memory; retention; `gpubot node` and `gpubot ledger export` on these fleets.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.cli.main import main
from bot.ledger.service import alert_event, export_rows, node_report
from bot.ledger.store import Ledger, MemoryBackend, RedisBackend
from bot.ops.config import load_config
from bot.sources.opener import open_sources
from layers.facts.ledgerevents import Event
from layers.ledger import NodeLedger
from layers.ledger_rules import (
    REMAP_PENDING,
    REPEAT_APP_XID,
    REPEAT_FATAL_XID,
    REPEAT_NODE_FAULTS,
    RMA_ROW_REMAP_FAILURE,
    is_fatal_xid,
    rules_with,
)
from tests import ledger_fleets as lf
from tests.incidents.fleets import uuid_of
from tests.services import RedisServer

CFG = load_config({})


@pytest.fixture(params=["memory", "redis"])
def ledger(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[Ledger]:
    if request.param == "memory":
        yield Ledger(MemoryBackend(), 90)
        return
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    yield Ledger(RedisBackend(client), 90)
    client.close()


def report(f: lf.Fleet, tmp_path: Path, ledger: Ledger | None = None, *, record: bool = True) -> NodeLedger:
    path = lf.write(f, tmp_path)
    src = open_sources(CFG, scenario=str(path))
    return node_report(
        CFG, src.cluster, src.telemetry, ledger or Ledger(MemoryBackend(), 90), lf.NODE, record=record
    )


def reasons(rep: NodeLedger, gpu: int | None = None) -> set[str]:
    uuid = uuid_of(lf.NODE, gpu) if gpu is not None else ""
    return {h.reason for h in rep.hits if h.gpu == uuid}


# --- the rules, each at its threshold ----------------------------------------------------------


def test_repeat_fatal_xid_five_times_in_a_day_is_met_four_is_not(tmp_path: Path) -> None:
    assert is_fatal_xid(79)
    met = lf.fleet("ledger-xid79-5")
    for minutes in (30, 200, 400, 700, 1300):  # five within 24 h, hours apart
        lf.plugin_xid(met, lf.NODE, 2, 79, minutes)
    rep = report(met, tmp_path / "met")
    assert REPEAT_FATAL_XID in reasons(rep, 2)
    hit = next(h for h in rep.hits if h.reason == REPEAT_FATAL_XID)
    assert hit.detail.startswith("Xid 79 5× in 24 h (witnessed: 2026-11-28T12:32:00Z, ")  # the entries' times
    assert len(hit.entries) == 5 and hit.since == hit.entries[0].at

    below = lf.fleet("ledger-xid79-4")
    for minutes in (30, 200, 400, 700):
        lf.plugin_xid(below, lf.NODE, 2, 79, minutes)
    assert REPEAT_FATAL_XID not in reasons(report(below, tmp_path / "below"), 2)

    spread = lf.fleet("ledger-xid79-spread")
    for minutes in (30, 400, 800, 1300, 1500):  # five, but over 25 h: no 24 h window holds them
        lf.plugin_xid(spread, lf.NODE, 2, 79, minutes)
    assert REPEAT_FATAL_XID not in reasons(report(spread, tmp_path / "spread"), 2)


def test_repeat_fatal_xid_threshold_is_a_setting(tmp_path: Path) -> None:
    f = lf.fleet("ledger-xid79-3")
    for minutes in (30, 200, 400):
        lf.plugin_xid(f, lf.NODE, 2, 79, minutes)
    cfg = load_config({"GPUBOT_LEDGER_REPEAT_FATAL_XID": "3"})
    src = open_sources(cfg, scenario=str(lf.write(f, tmp_path)))
    rep = node_report(cfg, src.cluster, src.telemetry, Ledger(MemoryBackend(), 90), lf.NODE)
    assert REPEAT_FATAL_XID in reasons(rep, 2)
    assert REPEAT_FATAL_XID not in {r.reason for r in rules_with({}) if r.threshold == 3}


def test_prometheus_window_fills_what_the_bot_did_not_see(tmp_path: Path) -> None:
    # No plugin line at all (the plugin restarted): dcgm-exporter's counter rose by 5 in 24 h.
    f = lf.fleet("ledger-xid-counter")
    f.gpu_series(lf.NODE, "a100", 8)
    lf.xid_counter(f, lf.NODE, 4, 95, [[-86000, 1], [-60000, 2], [-30000, 4], [-3600, 6], [0, 6]])
    rep = report(f, tmp_path)
    hit = next(h for h in rep.hits if h.reason == REPEAT_FATAL_XID)
    assert hit.gpu == uuid_of(lf.NODE, 4) and "Prometheus increase over 24 h" in hit.detail
    four = lf.fleet("ledger-xid-counter-4")
    lf.xid_counter(four, lf.NODE, 4, 95, [[-86000, 1], [-3600, 5], [0, 5]])
    assert REPEAT_FATAL_XID not in reasons(report(four, tmp_path / "four"), 4)


def test_repeat_node_faults_counts_faults_not_cascades(tmp_path: Path) -> None:
    met = lf.fleet("ledger-node-faults")
    # Five faults over six days on three GPUs, each a cascade (Xid 95, an uncontained ECC error, then
    # 64, the page retirement that failed with it, in the same second): both fatal, one fault.
    assert is_fatal_xid(95) and is_fatal_xid(64)
    for gpu, minutes in ((0, 8000), (3, 6000), (5, 4000), (0, 2000), (3, 90)):
        lf.plugin_xid(met, lf.NODE, gpu, 95, minutes, cascade=64)
    rep = report(met, tmp_path / "met")
    hit = next(h for h in rep.hits if h.reason == REPEAT_NODE_FAULTS)
    assert hit.gpu == "" and hit.detail.startswith("5 fatal events in 7 d")
    assert REPEAT_FATAL_XID not in {h.reason for h in rep.hits}  # never 5 on one GPU in a day

    below = lf.fleet("ledger-node-faults-4")
    for gpu, minutes in ((0, 8000), (3, 6000), (5, 4000), (0, 2000)):
        lf.plugin_xid(below, lf.NODE, gpu, 95, minutes, cascade=64)
    assert REPEAT_NODE_FAULTS not in {h.reason for h in report(below, tmp_path / "below").hits}


def test_repeat_node_faults_counts_repairs_in_between() -> None:
    now = 1_800_000_000.0
    uuid = "GPU-aaaa"
    events = []
    for i in range(5):
        t = now - 86400 * (5 - i)
        events.append(Event("n1", "xid", t, gpu=uuid, xid=79, source="device-plugin"))
        events.append(Event("n1", "uncordon", t + 3600, source="gpubot", actor="U1"))
    from layers.ledger_rules import evaluate

    hit = next(h for h in evaluate(events, now) if h.reason == REPEAT_NODE_FAULTS)
    assert "4 repair(s) in between" in hit.detail
    # Two faults a minute apart with an uncordon between them are two faults.
    close = [
        Event("n1", "xid", now - 300, gpu=uuid, xid=79),
        Event("n1", "uncordon", now - 250),
        Event("n1", "xid", now - 200, gpu="GPU-bbbb", xid=79),
    ]
    assert not [
        h for h in evaluate(close, now, rules_with({REPEAT_NODE_FAULTS: 3})) if h.reason == REPEAT_NODE_FAULTS
    ]
    assert [
        h for h in evaluate(close, now, rules_with({REPEAT_NODE_FAULTS: 2})) if h.reason == REPEAT_NODE_FAULTS
    ]


def test_repeat_app_xid_13_then_31_on_one_gpu(tmp_path: Path) -> None:
    # The plugin ignores 13 and 31 ("Skipping event"): DCGM's last-Xid gauge is the witness.
    met = lf.fleet("ledger-app-xid")
    lf.last_xid(met, lf.NODE, 6, [[-90000, 0], [-30000, 0], [-29700, 13], [-7200, 13], [-6900, 31], [0, 31]])
    rep = report(met, tmp_path / "met")
    assert REPEAT_APP_XID in reasons(rep, 6)
    once = lf.fleet("ledger-app-xid-once")
    lf.last_xid(once, lf.NODE, 6, [[-90000, 0], [-30000, 0], [-29700, 13], [0, 13]])
    assert REPEAT_APP_XID not in reasons(report(once, tmp_path / "once"), 6)
    two_gpus = lf.fleet("ledger-app-xid-two-gpus")
    lf.last_xid(two_gpus, lf.NODE, 6, [[-30000, 0], [-29700, 13], [0, 13]])
    lf.last_xid(two_gpus, lf.NODE, 7, [[-30000, 0], [-20000, 31], [0, 31]])
    assert not {REPEAT_APP_XID} & {h.reason for h in report(two_gpus, tmp_path / "two").hits}


def test_rma_on_the_row_remap_failure_flag_and_remap_pending(tmp_path: Path) -> None:
    f = lf.fleet("ledger-rma")
    f.gpu_series(lf.NODE, "a100", 8)
    lf.remap_flag(
        f, lf.NODE, 3, "DCGM_FI_DEV_ROW_REMAP_FAILURE", [[-90000, 0], [-40000, 0], [-36000, 1], [0, 1]]
    )
    lf.remap_flag(f, lf.NODE, 5, "DCGM_FI_DEV_ROW_REMAP_PENDING", [[-7200, 0], [-3600, 1], [0, 1]])
    lf.remap_flag(f, lf.NODE, 1, "DCGM_FI_DEV_ROW_REMAP_FAILURE", [[-90000, 0], [0, 0]])
    rep = report(f, tmp_path)
    assert RMA_ROW_REMAP_FAILURE in reasons(rep, 3)
    assert REMAP_PENDING in reasons(rep, 5)
    assert not reasons(rep, 1)
    gpus = {g["index"]: g for g in rep.to_dict()["gpus"]}
    assert gpus[3]["rules"][0]["reason"] == RMA_ROW_REMAP_FAILURE and gpus[3]["uuid"] == uuid_of(lf.NODE, 3)


def test_a_healthy_node_meets_no_rule(tmp_path: Path) -> None:
    f = lf.fleet("ledger-healthy")
    f.gpu_series(lf.NODE, "a100", 8)
    rep = report(f, tmp_path)
    assert rep.hits == () and len(rep.to_dict()["gpus"]) == 8


# --- the store: idempotent, retained, one slot per node --------------------------------------


def test_two_walks_and_an_alert_are_one_entry(tmp_path: Path, ledger: Ledger) -> None:
    f = lf.fleet("ledger-idempotent")
    lf.plugin_xid(f, lf.NODE, 2, 79, 45)
    first = report(f, tmp_path / "1", ledger)
    second = report(f, tmp_path / "2", ledger)
    # Alertmanager's startsAt lands a few minutes after the plugin's line.
    starts = first.events[0].at + 150
    alert = alert_event(
        {"alertname": "GPUXidError", "UUID": uuid_of(lf.NODE, 2), "xid": "79"}, starts, lf.NODE
    )
    assert alert is not None
    assert ledger.record(lf.NODE, [alert], now=starts) == 0
    stored, _ = ledger.read(lf.NODE, now=starts)
    xids = [e for e in stored if e.kind == "xid"]
    assert len(xids) == 1 and xids[0].witnesses == ("device-plugin", "alert")
    assert len(first.events) == len(second.events)
    # A different Xid a minute later is its own entry.
    other = Event(lf.NODE, "xid", starts + 60, gpu=uuid_of(lf.NODE, 2), xid=94, source="alert")
    assert ledger.record(lf.NODE, [other], now=starts) == 1


def test_retention_drops_old_entries(ledger: Ledger) -> None:
    now = 1_800_000_000.0
    days = 86400
    old = Event("gpu-9", "xid", now - 101 * days, gpu="GPU-1", xid=48, source="dcgm")
    kept = Event("gpu-9", "xid", now - 10 * days, gpu="GPU-1", xid=48, source="dcgm")
    assert ledger.record("gpu-9", [old, kept], now=now - 10 * days) == 1  # the old one is past 90 days
    assert [e.at for e in ledger.read("gpu-9", now=now)[0]] == [kept.at]
    # Ninety-one days on, the kept one is gone as well, on read and on the next write.
    assert ledger.read("gpu-9", now=now + 81 * days)[0] == []
    ledger.record("gpu-9", [Event("gpu-9", "cordon", now + 81 * days, actor="U1")], now=now + 81 * days)
    assert [e.kind for e in ledger.read("gpu-9", now=now + 81 * days)[0]] == ["cordon"]


def test_redis_layout_one_hash_per_node_with_its_hash_tag(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    led = Ledger(RedisBackend(client), 90)
    led.record("gpu-7", [Event("gpu-7", "xid", 1_800_000_000.0, gpu="GPU-1", xid=79)], now=1_800_000_000.0)
    keys = sorted(client.keys("gpubot:ledger:*"))
    # The node's hash, the node index and the GPU's index (the card's nodes: the ledger follows it).
    assert keys == ["gpubot:ledger:gpu:{GPU-1}", "gpubot:ledger:nodes", "gpubot:ledger:{gpu-7}"]
    for key in keys:  # every key expires with the retention, the indexes too (the node index had no TTL)
        ttl = client.pttl(key)
        assert 0 < ttl <= 90 * 86400 * 1000, key
    assert led.nodes() == ["gpu-7"]
    assert led.backend.gpu_nodes("GPU-1") == ["gpu-7"]


def test_concurrent_writers_of_one_event_write_it_once(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushdb()
    now = 1_800_000_000.0
    added: list[int] = []

    def write(i: int) -> None:
        led = Ledger(RedisBackend(redis.Redis.from_url(redis_server.url, decode_responses=True)), 90)
        ev = Event("gpu-3", "xid", now + i, gpu="GPU-1", xid=48, source=f"walk-{i}")
        added.append(led.record("gpu-3", [ev], now=now))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stored, _ = Ledger(RedisBackend(client), 90).read("gpu-3", now=now)
    assert sum(added) == 1 and len(stored) == 1 and len(stored[0].witnesses) == 8


def test_store_down_is_a_note_not_a_failure(tmp_path: Path) -> None:
    f = lf.fleet("ledger-store-down")
    lf.plugin_xid(f, lf.NODE, 2, 79, 45)
    dead = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    rep = report(f, tmp_path, Ledger(RedisBackend(dead), 90))
    assert rep.problems and "the ledger's store" in rep.problems[0]
    assert [e.xid for e in rep.events if e.kind == "xid"] == [79]


# --- the CLI ---------------------------------------------------------------------------------


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_gpubot_node_json_has_the_spec_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = lf.fleet("ledger-cli")
    f.gpu_series(lf.NODE, "a100", 8)
    for minutes in (30, 200, 400, 700, 1300):
        lf.plugin_xid(f, lf.NODE, 2, 79, minutes)
    path = lf.write(f, tmp_path)
    code, out, err = _run(capsys, "node", lf.NODE, "--scenario", str(path), "--format", "json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    assert {"node", "owner", "gpus", "rules"} <= set(doc)
    gpu = next(g for g in doc["gpus"] if g["index"] == 2)
    assert set(gpu) >= {"uuid", "serial", "index", "events", "rules"}
    assert {"at", "kind", "xid", "source", "detail"} <= set(gpu["events"][0])
    assert {e["kind"] for e in gpu["events"]} <= {"xid", "unhealthy"}
    assert gpu["rules"][0]["reason"] == REPEAT_FATAL_XID
    assert doc["rules"][0]["reason"] == REPEAT_NODE_FAULTS
    code, out, _ = _run(capsys, "node", lf.NODE, "--scenario", str(path), "--days", "1")
    assert code == 0 and "RULE REPEAT_FATAL_XID" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["node", "Bad_Node", "--scenario", "xid79-fell-off-bus"],
        ["node", "gpu-node-1", "--days", "0"],
        ["ledger"],
    ],
)
def test_gpubot_node_bad_input_is_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) if "--days" in argv else _nothing():
        code, _, err = _run(capsys, *argv)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False


def test_ledger_export_csv_on_a_bundled_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(
        capsys, "ledger", "export", "--format", "csv", "--scenario", "xid48-dbe-row-remap-failure"
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    rma = [r for r in rows if r["kind"] == "row_remap_failure"]
    assert rma and rma[0]["node"] == "dgx-a100-07" and "RMA_ROW_REMAP_FAILURE" in rma[0]["rules_met"]
    assert rma[0]["gpu_uuid"] == "GPU-e3dbf294-2783-f38b-4274-5bc836df5be1" and rma[0]["gpu_index"] == "3"


def test_export_quotes_cells_a_spreadsheet_would_run() -> None:
    ev = Event("n", "cordon", 1_800_000_000.0, source="gpubot", actor="U1", detail='=HYPERLINK("x")')
    rep = NodeLedger("n", None, (ev,), {}, (), 30, 1_800_000_000.0)
    rows = list(csv.reader(io.StringIO(export_rows([rep]))))
    assert rows[1][10].startswith("'=")


def test_gpubot_node_on_every_bundled_scenario_gpu_node(capsys: pytest.CaptureFixture[str]) -> None:
    from bot.sources.opener import bundled_scenarios
    from bot.sources.scenario import load_scenario

    ran = 0
    for path in bundled_scenarios()[::4]:
        sc = load_scenario(path)
        nodes = [o["metadata"]["name"] for o in sc.objects if o.get("kind") == "Node"]
        code, out, err = _run(capsys, "node", nodes[-1], "--scenario", str(path), "--format", "json")
        assert code == 0, (path.name, err)
        assert json.loads(out)["node"] == nodes[-1]
        ran += 1
    assert ran >= 8


def test_gpubot_node_reads_a_must_gather_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A bundle gives the ledger what its objects, logs and series show, as the scenario did."""
    from bot.actions.bundle_writer import collect_bundle
    from bot.sources.kube import KubeCluster
    from bot.sources.scenario import build_sources
    from tests.fakes.kube_api import serve

    f = lf.fleet("ledger-bundle")
    f.gpu_series(lf.NODE, "a100", 8)
    for minutes in (30, 200, 400, 700, 1300):
        lf.plugin_xid(f, lf.NODE, 2, 79, minutes)
    from bot.sources.scenario import load_scenario

    snap, telemetry = build_sources(load_scenario(lf.write(f, tmp_path)))
    out = tmp_path / "b.tar.gz"
    with serve(snap) as api:
        collect_bundle(KubeCluster.from_config(api.kubeconfig), telemetry, out, node=lf.NODE)
    code, text, err = _run(capsys, "node", lf.NODE, "--bundle", str(out), "--format", "json")
    assert code == 0, err
    doc = json.loads(text)
    gpu = next(g for g in doc["gpus"] if g["uuid"] == uuid_of(lf.NODE, 2))
    assert [e["xid"] for e in gpu["events"] if e["kind"] == "xid"] == [79] * 5
    assert gpu["rules"][0]["reason"] == REPEAT_FATAL_XID


def test_an_xid_alert_is_the_walks_entry_seen_again(tmp_path: Path, ledger: Ledger) -> None:
    """Alertmanager's webhook (payload version 4) through the receiver the bot wraps around its
    alert service: the incident goes first, the ledger gets the alert as one more witness."""
    from bot.slack.ledger_alerts import LedgerReceiver
    from handlers.alert_payload import AlertBatch, parse_payload

    f = lf.fleet("ledger-alert")
    lf.plugin_xid(f, lf.NODE, 2, 79, 45)
    report(f, tmp_path, ledger)  # a walk saw the plugin's line 45 minutes ago
    payload = {
        "version": "4",
        "status": "firing",
        "receiver": "gpubot",
        "groupKey": '{}:{alertname="GPUXidError"}',
        "externalURL": "http://alertmanager:9093",
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "GPUXidError",
                    "Hostname": lf.NODE,
                    "UUID": uuid_of(lf.NODE, 2),
                    "gpu": "2",
                    "xid": "79",
                },
                "annotations": {},
                "startsAt": "2026-11-29T09:29:30Z",  # 2.5 minutes after the plugin's line
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": "a1b2c3d4e5f60718",
            },
            {
                "status": "firing",
                "labels": {"alertname": "GPUHighTemp", "Hostname": lf.NODE},
                "annotations": {},
                "startsAt": "2026-11-29T09:29:30Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "fingerprint": "b1b2c3d4e5f60718",
            },
        ],
    }
    received: list[AlertBatch] = []

    class Inner:
        def receive(self, batch: AlertBatch) -> list[str]:
            received.append(batch)
            return []

        def catch_up(self, key: str) -> None:
            pass

    LedgerReceiver(Inner(), ledger, lambda what, fn, *args: fn(*args)).receive(
        parse_payload(json.dumps(payload))
    )
    assert len(received) == 1
    stored, _ = ledger.read(lf.NODE, now=lf.NOW.timestamp())
    (xid,) = [e for e in stored if e.kind == "xid"]
    assert xid.witnesses == ("device-plugin", "alert") and xid.xid == 79


def test_cordons_say_who(tmp_path: Path) -> None:
    f = lf.fleet("ledger-cordons")
    node = f.node(lf.NODE)
    node["spec"]["unschedulable"] = True
    node["metadata"].setdefault("annotations", {}).update(
        {
            "gpubot/cordoned-by": "U04K2M9QX7A",
            "gpubot/cordon-reason": "Xid 79 on GPU 2",
            "gpubot/cordoned-at": "2026-11-29T09:30:00Z",
        }
    )
    other = f.node("a100-train-04")
    other["spec"]["unschedulable"] = True
    other["spec"]["taints"] = [
        {
            "key": "node.kubernetes.io/unschedulable",
            "effect": "NoSchedule",
            "timeAdded": "2026-11-28T22:00:00Z",
        }
    ]
    path = lf.write(f, tmp_path)
    src = open_sources(CFG, scenario=str(path))
    rep = node_report(CFG, src.cluster, src.telemetry, Ledger(MemoryBackend(), 90), lf.NODE)
    (ev,) = rep.to_dict()["events"]
    assert (ev["kind"], ev["actor"], ev["detail"], ev["at"]) == (
        "cordon",
        "U04K2M9QX7A",
        "Xid 79 on GPU 2",
        "2026-11-29T09:30:00Z",
    )
    rep2 = node_report(CFG, src.cluster, src.telemetry, Ledger(MemoryBackend(), 90), "a100-train-04")
    (ev2,) = rep2.to_dict()["events"]
    assert (ev2["kind"], ev2["source"], ev2["at"]) == ("cordon", "kubernetes", "2026-11-28T22:00:00Z")
