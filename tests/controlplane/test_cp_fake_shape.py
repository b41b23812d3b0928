"""The hand-written fake (tests/fakes/kube_api.py) answers in the real server's shapes: the same
scenario loaded into both, the same requests, and the answers compared where the fake claims to
be the server (list envelopes and pages, Status objects for 404 and a bad container, field selectors)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from bot.sources.opener import bundled_scenarios
from bot.sources.scenario import build_sources, load_scenario
from tests.fakes.kube_api import TOKEN, FakeKubeAPI, serve
from tests.kubecp import ControlPlane
from tests.kubeload import Kinds, load, unload

SCENARIO = next(p for p in bundled_scenarios() if p.stem == "xid79-fell-off-bus")


@pytest.fixture(scope="module")
def both(control_plane: ControlPlane, kinds: Kinds) -> Iterator[tuple[ControlPlane, FakeKubeAPI]]:
    sc = load_scenario(SCENARIO)
    snapshot, _ = build_sources(sc)
    loaded = load(control_plane, kinds, sc)
    try:
        with serve(snapshot) as fake:
            yield control_plane, fake
    finally:
        unload(control_plane, loaded)


def real(cp: ControlPlane, path: str) -> tuple[int, Any]:
    r = cp.rest.http.request("GET", cp.url + path)
    return r.status, _body(r)


def fake(api: FakeKubeAPI, path: str) -> tuple[int, Any]:
    import yaml

    server = yaml.safe_load(open(api.kubeconfig))["clusters"][0]["cluster"]["server"]
    r = urllib3.PoolManager().request("GET", server + path, headers={"Authorization": f"Bearer {TOKEN}"})
    return r.status, _body(r)


def _body(r: Any) -> Any:
    import json

    try:
        return json.loads(r.data)
    except ValueError:
        return r.data.decode()


def envelope(body: dict[str, Any]) -> tuple[Any, ...]:
    meta = body.get("metadata") or {}
    items = body.get("items") or []
    return (
        body.get("kind"),
        body.get("apiVersion"),
        "continue" in meta and bool(meta["continue"]),
        "resourceVersion" in meta,
        sorted({k for i in items for k in i if k in ("kind", "apiVersion")}),
        len(items),
    )


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/nodes?limit=2",
        "/api/v1/nodes?limit=500",
        "/api/v1/pods?limit=500&fieldSelector=spec.nodeName%3Dgpu-node-1",
        "/apis/node.k8s.io/v1/runtimeclasses?limit=500",
    ],
)
def test_lists_and_pages_have_the_real_envelope(both: tuple[ControlPlane, FakeKubeAPI], path: str) -> None:
    cp, api = both
    (rc, rb), (fc, fb) = real(cp, path), fake(api, path)
    assert (rc, envelope(rb)) == (fc, envelope(fb)), (rb.get("metadata"), fb.get("metadata"))


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/default/pods/no-such-pod",
        "/api/v1/nodes/no-such-node",
    ],
)
def test_not_found_is_the_real_status(both: tuple[ControlPlane, FakeKubeAPI], path: str) -> None:
    cp, api = both
    (rc, rb), (fc, fb) = real(cp, path), fake(api, path)
    assert rc == fc == 404
    keep = ("kind", "apiVersion", "status", "reason", "code", "message", "details")
    assert {k: rb.get(k) for k in keep} == {k: fb.get(k) for k in keep}


def test_a_log_of_a_container_the_pod_lacks_is_the_real_bad_request(
    both: tuple[ControlPlane, FakeKubeAPI],
) -> None:
    cp, api = both
    path = "/api/v1/namespaces/gpu-operator/pods/gpu-operator-xctvfmxxbf-8k79w/log?container=no-such"
    (rc, rb), (fc, fb) = real(cp, path), fake(api, path)
    assert rc == fc == 400
    keep = ("kind", "status", "reason", "code", "message")
    assert {k: rb.get(k) for k in keep} == {k: fb.get(k) for k in keep}
