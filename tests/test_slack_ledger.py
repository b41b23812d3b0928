"""The ledger and the diagnostics in Slack, through the fake Slack Web API (real slack_sdk Poster)
and the fake Kubernetes API (real client): the message of a failed memory test on one GPU,
the operator and second-confirmation gates, `/gpu node` with its picture, the digest's section."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.ledger.store import Ledger, MemoryBackend
from bot.ops.config import load_config
from bot.slack.ledger_slack import CONFIRMATION_UNKNOWN, DiagButtons, post_node_ledger
from bot.slack.post import Poster
from bot.slack.state import MemoryState
from bot.sources.kube import KubeCluster
from bot.sources.opener import Sources, open_sources
from bot.sources.scenario import build_sources, load_scenario
from handlers.clicks import Click
from handlers.commands import CommandError, Node, parse_command
from handlers.digest import digest_message
from handlers.ledger_blocks import RUN_DIAGNOSTICS, DiagValue
from handlers.operators import Operators
from handlers.ports import StateStore
from layers.digest import collect_digest
from tests import ledger_fleets as lf
from tests.fakes.kube_api import FakeKubeAPI, serve
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.incidents.fleets import uuid_of
from tests.test_diag import NS, build_fleet, job_log

TOKEN = "xoxb-0000-test-token"
OPERATOR = "U0OPERATOR"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[FakeKubeAPI, Any]]:
    path = build_fleet(tmp_path)
    snap, telemetry = build_sources(load_scenario(path))
    with serve(snap) as api:
        yield api, telemetry


def _buttons(
    slack: FakeSlack, api: FakeKubeAPI, telemetry: Any, *, enabled: bool = True
) -> tuple[DiagButtons, Ledger]:
    cfg = load_config({"GPUBOT_DIAG_ENABLED": "true" if enabled else "false", "GPUBOT_OPERATORS": OPERATOR})
    cluster = KubeCluster.from_config(api.kubeconfig)
    sources = Sources(cluster=cluster, writer=cluster, telemetry=telemetry, description="fake")
    ledger = Ledger(MemoryBackend(), 90)
    state: StateStore = MemoryState()
    poster = Poster(TOKEN, slack.url, backoff_s=0.01)
    ops = Operators([OPERATOR, "U0OTHEROP"], [], lambda g: [])
    return DiagButtons(cfg, sources, ledger, poster, ops, state, NS, poll_s=0.02), ledger


def _click(value: str, user: str = OPERATOR) -> Click:
    return Click(
        action_id=RUN_DIAGNOSTICS,
        value=value,
        user=user,
        channel="C0INCIDENT",
        block_id="b",
        message_ts="1795000000.000100",
        thread_ts=None,
    )


def _kubelet(api: FakeKubeAPI, log: str) -> threading.Thread:
    """Plays scheduler, kubelet and Job controller: once the Job exists, run its pod to the end."""

    def play() -> None:
        deadline = time.monotonic() + 20
        while not api.jobs.created and time.monotonic() < deadline:
            time.sleep(0.01)
        name = api.jobs.created[0]["metadata"]["name"]
        api.jobs.start(NS, name)
        time.sleep(0.05)
        api.jobs.succeed(NS, name, log)

    t = threading.Thread(target=play, daemon=True)
    t.start()
    return t


def _texts(slack: FakeSlack) -> list[str]:
    out = []
    for call in slack.calls_to("chat.postMessage"):
        blocks = call.params.get("blocks")
        blocks = json.loads(blocks) if isinstance(blocks, str) else blocks or []
        out.append(call.params.get("text", "") + "\n" + json.dumps(blocks))
    return out


def test_failed_memory_test_on_one_gpu_is_one_message_with_the_json_attached(
    slack: FakeSlack, kube: tuple[FakeKubeAPI, Any]
) -> None:
    api, telemetry = kube
    buttons, ledger = _buttons(slack, api, telemetry)
    player = _kubelet(api, job_log("r2_memory_fail_gpu3.json", 226))
    assert buttons.handle(_click(DiagValue(lf.NODE, 2, 1).encode())) == "done"
    player.join()
    started, result = slack.calls_to("chat.postMessage")
    assert "started DCGM diagnostics level 2 on *a100-train-03*" in started.params["text"]
    assert "second host engine" in started.params["text"]  # the embedded default, said before it runs
    assert result.params["thread_ts"] == "1795000000.000100"
    blocks = result.params["blocks"]
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    body = json.dumps(blocks)
    uuid = uuid_of(lf.NODE, 3)
    assert (
        f"Fail: memory (Hardware) on GPU 3 ({uuid}): Found 6 faulty memory elements on GPU 3 (error_id 52)"
        in body
    )
    assert "the rest: 47 pass" in body
    assert body.count("Fail: ") == 1  # one line: the one failed test on the one GPU
    (get_url,) = slack.calls_to("files.getUploadURLExternal")
    assert get_url.params["filename"] == "dcgmi-diag-a100-train-03-r2.json"
    assert len(slack.calls_to("files.completeUploadExternal")) == 1
    (upload,) = [c for c in slack.calls if c.method == "upload"]
    assert json.loads(upload.body)["DCGM Diagnostic"]["test_categories"][2]["tests"][0]["name"] == "memory"
    events, gpus = ledger.read(lf.NODE, now=telemetry.now())
    assert any(e.kind == "diag" and e.gpu == uuid and "memory Fail" in e.detail for e in events)
    assert gpus[uuid].serial == "1652022017884"
    assert api.snapshot.stored("batch", "Job") == []  # cleaned up


def test_only_operators_and_only_when_enabled(slack: FakeSlack, kube: tuple[FakeKubeAPI, Any]) -> None:
    api, telemetry = kube
    buttons, _ = _buttons(slack, api, telemetry)
    assert buttons.handle(_click(DiagValue(lf.NODE, 2, 1).encode(), user="U0SOMEONE")) == "refused"
    (eph,) = slack.calls_to("chat.postEphemeral")
    assert "operators only" in eph.params["text"] and not api.jobs.created
    off, _ = _buttons(slack, api, telemetry, enabled=False)
    assert off.handle(_click(DiagValue(lf.NODE, 2, 1).encode())) == "off"
    assert "GPUBOT_DIAG_ENABLED=true" in slack.calls_to("chat.postEphemeral")[-1].params["text"]
    assert not api.jobs.created


def test_level_3_needs_a_second_confirmation(slack: FakeSlack, kube: tuple[FakeKubeAPI, Any]) -> None:
    api, telemetry = kube
    buttons, _ = _buttons(slack, api, telemetry)
    assert buttons.handle(_click(DiagValue(lf.NODE, 3, 1).encode())) == "confirm"
    eph = slack.calls_to("chat.postEphemeral")[-1]
    blocks = eph.params["blocks"]
    blocks = json.loads(blocks) if isinstance(blocks, str) else blocks
    (button,) = blocks[-1]["elements"]
    # The button names the confirmation gpubot holds; the value itself claims nothing.
    assert re.fullmatch(r"diag\|a100-train-03\|3\|t\.[0-9a-f]{32}", button["value"]) and "confirm" in button
    assert not api.jobs.created
    # Someone else (an operator too) cannot use it: it is the clicker's own.
    assert buttons.handle(_click(button["value"], user="U0OTHEROP")) == "refused"
    player = _kubelet(api, job_log("r3_warn_and_remap_pending.json", 226))
    assert buttons.handle(_click(button["value"])) == "done"
    player.join()
    assert api.jobs.created[0]["spec"]["activeDeadlineSeconds"] == 3600
    # Used once: the same button again runs nothing.
    assert buttons.handle(_click(button["value"])) == "refused"
    assert len(api.jobs.created) == 1
    assert slack.calls_to("chat.postEphemeral")[-1].params["text"] == CONFIRMATION_UNKNOWN


def test_a_refusal_is_said_in_the_thread(slack: FakeSlack, tmp_path: Path) -> None:
    path = build_fleet(tmp_path, lambda f: f.running_pod("trainer-0", "ml", lf.NODE, 8))
    snap, telemetry = build_sources(load_scenario(path))
    with serve(snap) as api:
        buttons, _ = _buttons(slack, api, telemetry)
        assert buttons.handle(_click(DiagValue(lf.NODE, 2, 1).encode())) == "refused"
        (msg,) = slack.calls_to("chat.postMessage")
        assert "refused" in msg.params["text"] and "ml/trainer-0" in msg.params["text"]
        assert not api.jobs.created


def test_gpu_node_posts_the_ledger_and_its_timeline(slack: FakeSlack, tmp_path: Path) -> None:
    f = lf.fleet("slack-node")
    f.gpu_series(lf.NODE, "a100", 8)
    for minutes in (30, 200, 400, 700, 1300):
        lf.plugin_xid(f, lf.NODE, 2, 79, minutes)
    cfg = load_config({})
    sources = open_sources(cfg, scenario=str(lf.write(f, tmp_path)))
    poster = Poster(TOKEN, slack.url, backoff_s=0.01)
    post_node_ledger(cfg, sources, Ledger(MemoryBackend(), 90), poster, "C0OPS", "U1", lf.NODE)
    (msg,) = slack.calls_to("chat.postMessage")
    body = json.dumps(msg.params)
    assert "Ledger of a100-train-03" in body and "REPEAT_FATAL_XID" in body and "REPEAT_NODE_FAULTS" in body
    assert "run_diagnostics" in body
    (upload,) = [c for c in slack.calls if c.method == "upload"]
    assert upload.body[:8] == b"\x89PNG\r\n\x1a\n"


def test_gpu_node_command_parses_and_validates() -> None:
    assert parse_command("node gpu-7") == Node("gpu-7")
    for bad in ("node", "node a b", "node <!channel>", "node Bad_Name"):
        with pytest.raises(CommandError):
            parse_command(bad)


def test_digest_section_lists_offenders_with_three_buttons() -> None:
    from bot.slack.ledger_open import ledger_digest

    cfg = load_config({})
    sources = open_sources(cfg, scenario="xid48-dbe-row-remap-failure")
    digest = ledger_digest(
        cfg,
        sources.cluster,
        sources.telemetry,
        collect_digest(sources.cluster, sources.telemetry),
        offline=True,
    )
    (off,) = digest.offenders
    assert (off.reason, off.node, off.gpu) == (
        "RMA_ROW_REMAP_FAILURE",
        "dgx-a100-07",
        "GPU-e3dbf294-2783-f38b-4274-5bc836df5be1",
    )
    assert "RMA_ROW_REMAP_FAILURE" in digest.flagged[0].reasons
    msg = digest_message(digest, "digest-20261129T102000Z")
    blocks = msg.blocks
    i = next(i for i, b in enumerate(blocks) if "Repeat offenders and RMA candidates" in json.dumps(b))
    row, actions = blocks[i + 1], blocks[i + 2]
    assert "GPU-e3dbf294" in row["text"]["text"] and "since 2026-11-29T10:20:00Z" in row["text"]["text"]
    assert [e["action_id"] for e in actions["elements"]] == [
        "digest_diagnose",
        "run_diagnostics",
        "must_gather",
    ]
    assert actions["elements"][0]["value"] == "digest-20261129T102000Z|dgx-a100-07"
    assert len(json.dumps(blocks)) < 13000 and len(blocks) <= 50


def test_walks_write_the_ledger_after_layer_5_and_never_fail() -> None:
    from bot.slack.ledger_walks import LedgerObserver
    from handlers.ports import NoObserver
    from layers.findings import LayerResult, Severity, Target, WalkResult

    seen: list[str] = []
    obs = LedgerObserver(NoObserver(), seen.append)
    card = LayerResult(5, Severity.OK, None)
    obs.walk_finished(WalkResult(Target("ml", "p", "gpu-7"), (card,)))
    obs.walk_finished(WalkResult(Target("ml", "p", "gpu-8"), (LayerResult(1, Severity.OK, None),)))
    assert seen == ["gpu-7"]

    def broken(node: str) -> None:
        raise RuntimeError("redis down")

    LedgerObserver(NoObserver(), broken).walk_finished(WalkResult(Target("ml", "p", "gpu-7"), (card,)))


def test_one_diagnostic_per_node_across_replicas_with_a_short_lease(
    slack: FakeSlack, kube: tuple[FakeKubeAPI, Any]
) -> None:
    from bot.slack.ledger_slack import DIAG_LEASE, LEASE_S

    api, telemetry = kube
    buttons, _ = _buttons(slack, api, telemetry)
    # Another replica holds the node's lease (its Job not created yet): this click waits its turn.
    assert buttons.state.set_if_absent(DIAG_LEASE.format(lf.NODE), "U0OTHER:job", LEASE_S)
    assert buttons.handle(_click(DiagValue(lf.NODE, 2, 1).encode())) == "busy"
    assert not api.jobs.created and LEASE_S <= 60
    buttons.state.delete(DIAG_LEASE.format(lf.NODE))
    player = _kubelet(api, job_log("r1_pass.json"))
    assert buttons.handle(_click(DiagValue(lf.NODE, 1, 1).encode())) == "done"
    player.join()
    time.sleep(0.01)
    assert buttons.state.get(DIAG_LEASE.format(lf.NODE)) is None  # released when done
    result = slack.calls_to("chat.postMessage")[-1]
    assert "Run level 3" in json.dumps(result.params)  # a pass offers the long run next
