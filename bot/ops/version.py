"""gpubot's version: one reader, the installed package's metadata (pyproject.toml's `version`).

`gpubot --version`, the agents' heartbeat (`/gpu clusters` shows it) and every request the gateway
queues carry this one value; nothing else in the code spells a version.
"""

from __future__ import annotations

import functools
import importlib.metadata

UNKNOWN = "unknown"  # running from a source tree that was never installed


@functools.cache
def gpubot_version() -> str:
    """The installed gpubot's version (looked up once: importlib.metadata costs ~20 ms)."""
    try:
        return importlib.metadata.version("gpubot")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN
