"""Session fixtures for the real services, and the stalled socket both Prometheus timeout tests use."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import PrometheusFactory, RedisServer, ServiceUnavailable, require


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server on 127.0.0.1 for the session; tests share it, so use distinct keys or flushdb."""
    server = RedisServer()
    try:
        server.start()
    except ServiceUnavailable as e:
        pytest.skip(str(e))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One 3-master Redis Cluster for the session (tests/redis_topologies.py): distinct keys per test."""
    from tests.redis_topologies import RedisClusterServer

    try:
        server = RedisClusterServer(tmp_path_factory.mktemp("redis-cluster")).start()
    except ServiceUnavailable as e:
        pytest.skip(str(e))
    yield server
    server.stop()


@pytest.fixture(params=["single", "cluster"])
def redis_any(request: pytest.FixtureRequest) -> Any:
    """The session's redis-server, then the session's Redis Cluster: checks that differ between the
    two shapes (hash slots, MOVED, scripts) run on both. Each `url`, `mode`, `env`, `client()`."""
    return request.getfixturevalue("redis_server" if request.param == "single" else "redis_cluster")


@pytest.fixture(scope="session")
def prometheus_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusFactory]:
    """`factory(series) -> PrometheusServer`: one real Prometheus per distinct dataset per session."""
    try:
        require("prometheus", "promtool")
    except ServiceUnavailable as e:
        pytest.skip(str(e))
    factory = PrometheusFactory(tmp_path_factory.mktemp("prometheus"))
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def slack() -> Iterator[FakeSlack]:
    """A fake Slack Web API per test module: its tests share it (distinct channels, or `reset()`)."""
    with serve_slack() as fake:
        yield fake


@pytest.fixture
def stalled_url() -> Iterator[str]:
    """A real socket on 127.0.0.1 that accepts every connection and never sends a byte."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(32)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)  # read nothing, answer nothing

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=2)
        for conn in held:
            conn.close()
        server.close()
