"""Session fixtures for the real services. Other fixtures live in modules and are imported where used."""

from __future__ import annotations

from collections.abc import Iterator

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
