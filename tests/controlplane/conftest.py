"""The real control plane (tests/kubecp.py): one per test session and xdist worker, shared by the
suites of this directory; each suite leaves the server as it found it."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest

from tests.kubecp import ControlPlane, Unavailable, binaries
from tests.kubeload import Kinds, install_custom_resources


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    try:
        cp = ControlPlane(binaries(), tmp_path_factory.mktemp("kube"))
    except Unavailable as e:
        # -rfE lists no skips: the warnings summary says it once, with how to get the tier.
        warnings.warn(str(e), stacklevel=1)
        pytest.skip(str(e))
    try:
        cp.start()
    except Unavailable:
        cp.stop()
        raise
    yield cp
    cp.stop()


@pytest.fixture(scope="session")
def kinds(control_plane: ControlPlane) -> Kinds:
    return install_custom_resources(control_plane.rest)
