"""The ledger's and the diagnostics' settings (spec/interfaces.md, "Node history, repeat
offenders and RMA" and "GPU diagnostics from chat"), read by bot/ops/config.py's load_config."""

from __future__ import annotations

import re
from collections.abc import Callable

# The DCGM image the GPU Operator deploys for its standalone host engine (gpu-operator
# deployments/gpu-operator/values.yaml, `dcgm.repository/image/version`): dcgmi and nv-hostengine.
DEFAULT_DIAG_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:@-]{0,254}$", re.IGNORECASE)
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_HOST = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,250}[a-z0-9])?(:\d{1,5})?$", re.IGNORECASE)

# (variable, Config field, lowest, highest): the rules' thresholds (layers/ledger_rules.py).
THRESHOLDS = (
    ("GPUBOT_LEDGER_REPEAT_FATAL_XID", "ledger_repeat_fatal_xid", 1, 1000),
    ("GPUBOT_LEDGER_REPEAT_NODE_FAULTS", "ledger_repeat_node_faults", 1, 1000),
    ("GPUBOT_LEDGER_REPEAT_APP_XID", "ledger_repeat_app_xid", 1, 1000),
)


def ledger_settings(get: Callable[[str], str | None], error: type[ValueError]) -> dict[str, object]:
    """Config fields from the environment; a malformed value raises `error` naming the variable."""
    kw: dict[str, object] = {}
    for name, key, low, high in (
        ("GPUBOT_LEDGER_RETENTION_DAYS", "ledger_retention_days", 1, 3650),
        *THRESHOLDS,
    ):
        if (v := get(name)) is not None:
            if not v.isdigit() or not low <= int(v) <= high:
                raise error(f"{name} must be a whole number from {low} to {high}, got {v!r}")
            kw[key] = int(v)
    if (v := get("GPUBOT_DIAG_ENABLED")) is not None:
        if v.lower() not in ("true", "false"):
            raise error(f"GPUBOT_DIAG_ENABLED must be true or false, got {v!r}")
        kw["diag_enabled"] = v.lower() == "true"
    if (v := get("GPUBOT_DIAG_IMAGE")) is not None:
        if not _IMAGE.match(v):
            raise error(f"GPUBOT_DIAG_IMAGE is not an image reference: {v[:80]!r}")
        kw["diag_image"] = v
    if (v := get("GPUBOT_DIAG_NAMESPACE")) is not None:
        if not _NAMESPACE.match(v):
            raise error(f"GPUBOT_DIAG_NAMESPACE is not a valid namespace name: {v[:80]!r}")
        kw["diag_namespace"] = v
    if (v := get("GPUBOT_DIAG_HOSTENGINE")) is not None:
        if not _HOST.match(v):
            raise error(f"GPUBOT_DIAG_HOSTENGINE must be HOST or HOST:PORT, got {v[:80]!r}")
        kw["diag_hostengine"] = v
    return kw
