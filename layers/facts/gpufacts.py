"""Per-GPU facts from fleet-wide telemetry (dcgm-exporter and vLLM series).

Reads are one Telemetry call per signal for every requested node at once, never
per node or per GPU: the walk asks about one or a few nodes, the daily digest
about the whole fleet (80,000 GPUs) in at most seven calls.

Which series belong to which node and workload: layers/facts/hosts.py.

The walk's shared read (with the target pod's vLLM facts) is layers/facts/walkfacts.py.

Why one module past 400 lines: its two reads (the walk's `read_gpu_facts`, the digest's
`read_fleet_health`) are two selections over one private assembly of per-GPU facts
(`_Assembly`: which series is whose, the last-Xid gauge's age); apart they would export it.
Which series belong to which node already went to hosts.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from layers.facts.hosts import (
    DRA_CLAIM_LABELS,
    ClaimRef,
    HostMap,
    PodRef,
    host_label,
    pod_of,
    pod_selector,
    promql_matcher,
    selector_for,
)
from layers.facts.rowgrowth import verified_growth
from layers.sources import BEFORE_WINDOW_S, Read, Sample, Selector, Telemetry, read_all

DAY_S = 24 * 3600
PREEMPTION_WINDOW_S = 300

FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
LAST_XID = "DCGM_FI_DEV_XID_ERRORS"
XID_COUNT = "DCGM_EXP_XID_ERRORS_COUNT|DCGM_EXP_XID_ERRORS_TOTAL"
CORRECTABLE_ROWS = "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"
UNCORRECTABLE_ROWS = "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"
ROW_REMAP_FAILURE = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
# DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT (label throttle_reason) is the name before dcgm-exporter PR #261.
CLOCK_EVENTS = (
    "DCGM_EXP_CLOCK_EVENTS_COUNT|DCGM_EXP_CLOCK_EVENTS_TOTAL|DCGM_FI_EXP_CLOCK_THROTTLE_REASONS_COUNT"
)
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


@dataclass(frozen=True)
class GpuFacts:
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
    xid_counts_24h: Mapping[int, float] = field(default_factory=dict)  # peak windowed count per Xid
    correctable_rows: float | None = None
    uncorrectable_rows: float | None = None
    correctable_rows_24h: float | None = None  # increase over 24 h
    uncorrectable_rows_24h: float | None = None
    row_remap_failure: float | None = None  # max over 24 h
    clock_events_24h: Mapping[str, float] = field(default_factory=dict)  # canonical name -> peak count
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


class _Gpu:
    """Mutable accumulator of one GPU's facts while the reads come in."""

    def __init__(self, labels: Mapping[str, str], node: str | None) -> None:
        self.node = node
        self.host, self.host_key = host_label(labels)
        self.gpu = labels.get("gpu", "")
        self.uuid = labels.get("UUID") or labels.get("uuid", "")
        self.model = labels.get("modelName") or labels.get("model_name", "")
        self.mig_instance = _mig(labels)
        self.numbers: dict[str, float] = {}
        self.last_xid = 0
        self.last_xid_message: str | None = None
        self.last_xid_recent = False
        self.xids: dict[int, float] = {}
        self.clocks: dict[str, float] = {}
        self.pods: set[PodRef] = set()

    def freeze(self) -> GpuFacts:
        n = self.numbers.get
        return GpuFacts(
            node=self.node,
            host=self.host,
            host_key=self.host_key,
            gpu=self.gpu,
            uuid=self.uuid,
            model=self.model,
            mig_instance=self.mig_instance,
            fb_used_mib=n("fb_used_mib"),
            fb_free_mib=n("fb_free_mib"),
            last_xid=self.last_xid,
            last_xid_message=self.last_xid_message,
            last_xid_recent=self.last_xid_recent,
            xid_counts_24h=dict(sorted(self.xids.items())),
            correctable_rows=n("correctable_rows"),
            uncorrectable_rows=n("uncorrectable_rows"),
            correctable_rows_24h=n("correctable_rows_24h"),
            uncorrectable_rows_24h=n("uncorrectable_rows_24h"),
            row_remap_failure=n("row_remap_failure"),
            clock_events_24h=dict(sorted(self.clocks.items())),
            pods=tuple(sorted(self.pods)),
        )


def _mig(labels: Mapping[str, str]) -> str | None:
    profile, gi = labels.get("GPU_I_PROFILE"), labels.get("GPU_I_ID")
    if not profile and not gi:
        return None
    return f"{profile or '?'}/{gi or '?'}"


