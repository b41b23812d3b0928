"""Signatures of GPU failures in logs and events.

Pure text matching, shared by the layers. Real logs come with prefixes
(`kubectl logs --timestamps`, `--prefix`, klog headers, Go's log dates, the
systemd journal), in either quote style and any case; every pattern here is a
case-insensitive search, so a prefix never hides a line. Evidence keeps the
line as it was read (trimmed), never a paraphrase.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

import msgspec

# --- prefixes --------------------------------------------------------------------

# `kubectl logs --prefix`: "[pod/name/container] ".
_KUBECTL_PREFIX = re.compile(r"^\[pod/[^\]\s]+\]\s+")
# `kubectl logs --timestamps`: RFC 3339 with nanoseconds and Z or an offset.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\s+")
# systemd journal: "May 05 18:42:19 host kubelet[1311]: ".
_JOURNAL = re.compile(r"^[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s+\S+\s+[\w.@-]+(?:\[\d+\])?:\s+")
# journal without the date (as pasted in issues): "kubelet[1311]: ".
_PROCESS = re.compile(r"^[\w.@-]+\[\d+\]:\s+")
# klog: "I0624 22:58:05.486593       1 health.go:159] ".
_KLOG = re.compile(r"^[IWEF]\d{4}\s+\d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[\w./-]+:\d+\]\s+")
# Go's log package: "2022/05/13 23:09:23 ".
_GOLOG = re.compile(r"^\d{4}/\d{2}/\d{2}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?\s+")
# The CRI log file format (/var/log/pods, as pasted from a node): "stderr F ".
_CRI_STREAM = re.compile(r"^(?:stdout|stderr)\s+[FP]\s+")
# logrus text format (the validator): 'time="…" level=info msg="…"' keeps only the message.
_LOGRUS = re.compile(r'^time="[^"]*"\s+level=\w+\s+msg=(?:"((?:[^"\\]|\\.)*)"|(\S+))(.*)$')
# Terminal colour/cursor codes some images print even when not on a terminal (CSI sequences with
# intermediate bytes, two-character escapes), and other control characters, CR included; tab stays.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]")


def clean_line(line: str) -> str:
    """One log line without colour codes or control characters, trimmed.

    Per line, never over a whole log: \\v, \\f and \\x1c-\\x1e are line breaks to str.splitlines,
    so removing them first would glue lines together.
    """
    return _CONTROL.sub("", line).strip()


def strip_prefixes(line: str) -> str:
    """The message of a log line without its transport and logger prefixes."""
    text = clean_line(line)
    for pattern in (_KUBECTL_PREFIX, _RFC3339, _CRI_STREAM, _JOURNAL, _PROCESS, _KLOG, _GOLOG):
        text = pattern.sub("", text, count=1)
    m = _LOGRUS.match(text)
    if m:
        msg = m.group(1).replace('\\"', '"') if m.group(1) is not None else m.group(2)
        text = f"{msg}{m.group(3)}"
    return text.strip()


# Timestamps: `kubectl logs --timestamps` (RFC 3339), klog (no year), Go's log package. Looser
# than the prefixes above on purpose: a date is enough to place a line in time, a bare `[…]`
# prefix (any `--prefix` form) is skipped, and a space may stand for the RFC 3339 `T`.
_TS_BRACKETS = re.compile(r"^\[[^\]]*\]\s+")
_TS_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:?\d{2})?\s")
_TS_KLOG = re.compile(r"^[IWEF](\d{2})(\d{2})\s+(\d{2}):(\d{2}):(\d{2})")
_TS_GOLOG = re.compile(r"^(\d{4})/(\d{2})/(\d{2})\s+(\d{2}):(\d{2}):(\d{2})")
_CLOCK_SKEW_S = 24 * 3600  # a klog date up to a day ahead of now is still this year's


def line_time(line: str, now: float) -> float | None:
    """Unix time of a log line's own timestamp, or None when it has none we can read."""
    text = _TS_BRACKETS.sub("", line.strip(), count=1)
    try:
        m = _TS_RFC3339.match(text)
        if m:
            frac = (m.group(3) or "0")[:6]
            zone = m.group(4) or "Z"
            if zone != "Z" and ":" not in zone:
                zone = zone[:3] + ":" + zone[3:]
            return datetime.fromisoformat(
                f"{m.group(1)}T{m.group(2)}.{frac}{zone.replace('Z', '+00:00')}"
            ).timestamp()
        m = _TS_KLOG.match(text)
        if m:
            # klog carries no year: take now's, or the year before when that lands in the future.
            year = datetime.fromtimestamp(now, UTC).year
            month, day, hh, mm, ss = (int(g) for g in m.groups())
            ts = datetime(year, month, day, hh, mm, ss, tzinfo=UTC).timestamp()
            if ts > now + _CLOCK_SKEW_S:
                ts = datetime(year - 1, month, day, hh, mm, ss, tzinfo=UTC).timestamp()
            return ts
        m = _TS_GOLOG.match(text)
        if m:
            y, mo, d, hh, mm, ss = (int(g) for g in m.groups())
            return datetime(y, mo, d, hh, mm, ss, tzinfo=UTC).timestamp()
    except ValueError:
        return None
    return None


