"""Folding the samples of many DCGM signals into per-GPU facts: which series is whose (node,
pod, DRA claim, MIG instance), and how old the last-Xid gauge's value is.

One private assembly shared by the walk's read (gpufacts.py) and the digest's (fleethealth.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from layers.facts.dcgmseries import (
    CLOCK_EVENT_LABELS,
    DAY_S,
    LAST_XID,
    MIG_LABELS,
    WHOLE_GPU_FIELDS,
    GpuFacts,
    clock_event_name,
)
from layers.facts.hosts import DRA_CLAIM_LABELS, ClaimRef, HostMap, PodRef, host_label, pod_of, selector_for
from layers.sources import BEFORE_WINDOW_S, Sample, Selector, Telemetry


class Gpu:
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
        self.xid_totals: dict[int, float] = {}
        self.clocks: dict[str, float] = {}
        self.clock_totals: dict[str, float] = {}
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
            xid_totals_24h=dict(sorted(self.xid_totals.items())),
            correctable_rows=n("correctable_rows"),
            uncorrectable_rows=n("uncorrectable_rows"),
            correctable_rows_24h=n("correctable_rows_24h"),
            uncorrectable_rows_24h=n("uncorrectable_rows_24h"),
            row_remap_failure=n("row_remap_failure"),
            row_remap_pending=n("row_remap_pending"),
            clock_events_24h=dict(sorted(self.clocks.items())),
            clock_totals_24h=dict(sorted(self.clock_totals.items())),
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


class Assembly:
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
        self.gpus: dict[tuple[str, str, str, str], Gpu] = {}

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

    def _gpu(self, labels: Mapping[str, str], *, whole: bool = False) -> Gpu:
        """The accumulator a series feeds; `whole`: the physical GPU's, even for a MIG instance's series."""
        if whole:
            labels = {k: v for k, v in labels.items() if k not in MIG_LABELS}
        node, pod = self._place(labels)
        key = _gpu_key(labels, node)
        gpu = self.gpus.get(key)
        if gpu is None:
            gpu = self.gpus[key] = Gpu(labels, node)
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
        a new pod starts new series that carry the old, never-reset value (spec: layer 5).

        "The same GPU" is its UUID where the series has one: an exporter restart relabels every
        series (a new exporter pod's name in `Hostname` when NODE_NAME is unset, a new `instance`),
        and the old series then name a host no longer known — by node they would never match."""
        held: set[tuple[tuple[str, str, str, str], int]] = set()
        # Only the nodes and GPUs of those series: on a fleet the read stays a handful of series.
        nodes = sorted({key[0] for key in began})
        known = {g.uuid for g in self.gpus.values() if g.uuid}  # a key without one holds `gpuN`: no GPU
        by_uuid = {key[1:]: key for key in began if key[1] in known}
        uuids = sorted({ident[0] for ident in by_uuid})
        match = selector_for(nodes, self.hostmap) + [{k: uuids} for k in ("UUID", "uuid") if uuids]
        for s in telemetry.max_over_time(LAST_XID, DAY_S + BEFORE_WINDOW_S, match, above=0):
            key = _gpu_key(s.labels, self._place(s.labels)[0])
            key = by_uuid.get(key[1:], key)
            if key in began and _series_id(s.labels) not in began[key]:
                held.add((key, int(s.value)))
        for key in began:
            gpu = self.gpus[key]
            if not gpu.last_xid_recent and (key, gpu.last_xid) not in held:
                gpu.last_xid_recent = True  # a new GPU, or a new value under new labels

    def put_xid_counts(self, samples: Iterable[Sample], *, totals: bool = False) -> None:
        """Xids by `xid` label: the windowed gauge's peak, or (`totals`) the since-start counters
        that changed or first appeared in the window (valued by their changes, 0 for a new series)."""
        for s in samples:
            number = _xid_number(s.labels.get("xid"))
            gpu = self._gpu(s.labels)
            into = gpu.xid_totals if totals else gpu.xids
            # GPUs with no Xid emit a 0 series without an xid label: nothing to count.
            if number and (totals or s.value > 0):
                into[number] = max(into.get(number, 0.0), s.value)

    def put_clock_events(self, samples: Iterable[Sample], *, totals: bool = False) -> None:
        for s in samples:
            raw = next((s.labels[k] for k in CLOCK_EVENT_LABELS if s.labels.get(k)), None)
            gpu = self._gpu(s.labels)
            into = gpu.clock_totals if totals else gpu.clocks
            if raw and (totals or s.value > 0):
                name = clock_event_name(raw)
                into[name] = max(into.get(name, 0.0), s.value)

    def facts(self) -> list[GpuFacts]:
        return [g.freeze() for _, g in sorted(self.gpus.items())]


def by_node(facts: Iterable[GpuFacts]) -> dict[str, list[GpuFacts]]:
    out: dict[str, list[GpuFacts]] = {}
    for f in facts:
        if f.node:
            out.setdefault(f.node, []).append(f)
    return out
