"""/readyz reflects whether each role's Redis writes succeed (REAL redis-server with ACL users).

A gateway whose Redis user lacks XADD queues nothing; an agent whose user
lacks XACK (or HSET, its heartbeat) acknowledges nothing: both answer PING and
read fine, and must not say ready. A user with the commands it needs is ready.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.cluster_harness import agent_env, cluster_scenario, gateway_env
from tests.fakes.slack_api import FakeSlack
from tests.services import RedisServer
from tests.slack_harness import BotProcess, get

PASSWORD = "acl-pass-0123456789"


@pytest.fixture(scope="module")
def acl_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        r = redis.Redis.from_url(server.url)
        r.acl_setuser("full", enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], commands=["+@all"])
        for name, lacking in (("noxadd", "-xadd"), ("noxack", "-xack"), ("nohset", "-hset")):
            r.acl_setuser(
                name, enabled=True, passwords=[f"+{PASSWORD}"], keys=["*"], commands=["+@all", lacking]
            )
        yield server


def _url(server: RedisServer, user: str) -> str:
    return f"redis://{user}:{PASSWORD}@127.0.0.1:{server.port}/0"


def _readyz(bot: BotProcess, settled: Callable[[int, str], bool]) -> tuple[int, str]:
    """/readyz once `settled` holds of its answer; the last answer after a minute (a start-up on a
    loaded 2-core machine takes seconds; a not-ready reason can change as the agent's loops start)."""
    deadline = time.monotonic() + 60
    got: tuple[int, str] = (0, "")
    while time.monotonic() < deadline:
        assert bot.proc.poll() is None, bot.log()
        try:
            got = get(bot.url + "/readyz", timeout=2)
        except OSError:
            time.sleep(0.1)
            continue
        if settled(*got):
            return got
        time.sleep(0.1)
    return got


def _ok(status: int, _body: str) -> bool:
    return status == 200


def _refused(status: int, body: str) -> bool:
    return status == 503 and ("no permissions to run" in body or "can't run this command" in body)


@pytest.mark.parametrize(("user", "ready"), [("full", True), ("noxadd", False)])
def test_a_gateway_without_xadd_is_not_ready(
    acl_redis: RedisServer, slack: FakeSlack, tmp_path: Path, user: str, ready: bool
) -> None:
    env = gateway_env(slack.url, _url(acl_redis, user))
    bot = BotProcess(["--role", "gateway"], env, tmp_path / "gw.log", ready=False)
    try:
        status, body = _readyz(bot, _ok if ready else _refused)
    finally:
        bot.stop()
    if ready:
        assert status == 200, body
    else:
        assert status == 503 and "no permissions to run the 'xadd' command" in body, body


@pytest.mark.parametrize(("user", "ready"), [("full", True), ("noxack", False), ("nohset", False)])
def test_an_agent_without_xack_or_hset_is_not_ready(
    acl_redis: RedisServer, slack: FakeSlack, tmp_path: Path, user: str, ready: bool
) -> None:
    env = agent_env(slack.url, _url(acl_redis, user), f"acl-{user}")
    scenario = cluster_scenario(tmp_path, f"acl-{user}")
    bot = BotProcess(["--role", "agent", "--scenario", str(scenario)], env, tmp_path / "a.log", ready=False)
    try:
        status, body = _readyz(bot, _ok if ready else _refused)
    finally:
        bot.stop()
    if ready:
        assert status == 200, body
    else:
        assert _refused(status, body) and body.count("\n") <= 1, body
