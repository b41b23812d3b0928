"""Settings of the gateway and agent roles: each bad one is one line naming it, and nothing runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.ops.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
KEY = "k" * 32
AGENT = {
    "SLACK_BOT_TOKEN": "xoxb-1-2-abc",
    "REDIS_URL": "redis://r:6379/0",
    "GPUBOT_CLUSTER_NAME": "eu-1",
    "GPUBOT_REQUEST_KEY": KEY,
}
GATEWAY = {
    "SLACK_BOT_TOKEN": "xoxb-1-2-abc",
    "SLACK_APP_TOKEN": "xapp-1-A-1-x",
    "REDIS_URL": "redis://r:6379/0",
    "GPUBOT_REQUEST_KEY": KEY,
}


def test_an_agent_needs_no_app_token_nor_signing_secret() -> None:
    cfg = load_config(AGENT, need_slack=True, role="agent")
    assert cfg.cluster_name == "eu-1" and cfg.slack_app_token is None and cfg.slack_signing_secret is None
    assert (cfg.heartbeat_s, cfg.claim_idle_s, cfg.agent_silent_s, cfg.stream_maxlen) == (
        10.0,
        60.0,
        30.0,
        10_000,
    )


def test_tight_intervals_for_tests_and_tls_settings_are_read() -> None:
    env = {
        **AGENT,
        "REDIS_URL": "rediss://:pw@redis.example:6380/0",
        "REDIS_PASSWORD": "s3cret-pass",
        "REDIS_CA_BUNDLE": "/etc/gpubot/redis-ca/ca.crt",
        "GPUBOT_HEARTBEAT_SECONDS": "0.2",
        "GPUBOT_CLAIM_IDLE_SECONDS": "1.5",
        "GPUBOT_STREAM_MAXLEN": "500",
    }
    cfg = load_config(env, need_slack=True, role="agent")
    assert (cfg.heartbeat_s, cfg.claim_idle_s, cfg.stream_maxlen) == (0.2, 1.5, 500)
    assert cfg.redis_ca_bundle == "/etc/gpubot/redis-ca/ca.crt" and cfg.redis_password == "s3cret-pass"
    assert "s3cret" not in repr(cfg)


@pytest.mark.parametrize(
    ("role", "env", "line"),
    [
        (
            "agent",
            {**AGENT, "GPUBOT_CLUSTER_NAME": ""},
            "GPUBOT_CLUSTER_NAME is not set: an agent serves one named cluster",
        ),
        (
            "agent",
            {**AGENT, "GPUBOT_CLUSTER_NAME": "EU/1"},
            "GPUBOT_CLUSTER_NAME must be lowercase letters, digits and '-' (at most 63), got 'EU/1'",
        ),
        (
            "agent",
            {**AGENT, "REDIS_URL": ""},
            "REDIS_URL is not set: the agent reaches the other side through Redis Streams",
        ),
        (
            "gateway",
            {**GATEWAY, "REDIS_URL": ""},
            "REDIS_URL is not set: the gateway reaches the other side through Redis Streams",
        ),
        (
            "agent",
            {**AGENT, "SLACK_BOT_TOKEN": ""},
            "SLACK_BOT_TOKEN is not set: an agent posts its walks with the bot token",
        ),
        (
            "gateway",
            {**GATEWAY, "SLACK_APP_TOKEN": ""},
            "SLACK_APP_TOKEN is not set: Socket Mode needs the app-level token (xapp-…); or use --http",
        ),
        (
            "agent",
            {**AGENT, "GPUBOT_HEARTBEAT_SECONDS": "ten"},
            "GPUBOT_HEARTBEAT_SECONDS must be a number of seconds from 0.05 to 300, got 'ten'",
        ),
        (
            "agent",
            {**AGENT, "GPUBOT_CLAIM_IDLE_SECONDS": "0"},
            "GPUBOT_CLAIM_IDLE_SECONDS must be a number of seconds from 0.2 to 3600, got '0'",
        ),
        (
            "agent",
            {**AGENT, "GPUBOT_HEARTBEAT_SECONDS": "90"},
            "GPUBOT_HEARTBEAT_SECONDS must be below GPUBOT_CLAIM_IDLE_SECONDS",
        ),
        (
            "gateway",
            {**GATEWAY, "GPUBOT_AGENT_SILENT_SECONDS": "-1"},
            "GPUBOT_AGENT_SILENT_SECONDS must be a number of seconds from 0.1 to 3600, got '-1'",
        ),
        (
            "gateway",
            {**GATEWAY, "GPUBOT_STREAM_MAXLEN": "10"},
            "GPUBOT_STREAM_MAXLEN must be a whole number from 100 to 10000000, got '10'",
        ),
        (
            "gateway",
            {**GATEWAY, "REDIS_CA_BUNDLE": "/ca.crt"},
            "REDIS_CA_BUNDLE is set but REDIS_URL is not a rediss:// (TLS) URL",
        ),
    ],
)
def test_bad_settings_are_one_line(role: str, env: dict[str, str], line: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(env, need_slack=True, role=role)
    assert str(err.value) == line


def test_all_keeps_any_cluster_name_as_before() -> None:
    assert load_config({"GPUBOT_CLUSTER_NAME": "Prod EU (A100)"}).cluster_name == "Prod EU (A100)"


@pytest.mark.parametrize(
    ("env", "line"),
    [
        (
            {**AGENT, "REDIS_URL": "rediss://127.0.0.1:1/0", "REDIS_CA_BUNDLE": "/nonexistent/ca.crt"},
            "gpubot: REDIS_CA_BUNDLE names no readable file: /nonexistent/ca.crt",
        ),
        (
            {**AGENT, "GPUBOT_CLUSTER_NAME": "Bad_Name"},
            "gpubot: GPUBOT_CLUSTER_NAME must be lowercase letters",
        ),
    ],
)
def test_serve_stops_with_one_line_on_a_bad_role_setting(env: dict[str, str], line: str) -> None:
    base = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-m", "bot.serve", "--role", "agent", "--scenario", "xid79-fell-off-bus"],
        env={**base, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(line), out.stderr
