"""must-gather against an API server that does not answer: one error, its hint said once (probe8's
finding: the collector re-wrapped the read's SourceError, whose str() already carried the hint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.actions.bundle_writer import collect_bundle
from bot.cli.main import main
from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, parse_scenario
from layers.sources import SourceError
from tests.bundle_scenario import scenario
from tests.fakes.kube_api import write_kubeconfig
from tests.services import free_port

HINT = "check that the backend is reachable and healthy"


def _dead_kubeconfig(tmp_path: Path) -> str:
    return write_kubeconfig(tmp_path / "kubeconfig", f"http://127.0.0.1:{free_port()}")


def test_the_reads_own_error_is_raised(tmp_path: Path) -> None:
    kube = KubeCluster.from_config(_dead_kubeconfig(tmp_path), timeout_s=1.0)
    _, telemetry = build_sources(parse_scenario(scenario(), "<xid79>"))
    with pytest.raises(SourceError) as caught:
        collect_bundle(kube, telemetry, tmp_path / "b.tar.gz")  # all GPU nodes: the nodes list fails
    err = caught.value
    assert err.kind == "unavailable" and "unreachable" in err.message and "list nodes" in err.message
    assert str(err).count(HINT) == 1, str(err)
    assert not (tmp_path / "b.tar.gz").exists()


def test_the_cli_prints_the_hint_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b.tar.gz"
    code = main(["must-gather", "--kubeconfig", _dead_kubeconfig(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert len(err) == 1 and err[0].count(HINT) == 1, err
