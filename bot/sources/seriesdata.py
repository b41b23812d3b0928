"""One series of a scenario or bundle: its labels and points, either of them read when first used.

SeriesTelemetry (bot/sources/series.py) evaluates PromQL over these; the scenario reader
(bot/sources/scenario_series.py) makes them, a fleet file's with their labels and points left as text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from layers.facts import hosts

# The labels a walk selects series by (a node's host labels, a pod's, a DRA claim's, a GPU's UUID,
# which the ledger follows across nodes): a fleet file's series are indexed by these alone, the
# rest of their labels read when a query reaches them.
INDEX_LABELS: frozenset[str] = frozenset(
    (
        "__name__",
        "UUID",
        *hosts.HOST_LABELS,
        *(k for pair in hosts.POD_LABELS for k in pair),
        *hosts.DRA_CLAIM_LABELS,
    )
)


class SeriesData:
    """One series: its labels (with `__name__`) and (unix seconds, value) points in time order.

    The points may come from `read`, called once, when they are first used: a replayed
    fleet of 240,000 series decodes only those of the nodes a layer reads. Likewise the
    labels may come from `read_labels`, with `keys` holding the INDEX_LABELS the series
    carries (read with the file): a query selects by those and reads the rest of the labels
    of the series it selected only.
    """

    __slots__ = ("_labels", "_points", "_read", "_read_labels", "keys")

    def __init__(
        self,
        labels: dict[str, str] | None,
        points: list[tuple[float, float]] | None = None,
        *,
        read: Callable[[], list[tuple[float, float]]] | None = None,
        read_labels: Callable[[], dict[str, str]] | None = None,
        keys: dict[str, str] | None = None,
    ) -> None:
        self._labels = labels
        self._read_labels = read_labels
        self.keys = keys if labels is None else None  # None: every label is known
        self._read = read
        self._points = points if points is not None or read is not None else []

    @property
    def labels(self) -> dict[str, str]:
        if self._labels is None:
            assert self._read_labels is not None
            self._labels = self._read_labels()  # a bad label in a lazily read file raises here
            self._read_labels = None
            self.keys = None
        return self._labels

    def key(self, label: str) -> str:
        """One label's value ("" when absent), without reading the others when it is indexed."""
        keys = self.keys
        if keys is not None and label in INDEX_LABELS:
            return keys.get(label, "")
        return self.labels.get(label, "")

    @property
    def points(self) -> list[tuple[float, float]]:
        if self._points is None:
            assert self._read is not None
            self._points = self._read()
            self._read = None
        return self._points

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SeriesData):
            return NotImplemented
        return self.labels == other.labels and self.points == other.points

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return f"SeriesData(labels={self.labels!r}, points={self.points!r})"


def prom_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Labels as Prometheus keeps them: an empty value is the same as no label."""
    return {k: v for k, v in labels.items() if v != ""}
