"""What a scenario is: its data, its one-line error, and how its times are read.

Shared by reading (bot/sources/scenario.py, bot/sources/scenario_series.py) and
writing (tests/scenario_write.py) scenario files; it imports neither.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import msgspec

from bot.sources.series import SeriesData

ABSOLUTE_SECONDS = 1e9  # numbers above this are Unix seconds, at or below 0 are relative to `now`
TIME_EXPECTED = "expected seconds relative to now (<= 0), Unix seconds (> 1e9) or an RFC 3339 time"


class ScenarioError(Exception):
    """One line: `<file>: <key path>: <what was expected>`."""

    def __init__(self, source: str, key_path: str, message: str) -> None:
        super().__init__(": ".join(p for p in (source, key_path, message) if p))
        self.source = source
        self.key_path = key_path
        self.message = message


class Scenario(msgspec.Struct, frozen=True):
    name: str
    description: str
    now: float  # unix seconds
    objects: list[dict[str, Any]]
    logs: dict[str, str]
    series: list[SeriesData]
    path: str | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)  # the `x-` keys, kept as written


def rfc3339(t: float) -> str:
    dt = datetime.fromtimestamp(t, tz=UTC)
    text = dt.isoformat(timespec="milliseconds" if t % 1 else "seconds")
    return text.replace("+00:00", "Z")


def show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_datetime(value: object) -> float | None:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str) and len(value.strip()) > 10:
        try:
            dt = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    else:
        return None
    # Kubernetes times are UTC; a time written without an offset is read as UTC.
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def parse_now(value: object, source: str) -> float:
    t = parse_datetime(value)
    if t is None:
        n = number(value)
        t = n if n is not None and math.isfinite(n) and n > ABSOLUTE_SECONDS else None
    if t is None:
        raise ScenarioError(
            source, "now", f"expected an RFC 3339 time or Unix seconds (> 1e9), got {show(value)}"
        )
    return t


def parse_time(value: object, now: float, source: str, path: str) -> float:
    n = number(value)
    if n is not None and math.isfinite(n):
        if n <= 0:
            return now + n
        if n > ABSOLUTE_SECONDS:
            return n
    elif (t := parse_datetime(value)) is not None:
        return t
    raise ScenarioError(source, path, f"{TIME_EXPECTED}, got {show(value)}")