def lines_of(text: str | None) -> list[str]:
    """Non-blank lines, cleaned (clean_line); CRLF endings split like LF."""
    if not text:
        return []
    lines = text.splitlines()
    # Most logs carry no escape or control character: skip the per-line regex over 100k lines.
    tidy = clean_line if _CONTROL.search(text) else str.strip
    return [ln for ln in map(tidy, lines) if ln]


EVIDENCE_CHARS = 400  # one evidence line; a minified JSON log line can be 100 kB


def clip(line: str, at: int = 0) -> str:
    """A line cut to EVIDENCE_CHARS, keeping position `at` (where the signature matched) in view."""
    if len(line) <= EVIDENCE_CHARS:
        return line
    start = max(0, min(at - EVIDENCE_CHARS // 4, len(line) - EVIDENCE_CHARS))
    head = "…" if start else ""
    tail = "…" if start + EVIDENCE_CHARS < len(line) else ""
    return f"{head}{line[start : start + EVIDENCE_CHARS]}{tail}"


def tail(text: str | None, n: int = 5) -> list[str]:
    """The last n non-blank lines, as evidence."""
    return lines_of(text)[-n:] if n > 0 else []


class Signature(msgspec.Struct, frozen=True, dict=True):  # dict: for the compiled patterns
    """A failure recognised by any of `patterns`, unless a line also matches `unless`.

    The patterns are kept as their source and compiled when the signature is first searched
    (case-insensitive): a walk searches a few of the ~150 patterns, and compiling all of them
    cost every `gpubot why` ~10 ms at start-up."""

    name: str
    patterns: tuple[str, ...]
    unless: tuple[str, ...] = ()

    @cached_property
    def compiled(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in self.patterns)

    @cached_property
    def compiled_unless(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in self.unless)

    def search(self, line: str) -> re.Match[str] | None:
        """Where the signature matches the line, or None (also when an `unless` pattern matches)."""
        hit = next((m for p in self.compiled if (m := p.search(line))), None)
        if hit is None or any(u.search(line) for u in self.compiled_unless):
            return None
        return hit

    def matches(self, line: str) -> bool:
        return self.search(line) is not None

    def find(self, text: str | None, limit: int = 5) -> list[str]:
        """The first `limit` matching lines of a log (trimmed, prefixes kept, clipped around the match)."""
        out: list[str] = []
        for line in lines_of(text):
            hit = self.search(line)
            if hit is not None:
                out.append(clip(line, hit.start()))
                if len(out) >= limit:
                    break
        return out

    def first(self, texts: Iterable[str | None]) -> str | None:
        for text in texts:
            hit = self.find(text, 1)
            if hit:
                return hit[0]
        return None


def _re(*patterns: str) -> tuple[str, ...]:
    return patterns


# Quotes around "nvidia" may be ", ', escaped \" (kubelet journal, JSON), &#34; or typographic
# quotes (“nvidia”, as pasted into issues and chat).
_Q = r"""(?:\\*["'\u201c\u201d\u2018\u2019]|&#34;|&quot;)?"""

NO_RUNTIME_NVIDIA = Signature(
    "no-runtime-nvidia",
    _re(
        # containerd (CRI plugin): "failed to get sandbox runtime: no runtime for "nvidia" is configured",
        # containerd 2.x: "unable to get OCI runtime for sandbox …: no runtime for "nvidia" is configured".
        rf"no\s+runtime\s+for\s+{_Q}nvidia{_Q}\s+is\s+configured",
        # CRI-O: "failed to find runtime handler nvidia from runtime list map[crun:… runc:…]".
        rf"failed\s+to\s+find\s+runtime\s+handler\s+{_Q}nvidia{_Q}(?![\w.-])",
    ),
)

# The device plugin's NVML start-up failure (k8s-device-plugin factory.go / main.go, every
# release since 1.0): "Failed to start nvml with error" (1.0-beta), "Failed to initialize NVML:
# could not load NVML library." (≤ v0.12), "nvml init failed: ERROR_LIBRARY_NOT_FOUND" and
# "NVML not detected: could not load NVML library: libnvidia-ml.so.1: …" (v0.14+), and
# "Incompatible strategy detected auto" (v0.15+: neither NVML nor Tegra could be loaded, printed
# with "did you configure the NVIDIA Container Toolkit?"). Errors that merely mention NVML while
# building devices, such as an invalid MIG configuration, are an operand failing, not NVML
# failing to start.
DEVICE_PLUGIN_NVML_FAILED = Signature(
    "device-plugin-nvml-failed",
    _re(
        r"failed\s+to\s+initiali[sz]e\s+NVML",
        r"error\s+initiali[sz]ing\s+NVML",
        r"failed\s+to\s+start\s+nvml",
        r"nvml\s+init\s+failed",
        r"could\s+not\s+load\s+NVML\s+library",
        r"incompatible\s+strategy\s+detected",
    ),
    unless=_re(r"invalid\s+MIG", r"MIG\s+config", r"migEnabled"),
)

# The application finding no usable GPU: the CUDA runtime and its samples (deviceQuery's
# "cudaGetDeviceCount returned 100"), PyTorch, TensorFlow/JAX (cuInit), vLLM, NVML, nvidia-smi.
# A GPU that is seen but misused (no kernel image for the architecture, out of memory) is not this.
APP_SEES_NO_GPU = Signature(
    "app-sees-no-gpu",
    _re(
        r"no\s+CUDA-capable\s+device\s+is\s+detected",
        r"CUDA\s+driver\s+version\s+is\s+insufficient",
        r"cudaGetDeviceCount\(\)",
        r"cudaGetDeviceCount\s+(?:returned|failed)",
        r"CUDA\s+Driver\s+UNAVAILABLE",
        r"CUDA_ERROR_NO_DEVICE",
        r"cudaErrorNoDevice|cudaErrorInsufficientDriver",
        r"No\s+CUDA\s+GPUs\s+are\s+available",
        r"CUDA\s+driver\s+initiali[sz]ation\s+failed",
        r"Found\s+no\s+NVIDIA\s+driver\s+on\s+your\s+system",
        r"The\s+NVIDIA\s+driver\s+on\s+your\s+system\s+is\s+too\s+old",
        r"CUDA-capable\s+devices?(?:\(s\))?\s+(?:is/are|are|is)\s+busy\s+or\s+unavailable",
        r"failed\s+call\s+to\s+cuInit",
        r"could\s+not\s+retrieve\s+CUDA\s+device\s+count",
        r"Failed\s+to\s+infer\s+device\s+type",  # vLLM found no CUDA platform
        r"NVML\s+Shared\s+Library\s+Not\s+Found",  # pynvml
        r"failed\s+to\s+initiali[sz]e\s+NVML",
        r"NVIDIA-SMI\s+has\s+failed",
        r"nvidia-smi:\s+(?:command\s+)?not\s+found",  # the toolkit did not inject its utilities
        # PyTorch's lazy init when the driver answers badly (k8s-device-plugin issue 319, GKE's issue 248).
        r"CUDA\s+unknown\s+error\s+-\s+this\s+may\s+be\s+due\s+to\s+an\s+incorrectly\s+set\s+up\s+environment",
        # cuInit failing under llama.cpp/ggml (llama.cpp issue 7218: nvidia_uvm not loaded), Ollama's
        # driver probe (`…init failure: 999`) and TensorRT's builder (35: driver too old, 46: busy): CUDA
        # itself could not start. Error 2 is out of memory, which is layer 4's, not this.
        r"failed\s+to\s+initiali[sz]e\s+CUDA\b",
        r"cuda\s+driver\s+library\s+init\s+failure:\s*(?!2\b)\d+",
        r"CUDA\s+initiali[sz]ation\s+failure\s+with\s+error:\s*(?!2\b)\d+",
        # The NGC images' entrypoint banner: the container started without the NVIDIA runtime or devices.
        r"The\s+NVIDIA\s+Driver\s+was\s+not\s+detected",
        r"No\s+supported\s+GPU\(s\)\s+detected",
        # JAX/XLA (jax issues 24866, 9859) and TensorFlow 2.14+ (cudart_stub.cc).
        r"FAILED_PRECONDITION:\s+No\s+visible\s+GPU\s+devices",
        r"no\s+supported\s+devices\s+found\s+for\s+platform\s+CUDA",
        r"Could\s+not\s+find\s+cuda\s+drivers\s+on\s+your\s+machine",
    ),
    # A Python traceback quotes the raising source line before the error itself: keep the error.
    unless=_re(r"\braise\s+\w*(?:Error|Exception)\s*\("),
)

# NVML's `Unknown Error` in a container (not `Failed to initialize NVML: Driver/library version
# mismatch` and the like): the container's device cgroup lost the GPUs after it started
# (NVIDIA/nvidia-container-toolkit#48, #1227; gpu-operator#485).
NVML_UNKNOWN_ERROR = re.compile(r"Failed\s+to\s+initiali[sz]e\s+NVML:\s+Unknown\s+Error", re.IGNORECASE)

# Waiting reasons of a failing operand container (spec L2_OPERAND_FAILING).
FAILING_WAIT_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "Error",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerError",
        "CreateContainerConfigError",
        "RunContainerError",
        "InvalidImageName",
    }
)
_FAILING_LOWER = {r.lower(): r for r in FAILING_WAIT_REASONS}


