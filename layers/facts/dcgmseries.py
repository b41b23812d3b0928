"""The DCGM and vLLM series the layers read, and what telemetry says about one GPU (`GpuFacts`).

The names and the per-GPU record shared by the walk's read (gpufacts.py) and the digest's
(fleethealth.py); how series are folded into records is gpuassembly.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import msgspec

from layers.facts.hosts import PodRef, promql_matcher

DAY_S = 24 * 3600
PREEMPTION_WINDOW_S = 300

FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
LAST_XID = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT"  # a gauge: Xids within the exporter's window
# Counters since the exporter started (dcgm-exporter 4.x, opt-in), a series appearing only once its Xid
# or event occurs: news of the last 24 h when it changed or first appeared then (`changed`), never by
# its value, which may be days old.
XID_TOTAL = "DCGM_EXP_XID_ERRORS_TOTAL"
CORRECTABLE_ROWS = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
UNCORRECTABLE_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
# Rows remapped but not yet in effect: they wait for a GPU reset (DCGM 3.x field 395, where exported).
ROW_REMAP_PENDING = "DCGM_FI_DEV_ROW_REMAP_PENDING"
# DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT (label throttle_reason) is the name before dcgm-exporter PR #261.
CLOCK_EVENTS = "DCGM_EXP_CLOCK_EVENTS_COUNT|DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT"
CLOCK_TOTAL = "DCGM_EXP_CLOCK_EVENTS_TOTAL"
CLOCK_EVENT_LABELS = ("clock_event", "throttle_reason")
# MIG instance labels; DCGM repeats a GPU's device fields on each of its instances' series (sample 30).
MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")
# Signals of the physical GPU's memory: a MIG instance's series repeats its GPU's value, counted once.
WHOLE_GPU_FIELDS = frozenset(
    {
        "correctable_rows",
        "uncorrectable_rows",
        "correctable_rows_24h",
        "uncorrectable_rows_24h",
        "row_remap_failure",
        "row_remap_pending",
    }
)
VLLM_PREEMPTIONS = "vllm:num_preemptions_total"
VLLM_INFO = "vllm:cache_config_info|vllm:vllm_config_info|vllm:num_preemptions_total"

# --- clock events ------------------------------------------------------------------

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_REASON_PREFIX = re.compile(r"^(?:dcgm_)?(?:clocks?_(?:event|throttle)_reasons?_)")


def clock_event_name(raw: str) -> str:
    """Canonical clock event name: `HW_SLOWDOWN`, `HwSlowdown` → hw_slowdown; `sw_thermal_slowdown` → sw_thermal."""
    text = raw.strip()
    if text.lower() != text and text.upper() != text:
        text = _CAMEL.sub("_", text)
    name = re.sub(r"[\s\-]+", "_", text.lower())
    name = _REASON_PREFIX.sub("", name)
    if name.endswith("_slowdown") and name != "hw_slowdown":
        name = name.removesuffix("_slowdown")
    return name


# --- per-GPU facts -----------------------------------------------------------------


class GpuFacts(msgspec.Struct, frozen=True):
    """What telemetry says about one GPU (or one MIG instance). None = not exported."""

    node: str | None
    host: str  # the Hostname/hostname label value as exported (node or exporter pod name)
    host_key: str  # "Hostname" or "hostname" ("" when the series has none)
    gpu: str
    uuid: str
    model: str = ""
    mig_instance: str | None = None  # "1g.5gb/13"
    fb_used_mib: float | None = None
    fb_free_mib: float | None = None
    last_xid: int = 0  # DCGM_FI_DEV_XID_ERRORS: the last Xid ever seen, it does not reset; 0 = none
    last_xid_message: str | None = None  # the exporter's err_msg label, where exported
    # The gauge changed in the last 24 h or its series began then: only then is last_xid news.
    last_xid_recent: bool = False
    xid_counts_24h: Mapping[int, float] = msgspec.field(default_factory=dict)  # peak windowed count per Xid
    xid_totals_24h: Mapping[int, float] = msgspec.field(
        default_factory=dict
    )  # since-start counter: changes in 24 h
    correctable_rows: float | None = None
    uncorrectable_rows: float | None = None
    correctable_rows_24h: float | None = None  # increase over 24 h
    uncorrectable_rows_24h: float | None = None
    row_remap_failure: float | None = None  # max over 24 h
    row_remap_pending: float | None = None  # now; None where the exporter does not export it
    clock_events_24h: Mapping[str, float] = msgspec.field(
        default_factory=dict
    )  # canonical name -> peak count
    clock_totals_24h: Mapping[str, float] = msgspec.field(
        default_factory=dict
    )  # canonical name -> changes in 24 h
    pods: tuple[PodRef, ...] = ()

    @property
    def fb_ratio(self) -> float | None:
        if self.fb_used_mib is None or self.fb_free_mib is None:
            return None
        total = self.fb_used_mib + self.fb_free_mib
        return self.fb_used_mib / total if total > 0 else None

    @property
    def label(self) -> str:
        """How a person names it: `GPU 3 (GPU-0f3c…)`, with the MIG instance when there is one."""
        mig = f" MIG {self.mig_instance}" if self.mig_instance else ""
        return f"GPU {self.gpu or '?'}{mig} ({self.uuid or 'no UUID'})"

    def matcher(self, with_gpu: bool = True) -> str:
        """PromQL matcher selecting this GPU's series (or its node's when with_gpu is False)."""
        pairs: dict[str, str] = {}
        if self.host_key:
            pairs[self.host_key] = self.host
        if with_gpu and self.gpu:
            pairs["gpu"] = self.gpu
        return promql_matcher(pairs)

    @property
    def rows_rising(self) -> bool:
        return (self.correctable_rows_24h or 0) > 0 or (self.uncorrectable_rows_24h or 0) > 0
