"""Diagnostics that say what they tested (issue 26): a node whose plugin withdrew a GPU after Xid 79
(capacity 8, allocatable 7), a node that advertises only `nvidia.com/gpu.shared`, level 3's second
confirmation held by gpubot (a crafted `diag|…|3|2` refused, through the real Bolt app and through
the gateway and an agent), and the refusals that need no cluster read made before any (issue 28)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.actions.diag import plan, record, run
from bot.ledger.store import Ledger, MemoryBackend
from bot.slack.ledger_slack import CONFIRMATION_CLAIMED
from bot.sources.scenario import build_sources, load_scenario
from handlers.ledger_blocks import DiagValue, diag_result_message
from layers.diaggpus import discovered, gpu_ask
from layers.diagjob import confirmation
from tests import ledger_fleets as lf
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.incidents.fleets import uuid_of
from tests.slack_harness import OPERATOR, action_body, dispatch, inprocess_bot, told
from tests.test_diag import IMAGE, NS, _driven, _kube, fixture, listing
from tests.test_slack_ledger import _buttons, _click, _kubelet, _texts

UUIDS = [uuid_of(lf.NODE, i) for i in range(8)]
SICK = 3


def lost_gpu_fleet(tmp_path: Path, shared: bool = False) -> Path:
    """The ledger fleet's a100-train-03, cordoned, 8 GPUs, GPU 3 withdrawn by the plugin after Xid 79."""
    f = lf.fleet("diag-lost-gpu")
    f.gpu_series(lf.NODE, "a100", 8)
    node = f.node(lf.NODE)
    node["spec"]["unschedulable"] = True
    node["spec"]["taints"] = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    if shared:
        # Time-slicing with renameByDefault: only `nvidia.com/gpu.shared`, 4 replicas per GPU.
        for part in ("capacity", "allocatable"):
            node["status"][part].pop("nvidia.com/gpu", None)
            node["status"][part]["nvidia.com/gpu.shared"] = "32"
        node["metadata"]["labels"].update(
            {
                "nvidia.com/gpu.replicas": "4",
                "nvidia.com/gpu.sharing-strategy": "time-slicing",
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED",
                "nvidia.com/gpu.count": "8",
            }
        )
    f.sick_lost_gpu(lf.NODE, 79, SICK)
    return lf.write(f, tmp_path)


def seven_gpus(name: str, gpus: int) -> str:
    """A fixture's `dcgmi diag -j` widened to `gpus` GPUs (each test's entity-0 result copied)."""
    doc = json.loads(fixture(name))
    for cat in doc["DCGM Diagnostic"]["test_categories"]:
        for test in cat["tests"]:
            results = [r for r in test.get("results") or [] if r.get("entity_id") == 0]
            if results:
                test["results"] = [dict(copy.deepcopy(results[0]), entity_id=i) for i in range(gpus)]
    group = doc["entity_groups"][0]
    group["entities"] = [
        dict(group["entities"][0], entity_id=i, serial_num=f"16520220{i:05d}") for i in range(gpus)
    ]
    return json.dumps(doc)


@pytest.fixture
def lost(tmp_path: Path) -> Iterator[tuple[FakeKubeAPI, Any]]:
    snap, telemetry = build_sources(load_scenario(lost_gpu_fleet(tmp_path)))
    with serve(snap) as api:
        yield api, telemetry


HEALTHY = [u for i, u in enumerate(UUIDS) if i != SICK]
JOB_LOG = listing(HEALTHY) + seven_gpus("r1_pass.json", 7) + "\ngpubot-dcgmi-exit=0\n"