def failing_wait_reason(reason: str | None) -> str | None:
    """The canonical failing reason, accepting kubectl's display form (`Init:CrashLoopBackOff`)."""
    if not reason:
        return None
    bare = reason.strip().removeprefix("Init:").strip()
    return _FAILING_LOWER.get(bare.lower())


# --- GPU memory in application logs ---------------------------------------------------

# GPU out-of-memory in application logs: PyTorch, the CUDA runtime, TensorFlow, XLA/JAX, cuBLAS,
# raw cudaMalloc (llama.cpp …), vLLM V1's KV-cache check, TensorRT-LLM's checked CUDA calls
# (`[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, …): out of memory`),
# NCCL's allocator (`NCCL WARN Cuda failure 'out of memory'`, `Cuda failure 2 'out of memory'` since
# 2.19), CTranslate2 (`CUDA failed with error out of memory`) and SGLang's KV-cache pool (`Not enough
# memory. Please try to increase --mem-fraction-static`). gRPC's RESOURCE_EXHAUSTED and
# host-side MemoryError / java.lang.OutOfMemoryError are not these.
GPU_OOM = re.compile(
    r"CUDA out of memory|(?<!java\.lang\.)OutOfMemoryError|CUDA error: out of memory"
    r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|OOM when allocating tensor"
    r"|RESOURCE_EXHAUSTED:\s*Out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaMalloc\w*\s+failed:\s*out of memory"
    r"|larger than the available KV cache memory"
    r"|CUDA runtime error in\b[^\n]{0,200}?:\s*out of memory|Cuda failure (?:\d+ )?'out of memory'"
    r"|CUDA failed with error out of memory"
    r"|Not enough memory\.\s*Please try to increase --mem-fraction-static",  # SGLang's KV-cache pool
    re.IGNORECASE,
)
VLLM_FREE_MEMORY = re.compile(
    # The device is named since vLLM V1 (`cuda:0`, or the rank glued on: `device 0(…)`).
    r"Free memory on device\s*(?:(?:cuda:)?\d{1,3}\s*)?(?:\((?P<free>[\d.]+)\s*/\s*(?P<total>[\d.]+)\s*GiB\))?"
    r"(?:(?!Free memory on device).)*?"
    r"less than desired GPU memory utilization\s*(?:\((?P<util>[\d.]+)\s*,\s*(?P<want>[\d.]+)\s*GiB\))?",
    re.IGNORECASE,
)
VLLM_NO_CACHE = re.compile(r"No available memory for the cache blocks", re.IGNORECASE)
# `grep -iE` for a person to find the same lines (a superset, for reading, not for deciding).
GPU_OOM_GREP = (
    "out of memory|OutOfMemoryError|Free memory on device|cache blocks|KV cache memory|OOM when allocating"
    "|ALLOC_FAILED"
)


