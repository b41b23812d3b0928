"""Structured logs: one JSON object per line, carrying the walk id, never a token.

`setup_logging("INFO")` installs it on the root logger (stderr). A record gets
`walk_id` from `extra={"walk_id": ...}` or, when not given, from the current
`walk_scope(walk_id)`; other `extra` fields are kept as JSON fields.

Secrets are masked (bot/ops/secrets.py, the same masking as everything said to
Slack and written to bundles) twice: `RedactSecrets`, a logging.Filter, rewrites the
message, its arguments and the exception text of every record before any
handler sees it; the JSON formatter masks its finished line again, so a token
slipped into an `extra` field or a traceback is caught too.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from bot.ops.secrets import mask_text

__all__ = ["JsonFormatter", "RedactSecrets", "setup_logging", "walk_id_var", "walk_scope"]

walk_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("gpubot_walk_id", default=None)

# Attributes every LogRecord has; anything else came in through `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class RedactSecrets(logging.Filter):
    """Masks tokens and passwords in the message, its arguments and the exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a bad %-format: keep what can be kept
            message = f"{record.msg} {record.args}"
        record.msg, record.args = mask_text(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_text(record.exc_text)
            record.exc_info = None  # the masked text is what gets written, not a fresh traceback
        return True


class JsonFormatter(logging.Formatter):
    """ts, level, logger, msg, walk_id (when known), extra fields, exc (when any)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        walk_id = getattr(record, "walk_id", None) or walk_id_var.get()
        if walk_id:
            entry["walk_id"] = str(walk_id)
        for key, value in vars(record).items():
            if key not in _STANDARD and key != "walk_id" and not key.startswith("_"):
                entry[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exc"] = record.exc_text
        return mask_text(json.dumps(entry, default=str, ensure_ascii=False))


@contextlib.contextmanager
def walk_scope(walk_id: str | None) -> Iterator[None]:
    """Every record logged inside carries this walk id (threads started inside do not inherit it)."""
    token = walk_id_var.set(walk_id)
    try:
        yield
    finally:
        walk_id_var.reset(token)


def setup_logging(level: str | int = "INFO", stream: TextIO | None = None) -> logging.Handler:
    """Replace the root logger's handlers with one JSON handler on stderr; returns it."""
    if isinstance(level, str):
        resolved = logging.getLevelName(level.strip().upper())
        if not isinstance(resolved, int):
            raise ValueError(f"log level must be DEBUG, INFO, WARNING or ERROR, got {level!r}")
        level = resolved
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactSecrets())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # Libraries that log request details at DEBUG (urllib3 headers, slack_sdk payloads) stay at INFO.
    for noisy in ("urllib3", "slack_sdk", "slack_bolt", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(level, logging.INFO))
    return handler