def test_the_withdrawn_gpu_is_named_before_and_after_and_never_passed(
    lost: tuple[FakeKubeAPI, Any],
) -> None:
    api, telemetry = lost
    k, jobs = _kube(api)
    p = plan(
        k, jobs, lf.NODE, 2, namespace=NS, image=IMAGE, requested_by="U0OPS", confirmed=1, telemetry=telemetry
    )
    limits = p.manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "7"}  # the allocatable count: the withdrawn one cannot be requested
    said = confirmation(lf.NODE, 2, p.ask, p.hostengine)
    tested = ", ".join(f"{i} ({u})" for i, u in enumerate(UUIDS) if i != SICK)
    assert f"Tested: 7 of the node's 8 GPU(s): GPU {tested}." in said
    assert (
        f"Not tested: 1 GPU(s) the device plugin withdrew (GPU 3 ({UUIDS[SICK]}): the device plugin marked it "
        "unhealthy (Xid 79)); they cannot be requested. A node with untested GPUs is never recorded as passed."
    ) in said
    assert "all 7" not in said and "every GPU" not in said
    name = p.manifest["metadata"]["name"]
    steps = [lambda: api.jobs.start(NS, name), lambda: api.jobs.succeed(NS, name, JOB_LOG)]
    out = run(k, jobs, p, poll_s=0, sleep=_driven(steps))
    # DCGM's entities are the container's numbering: the Job's own listing names them.
    assert out.tested == dict(enumerate(HEALTHY))
    assert out.untested == [f"GPU 3 ({UUIDS[SICK]})"]
    assert out.report is not None and out.report.verdict == "Pass" and out.verdict == "Incomplete"
    ledger = Ledger(MemoryBackend(), 90)
    record(ledger, out, "U0OPS", telemetry.now())
    events, _gpus = ledger.read(lf.NODE, now=telemetry.now())
    diag = [e for e in events if e.kind == "diag"]
    assert sorted(e.gpu for e in diag) == sorted(HEALTHY)  # one result per GPU tested, none for the node
    assert all(e.detail == "level 2: Pass" for e in diag)
    msg = diag_result_message(lf.NODE, 2, name, out.report, None, out.tested, [], out.untested)
    body = json.dumps(msg.blocks)
    assert msg.text == f"DCGM diagnostics on {lf.NODE}: Incomplete"
    assert "1 not tested: not a pass for the node" in body and f"Not tested: GPU 3 ({UUIDS[SICK]})" in body
    assert f"GPU 0 ({UUIDS[0]})" in body and f"GPU 6 ({UUIDS[7]})" in body
    assert "Run level 3" not in body  # the long run is offered after a pass only


def test_slack_says_the_untested_gpu_before_the_job_and_in_the_result(
    lost: tuple[FakeKubeAPI, Any],
) -> None:
    from tests.fakes.slack_api import serve_slack

    api, telemetry = lost
    with serve_slack() as slack:
        buttons, ledger = _buttons(slack, api, telemetry)
        player = _kubelet(api, JOB_LOG)
        assert buttons.handle(_click(DiagValue(lf.NODE, 2, 1).encode())) == "done"
        player.join()
        started, result = _texts(slack)
    assert "a Job takes the 7 allocatable GPU(s)" in started and f"GPU 3 ({UUIDS[SICK]})" in started
    assert "never recorded as passed" in started
    assert "Incomplete" in result and f"Not tested: GPU 3 ({UUIDS[SICK]})" in result
    events, _ = ledger.read(lf.NODE, now=telemetry.now())
    assert UUIDS[SICK] not in {e.gpu for e in events if e.kind == "diag"}


def test_standalone_host_engine_numbers_every_gpu_of_the_node() -> None:
    node = {
        "metadata": {"name": "n"},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"}},
    }
    marks = {UUIDS[SICK]: (79, "line")}
    ask = gpu_ask(node, marks, dict(enumerate(UUIDS)))
    assert ask is not None and ask.untested == 1 and ask.named_exactly
    from layers.diaggpus import tested_uuids, untested_after

    # No listing read: the operator's host engine numbers the node's GPUs as dcgm-exporter does.
    tested = tested_uuids(range(8), {}, ask, standalone=True)
    assert tested == dict(enumerate(UUIDS)) and untested_after(ask, tested) == []
    # In the Job's own host engine without a listing, the numbering is the container's: unknown.
    tested = tested_uuids(range(7), {}, ask, standalone=False)
    assert set(tested.values()) == {""} and untested_after(ask, tested) == [f"GPU 3 ({UUIDS[SICK]})"]


def test_which_gpu_is_withdrawn_unknown_is_said() -> None:
    node = {
        "metadata": {"name": "n"},
        "status": {"capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"}},
    }
    ask = gpu_ask(node, {}, {})
    assert ask is not None
    assert ask.untested_text() == (
        "Not tested: 1 GPU(s) the device plugin withdrew; which is not known (no unhealthy mark read from "
        "the plugin's log or a health agent); they cannot be requested."
    )
    # NVSentinel's condition names the GPU where the plugin's log does not.
    node["status"]["conditions"] = [
        {
            "type": "SysLogsXIDError",
            "status": "True",
            "reason": "SysLogsXIDErrorIsNotHealthy",
            "message": f"ErrorCode:79 PCI:0001:00:00 GPU_UUID:{UUIDS[SICK]} kernel:xid Recommended Action=NODE_REBOOT;",
        }
    ]
    ask = gpu_ask(node, {}, dict(enumerate(UUIDS)))
    assert ask is not None and ask.named_exactly
    assert f"GPU 3 ({UUIDS[SICK]}): NVSentinel (SysLogsXIDError)" in ask.untested_text()