def gpu_oom_lines(text: str | None) -> list[str]:
    """Lines of an application log saying the GPU ran out of memory (cleaned, cut at EVIDENCE_CHARS)."""
    return [
        line[:EVIDENCE_CHARS]
        for line in lines_of(text)
        if GPU_OOM.search(line) or VLLM_FREE_MEMORY.search(line) or VLLM_NO_CACHE.search(line)
    ]


# --- events ------------------------------------------------------------------------


def event_message(ev: Mapping[str, Any]) -> str:
    """An Event's text: core/v1 `message`, events.k8s.io `note`."""
    return str(ev.get("message") or ev.get("note") or "")


def event_time(ev: Mapping[str, Any]) -> str:
    """For ordering: RFC 3339 strings sort in time order."""
    series = ev.get("series") or {}
    return str(
        ev.get("lastTimestamp")
        or series.get("lastObservedTime")  # an event series: the latest occurrence
        or ev.get("eventTime")
        or ev.get("firstTimestamp")
        or ""
    )


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def event_line(ev: Mapping[str, Any]) -> str:
    """An event as `kubectl describe` shows it: type, reason, (xN), source: message."""
    count = (
        _int(ev.get("count"))
        or _int((ev.get("series") or {}).get("count"))
        or _int(ev.get("deprecatedCount"))
    )
    source = (
        (ev.get("source") or {}).get("component")
        or ev.get("reportingComponent")
        or ev.get("reportingController")  # events.k8s.io/v1 spelling
        or ""
    )
    times = f" (x{count})" if count > 1 else ""
    msg = " ".join(event_message(ev).split())
    return " ".join(f"{ev.get('type') or 'Warning'} {ev.get('reason')}{times} {source}:".split()) + f" {msg}"
