"""The owners' decision table (spec/findings.md, "One policy decides every action"), every row
(tests/owner_policy_fleets.py) × every surface: the policy itself, the finding's advice, the verdict,
the buttons and confirmations of every layer's message, the digest's row and buttons, the CLI's
`cordon`, `uncordon`, `uncordon --force` and `diag --dry-run` (exit codes and lines), on
production-shaped fleets. The gateway's queued clicks are tests/test_owner_policy_gateway.py."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from bot.cli.main import main
from bot.sources.scenario import build_sources, load_scenario
from handlers.blocks import walk_messages
from handlers.digest import node_buttons
from handlers.digest_owners import owner_lines
from handlers.ledger_blocks import node_ledger_message
from layers.digest import collect_digest
from layers.findings import Severity, WalkResult
from layers.nodeactions import ROWS as TABLE_ROWS
from layers.nodepolicy import NodePolicy, decide
from tests import test_bundled_scenarios as bundled
from tests.owner_policy_fleets import NODE, POD, ROWS, TWIN, Row, build

IDS = [r.id for r in ROWS]
_FOLDER = Path(tempfile.mkdtemp(prefix="owner-policy-"))


@functools.cache
def scenario(row_id: str) -> Path:
    return build(next(r for r in ROWS if r.id == row_id), _FOLDER)


@functools.cache
def walked(row_id: str) -> WalkResult:
    result, _ = bundled.diagnose(scenario(row_id), all_layers=True)
    assert isinstance(result, WalkResult)
    return result


def policy(row_id: str, node: str = NODE) -> NodePolicy:
    cluster, _ = build_sources(load_scenario(scenario(row_id)))
    return decide(cluster.get_node(node))


def test_every_row_of_the_table_has_a_fleet() -> None:
    assert {r.row for r in ROWS} == set(TABLE_ROWS)


# --- the policy ------------------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_policy_answers_the_row(row: Row) -> None:
    for node in (NODE, TWIN):
        p = policy(row.id, node)
        assert p.row == row.row, (node, p)
        assert (p.cordon.offered, p.uncordon.offered, p.uncordon_force.offered, p.diagnostics.offered) == (
            row.cordon,
            row.uncordon_button,
            row.uncordon_force,
            row.diag,
        ), p
        assert p.must_gather.offered
        for a in (p.cordon, p.uncordon, p.diagnostics):
            assert a.offered or a.said, f"{node}: a refusal without its sentence: {p}"
        if row.owner:
            assert p.holder is not None and p.holder["name"] == row.owner
        if not row.drain:  # a running holder is named in every refusal
            assert row.owner and all(row.owner in a.said for a in (p.cordon, p.uncordon, p.diagnostics))
    assert NodePolicy.from_dict(json.loads(json.dumps(p.to_dict()))) == p


# --- findings and the verdict ------------------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_xid_advice_follows_the_row(row: Row) -> None:
    result = walked(row.id)
    [xid] = [f for r in result.layers for f in r.findings if f.code == "L5_XID" and f.node == NODE]
    assert row.advice in xid.summary, xid.summary
    assert ("Drain the node" in xid.summary) == row.drain, xid.summary
    if not row.drain:  # no finding on the node advises a drain, a reset or a reboot against its holder
        head = policy(row.id).advice_head.lower()  # names the holder's state (…PendingReboot, rebooting)
        for f in (
            f for r in result.layers for f in r.findings if f.node == NODE and f.severity >= Severity.WARN
        ):
            tail = f.summary.rpartition(" — ")[2].lower().replace(head, "")
            assert not any(w in tail for w in ("drain the node", "reboot", "reset the gpu")), f.summary


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_verdict_never_contradicts_the_holder(row: Row) -> None:
    verdict = walked(row.id).verdict
    assert verdict is not None and verdict.node == NODE
    kept = walked(row.id).policy_for(NODE)  # what the verdict line says of the holder
    assert kept is not None and kept.row == row.row and (kept.holder or {}).get("name") == row.owner
    if verdict.code == "L5_XID":
        assert row.advice in verdict.summary, verdict.summary
    assert ("drain the node" in verdict.summary.lower()) == row.drain or verdict.code != "L5_XID", verdict


# --- buttons and confirmations ---------------------------------------------------------------------


def _elements(message: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["action_id"]: e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]}


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_every_layers_buttons_and_confirmations_follow_the_row(row: Row) -> None:
    """Cordon on a message exactly where the table offers it and the message's findings fault or warn
    about the node (issue 27); Must-gather once per node and walk; every Cordon confirmation says the
    row's owner line and the platform's next step, whichever layer it is on."""
    result = walked(row.id)
    messages = [m.to_dict() for m in walk_messages(result, "w1")][1:]
    assert len(messages) == 5
    gathers = cordons = 0
    for n, (message, layer) in enumerate(zip(messages, result.layers, strict=True), start=1):
        by_id = _elements(message)
        about = any(f.node == NODE and f.severity >= Severity.WARN for f in layer.findings)
        gathers += "must_gather" in by_id
        assert ("cordon_node" in by_id) == (row.cordon and about), (n, sorted(by_id))
        cordons += "cordon_node" in by_id
        assert "uncordon_node" not in by_id  # only under the audit line of gpubot's own cordon
        if "cordon_node" in by_id and row.confirm:
            text = by_id["cordon_node"]["confirm"]["text"]["text"]
            assert row.confirm in text, (n, text)
            assert len(text) <= 300
    assert gathers == 1  # once per node and walk
    assert (cordons > 0) == row.cordon


# --- the digest ------------------------------------------------------------------------------------


@functools.cache
def digest_of(row_id: str) -> Any:
    cluster, telemetry = build_sources(load_scenario(scenario(row_id)))
    return collect_digest(cluster, telemetry)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_digest_row_names_the_owner_and_offers_what_the_table_does(row: Row) -> None:
    digest = digest_of(row.id)
    [flagged] = [f for f in digest.flagged if f.node == NODE]
    shown = flagged.to_dict()
    assert (shown["owner"] or {}).get("name") == row.owner, shown
    assert ("OWNER_NEEDS_PERSON" in shown["reasons"]) == row.needs_person, shown
    lines = " ".join(owner_lines(flagged))
    if row.owner:
        word = {"gave-up": " · gave up", "queued": " · queued", "reported": "reported by *"}.get(
            row.row, "owner: *"
        )
        assert word in lines and row.owner in lines, lines
    ids = [e["action_id"] for e in node_buttons(flagged, "d1", 0)["elements"]]
    assert ("cordon_node" in ids) == row.cordon and ("uncordon_node" in ids) == row.uncordon_button, ids
    if row.cordon and row.confirm:
        [cordon] = [e for e in node_buttons(flagged, "d1", 0)["elements"] if e["action_id"] == "cordon_node"]
        assert row.confirm in cordon["confirm"]["text"]["text"]


# --- the CLI ---------------------------------------------------------------------------------------


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_cli_cordon_and_uncordon_follow_the_row(
    row: Row, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUBOT_CORDON_MAX_FRACTION", "1")
    monkeypatch.delenv("REDIS_URL", raising=False)
    src = ("--scenario", str(scenario(row.id)))
    unschedulable = policy(row.id).cordoned_by is not None
    code, out, err = _cli(capsys, "cordon", NODE, "--reason", "Xid 79", "--dry-run", *src)
    if row.cordon:
        assert code == 0 and "dry run: would cordon" in out, (out, err)
    else:
        assert code == (0 if unschedulable else 2) and "would cordon" not in out, (code, out, err)
        said = out + err
        assert "nothing changed" in said and (row.owner is None or row.owner in said), said
    code, out, err = _cli(capsys, "uncordon", NODE, "--dry-run", *src)
    assert ("would uncordon" in out) == row.uncordon_button, (out, err)
    assert code == (0 if row.uncordon_button or not unschedulable else 2), (code, out, err)
    code, out, err = _cli(capsys, "uncordon", NODE, "--force", "--dry-run", *src)
    assert ("would uncordon" in out) == row.uncordon_force, (out, err)
    if unschedulable and not row.uncordon_force:
        assert code == 2 and row.owner is not None and row.owner in err, err
    if row.row == "cordoned-by-person":  # --force names who cordoned it
        assert "field manager kubectl-cordon at" in out, out
    if row.uncordon_force and row.row == "gave-up":
        assert row.owner is not None and row.owner in out and "gave up" in out, out


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_cli_diag_follows_the_row(row: Row, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(
        capsys, "diag", TWIN, "--level", "1", "--dry-run", "--scenario", str(scenario(row.id))
    )
    if row.diag:
        assert code == 0 and "gpubot-diag-" in out, (code, out, err)
    else:
        assert code == 2 and row.owner is not None and row.owner in err, (code, err)
        assert err.count("\n") == 1  # one clear line
        # On the pod's node too: the owner's sentence, never "drain the pods first" against it.
        code, _, err = _cli(capsys, "diag", NODE, "--dry-run", "--scenario", str(scenario(row.id)))
        assert code == 2 and row.owner in err and "drain them first" not in err, err


def test_the_target_pod_is_the_walks() -> None:
    assert walked(ROWS[0].id).target.label == POD


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_the_node_ledger_offers_run_diagnostics_where_the_table_does(
    row: Row, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpubot node --format json` carries the owner (the ledger's owner column asks the policy) and
    `/gpu node`'s message offers Run diagnostics only where the table does."""
    code, out, err = _cli(capsys, "node", TWIN, "--format", "json", "--scenario", str(scenario(row.id)))
    assert code == 0, err
    ledger = json.loads(out)
    assert (ledger["owner"] or {}).get("name") == row.owner, ledger["owner"]
    ids = {e["action_id"] for b in node_ledger_message(ledger, None).blocks if b["type"] == "actions"
           for e in b["elements"]}  # fmt: skip
    assert ("run_diagnostics" in ids) == row.diag, ids