def test_a_shared_node_is_asked_for_by_its_name(tmp_path: Path) -> None:
    snap, telemetry = build_sources(load_scenario(lost_gpu_fleet(tmp_path, shared=True)))
    p = plan(
        snap, None, lf.NODE, 1, namespace=NS, image=IMAGE, requested_by="U", confirmed=1, telemetry=telemetry
    )
    limits = p.manifest["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu.shared": "28"}  # every allocatable replica: 7 GPUs x 4
    said = confirmation(lf.NODE, 1, p.ask, p.hostengine)
    assert "a Job takes the 7 allocatable GPU(s)" in said
    assert "(28 units of nvidia.com/gpu.shared: 4 per GPU)" in said and f"GPU 3 ({UUIDS[SICK]})" in said
    assert "unhealthy" not in confirmation(lf.NODE, 1, p.ask, p.hostengine).split("Not tested")[0]


def test_a_node_with_only_dra_gpus_is_refused_saying_so() -> None:
    from layers.diagjob import refusal

    node = {
        "metadata": {"name": "dra-0"},
        "status": {"capacity": {"cpu": "64"}, "allocatable": {"cpu": "64"}},
    }
    assert "published only through DRA" in (refusal(node, [], 1, confirmed=1) or "")


def test_discovery_listing_is_read_and_cut_from_the_json() -> None:
    from layers.diaggpus import without_discovery
    from layers.facts.dcgmdiag import read_job_log

    assert discovered(JOB_LOG) == dict(enumerate(HEALTHY))
    assert read_job_log(without_discovery(JOB_LOG)).verdict == "Pass"
    assert discovered("gpubot-gpus-begin\n| 0 | Device UUID: GPU-x\n") == {}  # no end mark: nothing


# --- level 3's second confirmation, and refusals before reads ------------------------------------


def test_a_crafted_second_confirmation_is_refused_before_any_read(lost: tuple[FakeKubeAPI, Any]) -> None:
    from tests.fakes.slack_api import serve_slack

    api, telemetry = lost
    with serve_slack() as slack:
        buttons, _ = _buttons(slack, api, telemetry)
        before = len(api.requests)
        assert buttons.handle(_click(f"diag|{lf.NODE}|3|2")) == "refused"
        assert slack.calls_to("chat.postEphemeral")[-1].params["text"] == CONFIRMATION_CLAIMED
        assert buttons.handle(_click(f"diag|{lf.NODE}|3|t.{'0' * 32}")) == "refused"  # a token never given
        assert buttons.handle(_click(f"diag|{lf.NODE}|4|2")) == "refused"
        assert "level 4 is not offered" in slack.calls_to("chat.postEphemeral")[-1].params["text"]
        assert buttons.handle(_click(f"diag|{lf.NODE}|9|1")) == "refused"
        assert buttons.handle(_click(f"diag|{lf.NODE}|x|1")) == "ignored"
        assert buttons.handle(_click(f"diag|{lf.NODE}|4|2", user="U0SOMEONE")) == "refused"
        assert len(api.requests) == before  # not one API request, Jobs or else
        assert not api.jobs.created


def test_off_is_refused_before_any_read(lost: tuple[FakeKubeAPI, Any]) -> None:
    from tests.fakes.slack_api import serve_slack

    api, telemetry = lost
    with serve_slack() as slack:
        off, _ = _buttons(slack, api, telemetry, enabled=False)
        before = len(api.requests)
        assert off.handle(_click(f"diag|{lf.NODE}|4|2")) == "off"
        assert len(api.requests) == before


