"""Typed, validated configuration from the environment, in one place.

A missing or malformed setting stops start-up with one line naming it; the
values themselves (tokens!) never appear in that line.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from bot.ops.ledger_settings import DEFAULT_DIAG_IMAGE, ledger_settings
from bot.ops.redisconfig import RedisConfigError, redis_fields, role_needs
from handlers.commands import CLUSTER_NAME


class ConfigError(ValueError):
    """One line naming the setting and what is wrong with it."""


SLACK_DEFAULT_API = "https://slack.com/api/"
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
_GROUP_ID = re.compile(r"^S[A-Z0-9]{2,}$")
_CHANNEL = re.compile(r"^[CGD][A-Z0-9]{2,}$|^#?[a-z0-9][a-z0-9_-]{0,79}$")
_HHMM = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class Config:
    slack_bot_token: str | None = field(default=None, repr=False)
    slack_app_token: str | None = field(default=None, repr=False)
    slack_signing_secret: str | None = field(default=None, repr=False)
    slack_api_url: str = SLACK_DEFAULT_API
    operators: frozenset[str] = frozenset()
    operator_groups: frozenset[str] = frozenset()
    digest_channel: str | None = None
    digest_hour: int = 9
    digest_minute: int = 0
    timezone: str = "UTC"
    cordon_max_fraction: float = 0.25
    operator_namespace: str | None = None
    prometheus_url: str | None = None
    prometheus_token: str | None = field(default=None, repr=False)
    prometheus_ca: str | None = None
    redis_url: str | None = field(default=None, repr=False)
    redis_password: str | None = field(default=None, repr=False)
    redis_ca_bundle: str | None = None
    kubeconfig: str | None = None
    scenario: str | None = None
    cluster_name: str | None = None
    state_retention_days: int = 14
    workers: int = 4
    http_timeout_s: int = 10  # request line + headers, and the body, each in total
    http_max_connections: int = 512
    # Slack (bot/slack/post.py): look up a post whose answer was lost (the history scopes), and
    # the least time between two posts to one channel (Slack's per-channel limit).
    slack_history: bool = False
    slack_pace_s: float = 1.0
    same_request_s: int = 60  # the same /gpu why or node in one channel: answered once per window
    user_requests_per_minute: int = 30
    slack_max_queued: int = 200  # posts waiting for one channel's pace, past which new ones are dropped
    log_level: str = "INFO"
    alert_token: str | None = field(default=None, repr=False)
    alert_channel: str | None = None
    alert_rewalk_minutes: int = 30
    alert_max_threads_per_hour: int = 10
    alert_duplicate_seconds: int = 60
    alert_stale_hours: float = 12.0
    alert_max_body_mib: int = 16
    # Many clusters (bot/cluster/): how often agents heartbeat, when their unacknowledged work is
    # taken over, when the gateway calls an agent silent, how long request streams are kept.
    heartbeat_s: float = 10.0
    claim_idle_s: float = 60.0
    agent_silent_s: float = 30.0
    stream_maxlen: int = 10_000
    digest_part_wait_s: float = 300.0
    # The ledger and the diagnostics (bot/ops/ledger_settings.py).
    ledger_retention_days: int = 90
    ledger_repeat_fatal_xid: int = 5
    ledger_repeat_node_faults: int = 5
    ledger_repeat_app_xid: int = 2
    diag_enabled: bool = False
    diag_image: str = DEFAULT_DIAG_IMAGE
    diag_namespace: str | None = None  # gpubot's own (the pod's service account namespace) when unset
    diag_hostengine: str | None = None  # the operator's standalone nv-hostengine; found when unset
    # Redis's shape and the request key (bot/ops/redisconfig.py).
    redis_mode: str = "single"
    redis_sentinels: tuple[tuple[str, int], ...] = ()
    redis_sentinel_master: str | None = None
    redis_sentinel_password: str | None = field(default=None, repr=False)
    request_key: str | None = field(default=None, repr=False)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)


def check_url(name: str, value: str, schemes: tuple[str, ...]) -> str:
    """`value` as a URL of one of `schemes`, or a ConfigError naming `name`. The value itself is
    never echoed: a URL may carry a password (redis://:pw@host, https://user:pw@host)."""
    shape = f"{name} must be a URL starting with {' or '.join(s + '://' for s in schemes)}"
    try:
        parsed = urlsplit(value)
        port = parsed.port  # urllib raises here on a port that is not a number or above 65535
    except ValueError:
        raise ConfigError(
            f"{name} has a malformed host or port (an IPv6 host goes in [...], a port is 1-65535)"
        ) from None
    if parsed.scheme not in schemes:
        raise ConfigError(shape)
    if parsed.scheme == "unix":
        # redis-py's unix socket form, unix:///path/to/redis.sock: a path, no host.
        if not parsed.path.startswith("/"):
            raise ConfigError(
                f"{name}: a unix:// URL names the socket's absolute path, e.g. unix:///run/redis.sock"
            )
        return value
    if not parsed.hostname:
        raise ConfigError(f"{name} names no host (expected scheme://host[:port])")
    if port == 0:
        raise ConfigError(f"{name}: port 0 is not a port to connect to (1-65535)")
    return value


def _ids(name: str, value: str, pattern: re.Pattern[str], what: str) -> frozenset[str]:
    items = [v.strip() for v in value.replace(";", ",").split(",") if v.strip()]
    for item in items:
        if not pattern.match(item):
            raise ConfigError(f"{name}: {item!r} is not a Slack {what} id")
    return frozenset(items)


def _token(name: str, value: str, prefix: str) -> str:
    if not value.startswith(prefix):
        # Say what shape is expected, never echo the value: it may be a real secret.
        raise ConfigError(f"{name} must be a Slack token starting with {prefix}")
    return value


ROLES = ("all", "gateway", "agent")


def load_config(
    env: Mapping[str, str] | None = None,
    *,
    need_slack: bool = False,
    http: bool = False,
    role: str = "all",
) -> Config:
    """Read and check every setting; `need_slack` for `serve` (HTTP mode needs the signing secret).

    `role` is serve's: a gateway also needs REDIS_URL; an agent needs the bot token, REDIS_URL and
    GPUBOT_CLUSTER_NAME, and neither the app token nor the signing secret (it never hears Slack)."""
    env = os.environ if env is None else env

    def get(name: str) -> str | None:
        v = env.get(name)
        return v.strip() if v and v.strip() else None

    kw: dict[str, object] = {}
    if (v := get("SLACK_BOT_TOKEN")) is not None:
        kw["slack_bot_token"] = _token("SLACK_BOT_TOKEN", v, "xoxb-")
    if (v := get("SLACK_APP_TOKEN")) is not None:
        kw["slack_app_token"] = _token("SLACK_APP_TOKEN", v, "xapp-")
    if (v := get("SLACK_SIGNING_SECRET")) is not None:
        kw["slack_signing_secret"] = v
    if (v := get("SLACK_API_URL")) is not None:
        kw["slack_api_url"] = check_url("SLACK_API_URL", v, ("http", "https")).rstrip("/") + "/"
    if (v := get("GPUBOT_OPERATORS")) is not None:
        kw["operators"] = _ids("GPUBOT_OPERATORS", v, _USER_ID, "user")
    if (v := get("GPUBOT_OPERATOR_GROUPS")) is not None:
        kw["operator_groups"] = _ids("GPUBOT_OPERATOR_GROUPS", v, _GROUP_ID, "user group")
    if (v := get("GPUBOT_DIGEST_CHANNEL")) is not None:
        if not _CHANNEL.match(v):
            raise ConfigError("GPUBOT_DIGEST_CHANNEL must be a channel id (C…) or name")
        kw["digest_channel"] = v
    if (v := get("GPUBOT_ALERT_CHANNEL")) is not None:
        if not _CHANNEL.match(v):
            raise ConfigError("GPUBOT_ALERT_CHANNEL must be a channel id (C…) or name")
        kw["alert_channel"] = v
    if (v := get("GPUBOT_ALERT_TOKEN")) is not None:
        if len(v) < 16 or not v.isascii() or not v.isprintable() or " " in v:
            raise ConfigError(
                "GPUBOT_ALERT_TOKEN must be at least 16 printable ASCII characters without spaces "
                "(e.g. openssl rand -hex 32)"
            )
        kw["alert_token"] = v
    if (v := get("GPUBOT_DIGEST_TIME")) is not None:
        m = _HHMM.match(v)
        if not m:
            raise ConfigError(f"GPUBOT_DIGEST_TIME must be HH:MM (24-hour), got {v!r}")
        kw["digest_hour"], kw["digest_minute"] = int(m.group(1)), int(m.group(2))
    if (v := get("GPUBOT_TIMEZONE")) is not None:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(
                f"GPUBOT_TIMEZONE must be an IANA time zone name such as Europe/Paris, got {v!r}"
            ) from None
        kw["timezone"] = v
    if (v := get("GPUBOT_CORDON_MAX_FRACTION")) is not None:
        try:
            frac = float(v)
        except ValueError:
            frac = -1.0
        if not 0.0 < frac <= 1.0:
            raise ConfigError(f"GPUBOT_CORDON_MAX_FRACTION must be a number above 0 and at most 1, got {v!r}")
        kw["cordon_max_fraction"] = frac
    if (v := get("GPUBOT_OPERATOR_NAMESPACE")) is not None:
        if not re.match(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", v):
            raise ConfigError(f"GPUBOT_OPERATOR_NAMESPACE is not a valid namespace name: {v!r}")
        kw["operator_namespace"] = v
    if (v := get("PROMETHEUS_URL")) is not None:
        kw["prometheus_url"] = check_url("PROMETHEUS_URL", v, ("http", "https"))
    if (v := get("PROMETHEUS_TOKEN")) is not None:
        kw["prometheus_token"] = v
    if (v := get("PROMETHEUS_CA_BUNDLE")) is not None:
        kw["prometheus_ca"] = v  # checked when the Prometheus client is built: it names a file in the pod
    if (v := get("REDIS_URL")) is not None:
        kw["redis_url"] = check_url("REDIS_URL", v, ("redis", "rediss", "unix"))
    if (v := get("REDIS_PASSWORD")) is not None:
        kw["redis_password"] = v
    if (v := get("REDIS_CA_BUNDLE")) is not None:
        if not str(kw.get("redis_url") or "").startswith("rediss://"):
            raise ConfigError("REDIS_CA_BUNDLE is set but REDIS_URL is not a rediss:// (TLS) URL")
        kw["redis_ca_bundle"] = v  # checked when the client is built: it names a file in the pod
    if (v := get("KUBECONFIG")) is not None:
        kw["kubeconfig"] = v
    if (v := get("GPUBOT_SCENARIO")) is not None:
        kw["scenario"] = v
    if (v := get("GPUBOT_CLUSTER_NAME")) is not None:
        if role != "all" and not CLUSTER_NAME.match(v):
            raise ConfigError(
                f"GPUBOT_CLUSTER_NAME must be lowercase letters, digits and '-' (at most 63), got {v[:80]!r}"
            )
        kw["cluster_name"] = v
    if (v := get("GPUBOT_LOG_LEVEL")) is not None:
        if v.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
            raise ConfigError(f"GPUBOT_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {v!r}")
        kw["log_level"] = v.upper()
    for name, key, low, high in (
        ("GPUBOT_STATE_RETENTION_DAYS", "state_retention_days", 1, 365),
        ("GPUBOT_WORKERS", "workers", 1, 64),
        ("GPUBOT_HTTP_TIMEOUT_S", "http_timeout_s", 1, 300),
        ("GPUBOT_HTTP_MAX_CONNECTIONS", "http_max_connections", 8, 65536),
        ("GPUBOT_ALERT_REWALK_MINUTES", "alert_rewalk_minutes", 0, 1440),
        ("GPUBOT_ALERT_MAX_THREADS_PER_HOUR", "alert_max_threads_per_hour", 0, 1000),
        ("GPUBOT_ALERT_DUPLICATE_SECONDS", "alert_duplicate_seconds", 0, 3600),
        ("GPUBOT_ALERT_MAX_BODY_MIB", "alert_max_body_mib", 1, 256),
        ("GPUBOT_SAME_REQUEST_SECONDS", "same_request_s", 0, 86400),
        ("GPUBOT_USER_REQUESTS_PER_MINUTE", "user_requests_per_minute", 0, 10000),
        ("GPUBOT_SLACK_CHANNEL_MAX_QUEUED", "slack_max_queued", 0, 100000),
    ):
        if (v := get(name)) is not None:
            if not v.isdigit() or not low <= int(v) <= high:
                raise ConfigError(f"{name} must be a whole number from {low} to {high}, got {v!r}")
            kw[key] = int(v)
    for name, key, lowest, highest in (
        ("GPUBOT_HEARTBEAT_SECONDS", "heartbeat_s", 0.05, 300.0),
        ("GPUBOT_CLAIM_IDLE_SECONDS", "claim_idle_s", 0.2, 3600.0),
        ("GPUBOT_AGENT_SILENT_SECONDS", "agent_silent_s", 0.1, 3600.0),
        ("GPUBOT_DIGEST_PART_WAIT_SECONDS", "digest_part_wait_s", 0.1, 3600.0),
    ):
        if (v := get(name)) is not None:
            try:
                seconds = float(v)
            except ValueError:
                seconds = -1.0
            if not lowest <= seconds <= highest:
                raise ConfigError(
                    f"{name} must be a number of seconds from {lowest:g} to {highest:g}, got {v!r}"
                )
            kw[key] = seconds
    if (v := get("GPUBOT_ALERT_STALE_HOURS")) is not None:
        try:
            hours = float(v)
        except ValueError:
            hours = -1.0
        # From a second (the tests) to 30 days (when an incident's record is forgotten anyway).
        if not 1 / 3600 <= hours <= 720:
            raise ConfigError(
                f"GPUBOT_ALERT_STALE_HOURS must be a number of hours from 0.0003 to 720, got {v!r}"
            )
        kw["alert_stale_hours"] = hours
    if (v := get("GPUBOT_SLACK_HISTORY")) is not None:
        if v.lower() not in ("true", "false"):
            raise ConfigError(f"GPUBOT_SLACK_HISTORY must be true or false, got {v!r}")
        kw["slack_history"] = v.lower() == "true"
    if (v := get("GPUBOT_SLACK_CHANNEL_PACE_SECONDS")) is not None:
        try:
            pace = float(v)
        except ValueError:
            pace = -1.0
        if not 0.0 <= pace <= 10.0:
            raise ConfigError(f"GPUBOT_SLACK_CHANNEL_PACE_SECONDS must be a number from 0 to 10, got {v!r}")
        kw["slack_pace_s"] = pace
    if (v := get("GPUBOT_STREAM_MAXLEN")) is not None:
        if not v.isdigit() or not 100 <= int(v) <= 10_000_000:
            raise ConfigError(f"GPUBOT_STREAM_MAXLEN must be a whole number from 100 to 10000000, got {v!r}")
        kw["stream_maxlen"] = int(v)
    kw.update(ledger_settings(get, ConfigError))
    try:
        kw.update(redis_fields(get))
    except RedisConfigError as err:
        raise ConfigError(str(err)) from None
    cfg = Config(**kw)  # type: ignore[arg-type]
    if cfg.alert_token and not cfg.alert_channel:
        raise ConfigError(
            "GPUBOT_ALERT_CHANNEL is not set: GPUBOT_ALERT_TOKEN turns on POST /alertmanager, "
            "whose incident threads go to that channel"
        )
    if role not in ROLES:
        raise ConfigError(f"the role must be one of {', '.join(ROLES)}, got {role!r}")
    if (missing := role_needs(role, cfg.redis_url, cfg.redis_mode, cfg.request_key)) is not None:
        raise ConfigError(missing)
    if role != "all" and cfg.heartbeat_s >= cfg.claim_idle_s:
        raise ConfigError("GPUBOT_HEARTBEAT_SECONDS must be below GPUBOT_CLAIM_IDLE_SECONDS")
    if role == "agent":
        if not cfg.cluster_name:
            raise ConfigError("GPUBOT_CLUSTER_NAME is not set: an agent serves one named cluster")
        if not cfg.slack_bot_token:
            raise ConfigError("SLACK_BOT_TOKEN is not set: an agent posts its walks with the bot token")
        return cfg
    if need_slack:
        if not cfg.slack_bot_token:
            raise ConfigError("SLACK_BOT_TOKEN is not set: the bot token (xoxb-…) of the Slack app")
        if http and not cfg.slack_signing_secret:
            raise ConfigError(
                "SLACK_SIGNING_SECRET is not set: HTTP mode needs it to verify Slack's requests"
            )
        if not http and not cfg.slack_app_token:
            raise ConfigError(
                "SLACK_APP_TOKEN is not set: Socket Mode needs the app-level token (xapp-…); or use --http"
            )
    return cfg
