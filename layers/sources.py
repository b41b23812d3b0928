"""The two small read-only interfaces the layers read through.

Objects are plain dicts shaped exactly as the Kubernetes API returns them in
JSON (camelCase keys), so a scenario file, a must-gather bundle and a live
cluster look the same to the layers.

Errors: any read may raise SourceError. Layers turn it into an `unknown`
finding that says what could not be read and how to fix it; only the read of
the target itself (the pod) lets it escape to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

K8sObject = dict[str, Any]

ErrorKind = Literal["forbidden", "not_found", "unavailable", "bad_input"]
# The Dynamic Resource Allocation kinds of `resource.k8s.io` the layers read (spec/findings.md, DRA).
DraKind = Literal["DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"]


class SourceError(Exception):
    """A read that failed. `kind` decides the CLI exit code and the hint.

    - forbidden: RBAC said no (HTTP 403); `verb`/`resource` name the missing rule.
    - not_found: the object does not exist (HTTP 404).
    - unavailable: backend unreachable, timed out, 5xx.
    - bad_input: the request itself is malformed (e.g. an invalid name).
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        verb: str | None = None,
        resource: str | None = None,
        namespace: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.message = message
        self.verb = verb
        self.resource = resource
        self.namespace = namespace

    def hint(self) -> str:
        """What to grant or fix, in one line."""
        if self.kind == "forbidden" and self.verb and self.resource:
            where = f" in namespace {self.namespace}" if self.namespace else " cluster-wide"
            return f"grant the bot's ServiceAccount '{self.verb}' on '{self.resource}'{where}"
        if self.kind == "unavailable":
            return "check that the backend is reachable and healthy"
        return ""

    def __str__(self) -> str:
        h = self.hint()
        return f"{self.message} ({h})" if h else self.message


