"""Every DRA incident (tests/incidents/dra/, tests/incidents/dra_fleets/) walks the same through the
fake API server and the real kubernetes client as through the snapshot: resource.k8s.io objects as the
API serves them, field selectors on slices and claims, paginated lists, events and plugin logs.
(tests/test_contract_kube.py does the same for the bundled scenarios.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.sources.kube import KubeCluster
from bot.sources.scenario import build_sources, load_scenario
from layers.walk import walk
from tests.fakes.kube_api import serve
from tests.test_contract_kube import explain, scenario_target

INCIDENTS = Path(__file__).resolve().parent / "incidents"
FILES = sorted((INCIDENTS / "dra").glob("*.yaml")) + sorted((INCIDENTS / "dra_fleets").glob("*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_kubernetes_client_walks_like_the_snapshot(path: Path) -> None:
    sc = load_scenario(path)
    ns, pod = scenario_target(sc)
    snapshot, telemetry = build_sources(sc)
    expected = walk(snapshot, telemetry, ns, pod)
    with serve(snapshot) as api:
        kube = KubeCluster.from_config(api.kubeconfig, timeout_s=5.0)
        try:
            got = walk(kube, telemetry, ns, pod)
        finally:
            kube.close()
    assert got.to_dict() == expected.to_dict(), explain(expected, got)
