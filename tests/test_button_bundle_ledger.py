"""The Slack Must-gather button writes the bundle to the node's ledger as taken by the clicker
(`slack:<user>`, as a cordon's entry names its clicker), through the real Bolt app, the real
kubernetes client against the fake API server, and the ledger in a real redis-server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from bot.ops.config import load_config
from bot.slack.app import build_app
from bot.slack.ledger_open import bot_ledger
from bot.slack.post import Poster
from bot.slack.state import MemoryState
from bot.sources.opener import open_sources
from bot.sources.scenario import build_sources, load_scenario
from tests.fakes.kube_api import serve
from tests.fakes.slack_api import FakeSlack, serve_slack
from tests.services import RedisServer
from tests.slack_harness import BOT_TOKEN, OPERATOR, action_body, bot_env, dispatch, wait_for, write_scenario
from tests.test_slack_buttons import start


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with serve_slack() as fake:
        yield fake


def test_the_must_gather_button_writes_the_bundle_as_taken_by_its_clicker(
    slack: FakeSlack, tmp_path: Path, redis_server: RedisServer
) -> None:
    url = redis_server.url.rsplit("/", 1)[0] + "/13"
    redis.Redis.from_url(url).flushdb()
    cluster, _ = build_sources(load_scenario(write_scenario(tmp_path)))
    with serve(cluster) as api:
        cfg = load_config(bot_env(slack.url, REDIS_URL=url), need_slack=True, http=True)
        poster = Poster(BOT_TOKEN, slack.url, backoff_s=0.01, history=True, pace_s=0)
        bot: Any = build_app(
            cfg, open_sources(cfg, kubeconfig=api.kubeconfig), MemoryState(), poster, client=poster.client
        )
        try:
            root, walk_id = start(bot, slack, "C0BUNDLELEDGER")
            kw = {"channel": "C0BUNDLELEDGER", "message_ts": root, "block_id": "layer5_actions"}
            dispatch(bot, action_body("must_gather", walk_id, user=OPERATOR, **kw))
            wait_for(
                "the bundle attached", lambda: slack.calls_to("files.completeUploadExternal"), timeout=60
            )
            ledger = bot_ledger(cfg)

            def bundles() -> list[Any]:
                return [e for e in ledger.read("gpu-7")[0] if e.kind == "bundle"]

            got = wait_for("the bundle's ledger entry", bundles)
            assert [e.actor for e in got] == [f"slack:{OPERATOR}"]
        finally:
            bot.shutdown()