class Cluster(Protocol):
    """Read-only view of a Kubernetes cluster.

    Selectors follow the Kubernetes syntax (label selectors: equality, `!=`,
    `in`, `notin`, existence; field selectors: equality) and are applied by
    the server where there is one, never by listing everything.
    """

    @property
    def source(self) -> str:
        """Where the objects come from, for messages ("scenario x.yaml", "context prod")."""
        ...

    def get_pod(self, namespace: str, name: str) -> K8sObject: ...

    def list_pods(
        self,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[K8sObject]: ...

    def get_node(self, name: str) -> K8sObject: ...

    def list_nodes(self, label_selector: str | None = None) -> list[K8sObject]: ...

    def list_events(
        self, namespace: str | None, kind: str | None = None, name: str | None = None
    ) -> list[K8sObject]:
        """Events of one object (by involvedObject kind/name) or of a namespace (kind and name None)."""
        ...

    def list_daemonsets(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[K8sObject]: ...

    def list_custom(self, group: str, version: str, plural: str) -> list[K8sObject]:
        """Cluster-scoped custom objects, e.g. ("nvidia.com", "v1", "clusterpolicies").

        A CRD that is not installed gives an empty list, not an error.
        """
        ...

    def list_runtimeclasses(self) -> list[K8sObject]: ...

    def get_configmap(self, namespace: str, name: str) -> K8sObject:
        """One ConfigMap; raises SourceError(not_found) when there is none. Read only for a script
        file a pod's command names from a ConfigMap it mounts (layers/facts/inference.py)."""
        ...

    def get_persistent_volume_claim(self, namespace: str, name: str) -> K8sObject:
        """One PersistentVolumeClaim (the pod's volumes name theirs); SourceError(not_found) when absent."""
        ...

    def get_persistent_volume(self, name: str) -> K8sObject:
        """One PersistentVolume (a bound claim's `spec.volumeName`): its `spec.nodeAffinity` pins
        the pod to a zone or a host."""
        ...

    def list_dra(
        self,
        kind: DraKind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[K8sObject]:
        """`resource.k8s.io` objects of one kind, all pages, in the newest version the server serves
        (v1; v1beta2/v1beta1 on older clusters, v1alpha3 for DeviceTaintRules).

        A cluster that serves none (before Kubernetes 1.32, or the feature off) gives an empty
        list, not an error: no DRA is normal. ResourceSlices take the field selectors
        `spec.driver` and `spec.nodeName`; every kind takes `metadata.name`.
        """
        ...

    def pod_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        *,
        previous: bool = False,
        tail_lines: int | None = 500,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
    ) -> str:
        """A container's log; raises SourceError(not_found) when there is none.

        As the Kubernetes API's pods/log: `since_seconds` keeps the lines of that many seconds
        before now, `tail_lines` then the last lines of those, and `limit_bytes` stops after that
        many bytes from the start of what is left (so a log past the cap ends early, possibly
        mid-line). None leaves each out.
        """
        ...


class ClusterWriter(Protocol):
    """The one write the bot makes: node scheduling (cordon/uncordon)."""

    def patch_node(self, name: str, patch: Mapping[str, Any]) -> K8sObject:
        """A strategic-merge patch of a node; returns the node after it."""
        ...


# --- telemetry -----------------------------------------------------------------

# A selector alternative: label -> the values it may take. A series matches a
# sequence of alternatives when it matches any one of them; an empty sequence
# matches every series. Kept this small so the Prometheus adapter can turn it
# into `m{a=~"x|y"} or m{b=~"x|y"}` and the in-memory one into a filter.
Selector = Mapping[str, Sequence[str]]

# Telemetry.changed: a series with a sample in this long before the window existed before it.
BEFORE_WINDOW_S = 3600


class Sample(msgspec.Struct, frozen=True):
    labels: Mapping[str, str]
    value: float


class RangeSeries(msgspec.Struct, frozen=True):
    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]  # (unix seconds, value), in time order


class TelemetryError(Exception):
    """Telemetry unreachable, slow, or answering with an error."""


class Telemetry(Protocol):
    """Fleet-wide metric reads, one call per signal (never per GPU).

    Semantics follow PromQL evaluated at `now()`: `instant` uses the 5-minute
    lookback, `increase`/`rate` extrapolate as Prometheus does, and every
    result keeps the series' labels (including `__name__` where the source
    has it; `increase`/`rate`/`max_over_time` drop it, as PromQL does).

    `metric` may name alternatives joined by `|` (e.g. the exporter's
    `DCGM_EXP_XID_ERRORS_COUNT|DCGM_EXP_XID_ERRORS_TOTAL`): the result is the
    union, as PromQL's `f(A) or f(B)` (left wins on an identical label set).

    `above` keeps only series whose value is greater (PromQL's `expr > above`):
    a fleet-wide read of a signal that is zero almost everywhere then moves
    the few sick GPUs, not the whole fleet.
    """

    @property
    def source(self) -> str:
        """Human description for messages, e.g. "Prometheus at http://prom:9090"."""
        ...

    def now(self) -> float:
        """The evaluation instant (unix seconds)."""
        ...

    def instant(
        self, metric: str, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]: ...

    def increase(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]: ...

    def rate(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]: ...

    def max_over_time(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]: ...

    def range(
        self, metric: str, window_s: int, step_s: int, match: Sequence[Selector] = ()
    ) -> list[RangeSeries]: ...

    def changed(self, metric: str, window_s: int, match: Sequence[Selector] = ()) -> list[Sample]:
        """Series whose value changed within the window or that began in it, valued by
        `changes(m[w])`. A series *began* in the window when it has no sample in the hour
        before it (an exporter restart of a few minutes is not a new series): PromQL
        `changes(m[w]) > 0 or (changes(m[w]) unless last_over_time(m[1h] offset w))`.

        For gauges that hold a last value and never reset (DCGM's last Xid): whether
        today's value is news or weeks old.
        """
        ...

    def count(self, metric: str, match: Sequence[Selector] = ()) -> int:
        """How many series exist now (PromQL `count(m)`): presence without moving them."""
        ...


ReadFunc = Literal["instant", "increase", "rate", "max_over_time", "changed"]


class Read(msgspec.Struct, frozen=True):
    """One Telemetry call as data (`func` names the method), for `read_all`."""

    func: ReadFunc
    metric: str
    window_s: int = 0  # all but `instant`
    match: Sequence[Selector] = ()
    above: float | None = None  # all but `changed`


def read_all(telemetry: Telemetry, reads: Sequence[Read]) -> list[list[Sample]]:
    """Independent reads, results in order: at once where the source can (its `read_many`,
    e.g. concurrent HTTP queries), else one after another. Raises the first TelemetryError."""
    many: Callable[[Sequence[Read]], list[list[Sample]]] | None = getattr(telemetry, "read_many", None)
    if many is not None:
        return many(reads)
    return [read_one(telemetry, r) for r in reads]


def read_one(telemetry: Telemetry, r: Read) -> list[Sample]:
    if r.func == "instant":
        return telemetry.instant(r.metric, r.match, above=r.above)
    if r.func == "changed":
        return telemetry.changed(r.metric, r.window_s, r.match)
    method = {
        "increase": telemetry.increase,
        "rate": telemetry.rate,
        "max_over_time": telemetry.max_over_time,
    }
    return method[r.func](r.metric, r.window_s, r.match, above=r.above)


class NoTelemetry:
    """Used when no metrics source is configured: every read says so."""

    source = "no metrics source"

    def __init__(self, now: float | Callable[[], float]) -> None:
        # A fixed instant (a scenario's), or a clock (a live cluster: a bot that
        # runs for weeks must not date today's log lines by its start-up day).
        self._now = now

    def now(self) -> float:
        return self._now() if callable(self._now) else self._now

    def _fail(self) -> list[Any]:
        raise TelemetryError("no metrics source configured: pass --prometheus-url or set PROMETHEUS_URL")

    def instant(
        self, metric: str, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._fail()

    def increase(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._fail()

    def rate(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._fail()

    def max_over_time(
        self, metric: str, window_s: int, match: Sequence[Selector] = (), *, above: float | None = None
    ) -> list[Sample]:
        return self._fail()

    def range(
        self, metric: str, window_s: int, step_s: int, match: Sequence[Selector] = ()
    ) -> list[RangeSeries]:
        return self._fail()

    def changed(self, metric: str, window_s: int, match: Sequence[Selector] = ()) -> list[Sample]:
        return self._fail()

    def count(self, metric: str, match: Sequence[Selector] = ()) -> int:
        self._fail()
        return 0
