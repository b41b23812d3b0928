"""What a KubeCluster asked of the API server: requests by verb and resource, list pages, items.

Kept as counters (not a log of requests): a bot that runs for weeks holds one entry per
(verb, resource, page kind), whatever it has sent. The benchmarks print these and
tests/test_scale_counts.py holds them, so a change that adds a per-node or per-pod read shows
as a new key or a count that grows with the fleet.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

import msgspec


class RequestKind(msgspec.Struct, frozen=True):
    """One kind of request: `page` is "first" or "continue" for a list, "" otherwise."""

    verb: str
    resource: str
    page: str = ""
    selector: str = ""  # "label", "field", "label+field" or "" (lists only)
    cached: bool = False  # resourceVersion=0: the API server may answer from its watch cache


class RequestCounts:
    """Counters of requests and of the items list pages returned; safe across threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[RequestKind] = Counter()
        self.items: Counter[RequestKind] = Counter()

    def add(self, kind: RequestKind) -> None:
        with self._lock:
            self.requests[kind] += 1

    def add_items(self, kind: RequestKind, items: int) -> None:
        with self._lock:
            self.items[kind] += items

    def snapshot(self) -> tuple[Counter[RequestKind], Counter[RequestKind]]:
        with self._lock:
            return Counter(self.requests), Counter(self.items)

    def total(self) -> int:
        with self._lock:
            return sum(self.requests.values())

    def by_verb_resource(self) -> dict[str, int]:
        """`list pods` -> requests, pages counted one each, in a stable order."""
        out: Counter[str] = Counter()
        with self._lock:
            for kind, n in self.requests.items():
                out[f"{kind.verb} {kind.resource}"] += n
        return dict(sorted(out.items()))

    def list_pages(self) -> int:
        with self._lock:
            return sum(n for k, n in self.requests.items() if k.verb == "list")

    def continue_pages(self) -> int:
        with self._lock:
            return sum(n for k, n in self.requests.items() if k.page == "continue")


def request_kind(verb: str, resource: str, query: Sequence[tuple[str, object]]) -> RequestKind:
    """The kind of one request from its verb, resource and query."""
    keys = {k: v for k, v in query}
    if verb != "list":
        return RequestKind(verb, resource)
    selector = "+".join(
        s for s, key in (("label", "labelSelector"), ("field", "fieldSelector")) if keys.get(key)
    )
    return RequestKind(
        verb,
        resource,
        "continue" if keys.get("continue") else "first",
        selector,
        str(keys.get("resourceVersion")) == "0",
    )