def _series_id(labels: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """A series' identity across reads: its labels without the metric name (functions drop it)."""
    return frozenset((k, v) for k, v in labels.items() if k != "__name__")


def _gpu_key(labels: Mapping[str, str], node: str | None) -> tuple[str, str, str, str]:
    host, _ = host_label(labels)
    uuid = labels.get("UUID") or labels.get("uuid") or f"gpu{labels.get('gpu', '?')}"
    return (node or host, uuid, labels.get("GPU_I_PROFILE", ""), labels.get("GPU_I_ID", ""))


def _xid_number(raw: str | None) -> int | None:
    try:
        return int(float(raw)) if raw else None
    except ValueError:
        return None


class _Assembly:
    """Folds samples of many signals into per-GPU accumulators."""

    def __init__(
        self,
        hostmap: HostMap,
        pod_nodes: Mapping[PodRef, str | None],
        claim_pods: Mapping[ClaimRef, PodRef] | None = None,
    ) -> None:
        self.hostmap = hostmap
        self.pod_nodes = pod_nodes
        self.claim_pods = claim_pods or {}
        self.gpus: dict[tuple[str, str, str, str], _Gpu] = {}

    def _place(self, labels: Mapping[str, str]) -> tuple[str | None, PodRef | None]:
        """The node and the workload a series belongs to."""
        node = self.hostmap.node_of(labels)
        pod = pod_of(labels)
        if (pod is None or pod[1] in self.hostmap.exporters) and self.claim_pods:
            # On DRA the exporter may leave pod/namespace empty (or name itself): its claim labels say whose GPU it is.
            pod = self.claim_pods.get(
                (labels.get(DRA_CLAIM_LABELS[0], ""), labels.get(DRA_CLAIM_LABELS[1], "")), pod
            )
        if node is None and pod is not None and pod in self.pod_nodes:
            node = self.pod_nodes[pod]  # a series without host label, found by its pod labels
        return node, pod

    def _gpu(self, labels: Mapping[str, str], *, whole: bool = False) -> _Gpu:
        """The accumulator a series feeds; `whole`: the physical GPU's, even for a MIG instance's series."""
        if whole:
            labels = {k: v for k, v in labels.items() if k not in MIG_LABELS}
        node, pod = self._place(labels)
        key = _gpu_key(labels, node)
        gpu = self.gpus.get(key)
        if gpu is None:
            gpu = self.gpus[key] = _Gpu(labels, node)
        # The scrape's own pod label names the exporter itself, not a workload.
        if pod and pod[1] not in self.hostmap.exporters:
            gpu.pods.add(pod)
        return gpu

    def put(self, field_name: str, samples: Iterable[Sample]) -> None:
        whole = field_name in WHOLE_GPU_FIELDS
        for s in samples:
            gpu = self._gpu(s.labels, whole=whole)
            if s.value != s.value:
                continue  # NaN: the exporter had no reading (a blank field), not a number
            old = gpu.numbers.get(field_name)
            # Shared GPUs repeat the whole-GPU value once per pod: keep the largest.
            gpu.numbers[field_name] = s.value if old is None else max(old, s.value)

    def put_last_xid(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            gpu = self._gpu(s.labels)
            number = int(s.value) if s.value == s.value else 0  # NaN → none
            if number > 0 and not gpu.last_xid:
                gpu.last_xid = number
                gpu.last_xid_message = s.labels.get("err_msg") or None

    def read_last_xid(self, telemetry: Telemetry, match: Sequence[Selector], last: Iterable[Sample]) -> None:
        """The last-Xid gauge's samples, and whether each non-zero value changed within 24 h (one
        more call, made only when some GPU has one; a second only when a series began in the window)."""
        self.put_last_xid(last)
        if not any(g.last_xid for g in self.gpus.values()):
            return
        began: dict[tuple[str, str, str, str], set[frozenset[tuple[str, str]]]] = {}
        for s in telemetry.changed(LAST_XID, DAY_S, match):
            key = _gpu_key(s.labels, self._place(s.labels)[0])
            gpu = self.gpus.get(key)
            if gpu is None:
                continue
            if s.value > 0:
                gpu.last_xid_recent = True  # the value changed in the window
            elif gpu.last_xid:  # a GPU without an Xid began a series: nothing to date
                began.setdefault(key, set()).add(_series_id(s.labels))
        if began:
            self._relabelled(telemetry, began)

    def _relabelled(
        self,
        telemetry: Telemetry,
        began: Mapping[tuple[str, str, str, str], set[frozenset[tuple[str, str]]]],
    ) -> None:
        """A series that began in the window is news unless the same GPU held the same Xid in a
        series that existed before it: the exporter labels a GPU's series with the pod using it, so
        a new pod starts new series that carry the old, never-reset value (spec: layer 5)."""
        held: set[tuple[tuple[str, str, str, str], int]] = set()
        # Only the nodes of those GPUs: on a fleet the read stays a handful of series.
        nodes = sorted({key[0] for key in began})
        for s in telemetry.max_over_time(
            LAST_XID, DAY_S + BEFORE_WINDOW_S, selector_for(nodes, self.hostmap), above=0
        ):
            key = _gpu_key(s.labels, self._place(s.labels)[0])
            if key in began and _series_id(s.labels) not in began[key]:
                held.add((key, int(s.value)))
        for key in began:
            gpu = self.gpus[key]
            if not gpu.last_xid_recent and (key, gpu.last_xid) not in held:
                gpu.last_xid_recent = True  # a new GPU, or a new value under new labels

    def put_xid_counts(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            number = _xid_number(s.labels.get("xid"))
            gpu = self._gpu(s.labels)
            # GPUs with no Xid emit a 0 series without an xid label: nothing to count.
            if number and s.value > 0:
                gpu.xids[number] = max(gpu.xids.get(number, 0.0), s.value)

    def put_clock_events(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            raw = next((s.labels[k] for k in CLOCK_EVENT_LABELS if s.labels.get(k)), None)
            gpu = self._gpu(s.labels)
            if raw and s.value > 0:
                name = clock_event_name(raw)
                gpu.clocks[name] = max(gpu.clocks.get(name, 0.0), s.value)

    def facts(self) -> list[GpuFacts]:
        return [g.freeze() for _, g in sorted(self.gpus.items())]


# Past this many nodes a walk's read asks only for non-zero hardware signals.
SPARSE_READ_NODES = 50


def read_gpu_facts(
    telemetry: Telemetry,
    hostmap: HostMap,
    nodes: Sequence[str],
    pods: Mapping[PodRef, str | None] | None = None,
    claims: Mapping[ClaimRef, PodRef] | None = None,
) -> list[GpuFacts]:
    """Every signal the layers need, for these nodes (and these pods' series): ten calls,
    eleven when some GPU holds a last Xid, twelve when such a GPU's series began in the last 24 h.

    `pods` maps (namespace, pod) → its node, so series that carry pod labels but
    no host label are found and placed; `claims` maps a pod's DRA ResourceClaims to it, for
    series the exporter labels by claim only. Raises TelemetryError when the source is down.
    """
    pods = pods or {}
    match = selector_for(nodes, hostmap)
    for ns, pod in pods:
        match.extend(pod_selector(ns, pod))
    claims = claims or {}
    for ns in sorted({c[0] for c in claims}):
        match.append(
            {DRA_CLAIM_LABELS[0]: [ns], DRA_CLAIM_LABELS[1]: sorted(c[1] for c in claims if c[0] == ns)}
        )
    asm = _Assembly(hostmap, pods, claims)
    # A pending pod's walk may examine the whole fleet: then the hardware signals, zero on
    # almost every GPU, come back for the sick GPUs only (`> 0` on the server), as in the
    # digest. Framebuffer stays whole: it also tells which nodes have DCGM series at all.
    nz = 0.0 if len(nodes) > SPARSE_READ_NODES else None
    # Independent reads, handed over together (a Prometheus sends them at once).
    fb_used, fb_free, last, xids, rows, urows, rows24, urows24, remap, clocks = read_all(
        telemetry,
        [
            Read("instant", FB_USED, match=match),
            Read("instant", FB_FREE, match=match),
            Read("instant", LAST_XID, match=match, above=nz),
            Read("max_over_time", XID_COUNT, DAY_S, match, nz),
            Read("instant", CORRECTABLE_ROWS, match=match, above=nz),
            Read("instant", UNCORRECTABLE_ROWS, match=match, above=nz),
            Read("increase", CORRECTABLE_ROWS, DAY_S, match, nz),
            Read("increase", UNCORRECTABLE_ROWS, DAY_S, match, nz),
            Read("max_over_time", ROW_REMAP_FAILURE, DAY_S, match, nz),
            Read("max_over_time", CLOCK_EVENTS, DAY_S, match, nz),
        ],
    )
    asm.put("fb_used_mib", fb_used)
    asm.put("fb_free_mib", fb_free)
    asm.read_last_xid(telemetry, match, last)
    asm.put_xid_counts(xids)
    asm.put("correctable_rows", rows)
    asm.put("uncorrectable_rows", urows)
    grown = verified_growth(telemetry, DAY_S, {CORRECTABLE_ROWS: rows24, UNCORRECTABLE_ROWS: urows24})
    asm.put("correctable_rows_24h", grown[CORRECTABLE_ROWS])
    asm.put("uncorrectable_rows_24h", grown[UNCORRECTABLE_ROWS])
    asm.put("row_remap_failure", remap)
    asm.put_clock_events(clocks)
    wanted = set(nodes) | {n for n in pods.values() if n}
    return [f for f in asm.facts() if f.node in wanted]


def by_node(facts: Iterable[GpuFacts]) -> dict[str, list[GpuFacts]]:
    out: dict[str, list[GpuFacts]] = {}
    for f in facts:
        if f.node:
            out.setdefault(f.node, []).append(f)
    return out


# --- the digest's fleet read ----------------------------------------------------------


@dataclass(frozen=True)
class NodeHealth:
    """One node's hardware-health signals over 24 h, for the digest."""

    node: str
    gpus: tuple[GpuFacts, ...]

    @property
    def correctable_rows_24h(self) -> float:
        return sum(g.correctable_rows_24h or 0 for g in self.gpus)

    @property
    def uncorrectable_rows_24h(self) -> float:
        return sum(g.uncorrectable_rows_24h or 0 for g in self.gpus)

    @property
    def rows_rising(self) -> bool:
        return any(g.rows_rising for g in self.gpus)

    @property
    def row_remap_failure(self) -> bool:
        return any((g.row_remap_failure or 0) > 0 for g in self.gpus)

    @property
    def xids_24h(self) -> list[int]:
        """Xids from the exporter's counts and the last-Xid gauge where it changed in the 24 h
        (it never resets: an unchanged value is an old Xid)."""
        seen = {x for g in self.gpus for x in g.xid_counts_24h}
        seen.update(g.last_xid for g in self.gpus if g.last_xid > 0 and g.last_xid_recent)
        return sorted(seen)


def read_fleet_health(
    telemetry: Telemetry, hostmap: HostMap, nodes: Sequence[str] | None = None
) -> dict[str, NodeHealth]:
    """Remapped-row growth, row-remap failures and Xids for the whole fleet in five calls
    (six when some GPU holds a last Xid, seven when such a GPU's series began in the last 24 h;
    one more when rows rose somewhere, to tell growth from a reset's dip: rowgrowth.py).

    With `nodes` None no selector is sent (every series); otherwise only those nodes'.
    Raises TelemetryError when the source is down.
    """
    match: list[Selector] = [] if nodes is None else selector_for(nodes, hostmap)
    asm = _Assembly(hostmap, {})
    # Only non-zero series: across a fleet these signals are zero almost
    # everywhere, and moving 80,000 zeros costs most of the digest's time.
    rows24, urows24, remap, last, xids = read_all(
        telemetry,
        [
            Read("increase", CORRECTABLE_ROWS, DAY_S, match, 0),
            Read("increase", UNCORRECTABLE_ROWS, DAY_S, match, 0),
            Read("max_over_time", ROW_REMAP_FAILURE, DAY_S, match, 0),
            Read("instant", LAST_XID, match=match, above=0),
            Read("max_over_time", XID_COUNT, DAY_S, match, 0),
        ],
    )
    grown = verified_growth(telemetry, DAY_S, {CORRECTABLE_ROWS: rows24, UNCORRECTABLE_ROWS: urows24})
    asm.put("correctable_rows_24h", grown[CORRECTABLE_ROWS])
    asm.put("uncorrectable_rows_24h", grown[UNCORRECTABLE_ROWS])
    asm.put("row_remap_failure", remap)
    asm.read_last_xid(telemetry, match, last)
    asm.put_xid_counts(xids)
    grouped = by_node(asm.facts())
    return {node: NodeHealth(node, tuple(gpus)) for node, gpus in sorted(grouped.items())}