def test_bolt_refuses_a_crafted_second_confirmation(tmp_path: Path) -> None:
    """Through the real Bolt app (signed requests, the registered listener), on a scenario."""
    from tests.fakes.slack_api import serve_slack
    from tests.slack_harness import wait_for

    path = lost_gpu_fleet(tmp_path)
    with serve_slack() as slack:
        bot = inprocess_bot(slack.url, path, GPUBOT_DIAG_ENABLED="true")
        try:
            dispatch(bot, action_body("run_diagnostics", f"diag|{lf.NODE}|3|2", user=OPERATOR))
            assert wait_for("the refusal", lambda: told(slack, OPERATOR)) == [CONFIRMATION_CLAIMED]
            # The real first click gets gpubot's own confirmation; its button is what runs level 3.
            dispatch(bot, action_body("run_diagnostics", f"diag|{lf.NODE}|3|1", user=OPERATOR))
            wait_for("the confirmation", lambda: len(told(slack, OPERATOR)) == 2)
            eph = slack.calls_to("chat.postEphemeral")[-1]
            blocks = eph.params["blocks"]
            blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
            value = blocks[-1]["elements"][0]["value"]
            assert value.startswith(f"diag|{lf.NODE}|3|t.")
            assert f"Not tested: 1 GPU(s) the device plugin withdrew (GPU 3 ({UUIDS[SICK]})" in json.dumps(
                blocks
            )
            dispatch(bot, action_body("run_diagnostics", value, user=OPERATOR))
            # Confirmed: the scenario cannot run a Job, which is the next thing said.
            wait_for("the answer", lambda: len(told(slack, OPERATOR)) == 3)
            assert (
                told(slack, OPERATOR)[-1]
                == ":no_entry: this bot reads a scenario or bundle: it cannot run a Job"
            )
        finally:
            bot.shutdown()


def test_through_the_gateway_and_an_agent_on_a_live_api(tmp_path: Path) -> None:
    """The click goes gateway → Redis stream → the node's agent (its sources a live API server): a
    crafted second confirmation and a level 4 are refused there without one Jobs read; the real
    first click gets gpubot's confirmation, qualified with the cluster, which the agent then honours."""
    from tests.cluster_harness import inprocess_agent, inprocess_gateway
    from tests.fakes.slack_api import serve_slack
    from tests.services import RedisServer
    from tests.slack_harness import wait_for

    snap, _telemetry = build_sources(load_scenario(lost_gpu_fleet(tmp_path)))
    with serve_slack() as slack, RedisServer() as redis_at, serve(snap) as api:
        gateway = inprocess_gateway(slack.url, redis_at)
        try:
            with inprocess_agent(
                slack.url, redis_at, "east", kubeconfig=api.kubeconfig, GPUBOT_DIAG_ENABLED="true"
            ):
                wait_for("registered", lambda: len(gateway.streams.clusters()) == 1)
                jobs_reads = api.count("/jobs")
                kw = {"channel": "C0NODE", "message_ts": "1795000001.000100"}
                for value in (f"diag|east/{lf.NODE}|3|2", f"diag|east/{lf.NODE}|4|2"):
                    dispatch(gateway, action_body("run_diagnostics", value, user=OPERATOR, **kw))
                said = wait_for(
                    "two refusals", lambda: told(slack, OPERATOR) if len(told(slack, OPERATOR)) == 2 else None
                )
                claimed, level4 = sorted(said, key=lambda t: t != CONFIRMATION_CLAIMED)  # any order
                assert claimed == CONFIRMATION_CLAIMED
                assert level4.startswith(
                    f":no_entry: diagnostics on *{lf.NODE}* refused: level 4 is not offered"
                )
                assert api.count("/jobs") == jobs_reads == 0 and not api.jobs.created
                dispatch(
                    gateway, action_body("run_diagnostics", f"diag|east/{lf.NODE}|3|1", user=OPERATOR, **kw)
                )
                wait_for("the confirmation", lambda: len(told(slack, OPERATOR)) == 3)
                blocks = slack.calls_to("chat.postEphemeral")[-1].params["blocks"]
                blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
                value = blocks[-1]["elements"][0]["value"]
                assert value.startswith(f"diag|east/{lf.NODE}|3|t.")
                # gpubot's own confirmation says what level 3 would test, read from the cluster.
                text = json.dumps(blocks)
                assert (
                    f"{UUIDS[SICK]}: the device plugin marked it unhealthy (Xid 79)" in text
                )  # no Prometheus: no index
                assert "never recorded as passed" in text
                # Confirmed: the agent goes on to plan the Job (its first Jobs read is the node's list).
                dispatch(gateway, action_body("run_diagnostics", value, user=OPERATOR, **kw))
                wait_for("the plan's reads", lambda: api.count("/jobs") > 0)
        finally:
            gateway.shutdown(wait=False)
