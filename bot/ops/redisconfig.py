"""The Redis settings besides REDIS_URL: the deployment's shape and the request key.

- `GPUBOT_REDIS_MODE` = `single` (REDIS_URL is the server), `cluster`
  (REDIS_URL names any node of a Redis Cluster; database 0 only) or `sentinel`
  (`REDIS_SENTINELS` = host:port,…, `REDIS_SENTINEL_MASTER`, and
  `REDIS_SENTINEL_PASSWORD` where the Sentinels need one; `REDIS_PASSWORD` is
  the master's).
- `GPUBOT_REQUEST_KEY`: the key the gateway signs each queued request with
  (HMAC-SHA256) and agents check it by, so that whoever can write to Redis
  cannot act as an operator. It is not the Redis password: only gateway and
  agents hold it. Required for both roles, at least 32 characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MODES = ("single", "cluster", "sentinel")
REQUEST_KEY_MIN = 32
_HOSTPORT = re.compile(r"^([A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):(\d{1,5})$")
_MASTER = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


class RedisConfigError(ValueError):
    """One line naming the setting (bot/ops/config.py turns it into a ConfigError)."""


def redis_fields(get: Callable[[str], str | None]) -> dict[str, object]:
    """The Config fields of these settings, checked."""
    kw: dict[str, object] = {}
    if (v := get("GPUBOT_REDIS_MODE")) is not None:
        if v.lower() not in MODES:
            raise RedisConfigError(f"GPUBOT_REDIS_MODE must be single, cluster or sentinel, got {v[:40]!r}")
        kw["redis_mode"] = v.lower()
    if (v := get("REDIS_SENTINELS")) is not None:
        kw["redis_sentinels"] = sentinels(v)
    if (v := get("REDIS_SENTINEL_MASTER")) is not None:
        if not _MASTER.match(v):
            raise RedisConfigError(f"REDIS_SENTINEL_MASTER is not a master name: {v[:80]!r}")
        kw["redis_sentinel_master"] = v
    if (v := get("REDIS_SENTINEL_PASSWORD")) is not None:
        kw["redis_sentinel_password"] = v
    if (v := get("GPUBOT_REQUEST_KEY")) is not None:
        if len(v) < REQUEST_KEY_MIN:
            raise RedisConfigError(
                f"GPUBOT_REQUEST_KEY is too short ({len(v)} characters): use at least {REQUEST_KEY_MIN} "
                "random characters (openssl rand -hex 32), the same on the gateway and every agent"
            )
        kw["request_key"] = v
    mode = kw.get("redis_mode", "single")
    if mode == "sentinel" and ("redis_sentinels" not in kw or "redis_sentinel_master" not in kw):
        raise RedisConfigError(
            "GPUBOT_REDIS_MODE=sentinel needs REDIS_SENTINELS (host:port,…) and REDIS_SENTINEL_MASTER"
        )
    if mode != "sentinel" and "redis_sentinels" in kw:
        raise RedisConfigError("REDIS_SENTINELS is set but GPUBOT_REDIS_MODE is not sentinel")
    return kw


def sentinels(text: str) -> tuple[tuple[str, int], ...]:
    found: list[tuple[str, int]] = []
    for item in text.split(","):
        item = item.strip()
        m = _HOSTPORT.match(item)
        if m is None or not 1 <= int(m.group(2)) <= 65535:
            raise RedisConfigError(f"REDIS_SENTINELS: {item[:80]!r} is not host:port")
        found.append((m.group(1).strip("[]"), int(m.group(2))))
    if not found or len(found) > 32:
        raise RedisConfigError("REDIS_SENTINELS must name 1 to 32 Sentinels as host:port,…")
    return tuple(found)


def role_needs(role: str, redis_url: str | None, mode: str, request_key: str | None) -> str | None:
    """What a gateway or agent is missing, as the one line to say; None when nothing."""
    if role == "all":
        return None
    if mode != "sentinel" and not redis_url:
        return f"REDIS_URL is not set: the {role} reaches the other side through Redis Streams"
    if not request_key:
        return (
            f"GPUBOT_REQUEST_KEY is not set: the {role} signs (gateway) or checks (agent) every queued "
            "request with it; set the same random key of at least 32 characters on both"
        )
    return None
