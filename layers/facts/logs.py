"""Container logs as every layer reads them: the one read path (issue 14).

`LogReads` is one layer's reader. `log(pod, container, previous)` is the text, or None when the
container has none (the API's not_found: not started yet, or no previous instance). Any other
failure (RBAC, the API server down, a refused request, for the current or the previous log) is
kept once per cause and said by `unknowns()`: never raised, never a silent OK. Whether to ask for
the previous log is `podstatus.restarted`, the one "did it restart" every layer asks (the device
plugin's log and the application's OOM lines are asked for whatever the status says). Every read
goes through the walk's cache, so a walk reads a log once however many layers ask; a layer's other
failed reads (events, a policy) are kept the same way with `refused`.

`window(pod, container, previous)` reads the device plugin's log by time and size instead of its
last lines (spec/findings.md, layer 5: the unhealthy mark is printed once, and chatty Xid 13/31/43
lines would push it out of a tail): the current instance from its start, the previous over the
last 24 h, each under a byte cap; where the cap cut it, the last 24 h are read again and what was
still not read is said (`Window.gaps`), so a layer reports it as coverage, never as OK.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from layers.facts import objects as o
from layers.facts.context import WalkContext
from layers.facts.fold import shown
from layers.findings import Finding, unknown
from layers.sources import K8sObject, SourceError

DAY_S = 24 * 3600
_SHOWN_PER_CAUSE = 3


class _Refusal(msgspec.Struct):
    whats: list[str]
    error: SourceError
    node: str | None


class Window(msgspec.Struct, frozen=True):
    """A log read by time and size: its texts in order, and what the byte cap left unread."""

    texts: tuple[str, ...] = ()
    gaps: tuple[str, ...] = ()  # what was not read, for people ("…: the last 24 h past their first 1 MiB")


@dataclass
class LogReads:
    """One layer's log reads through the walk's cache; what could not be read, once per cause.

    A dataclass, not a Struct: each layer subclasses it with its own `__init__`."""

    ctx: WalkContext
    layer: int
    _refused: dict[tuple[object, ...], _Refusal] = field(default_factory=dict)

    # --- reads --------------------------------------------------------------------------

    def log(self, pod: K8sObject, container: str, previous: bool = False) -> str | None:
        ns, name = o.namespace(pod) or "default", o.name(pod)
        try:
            return self.ctx.log(ns, name, container, previous)
        except SourceError as err:
            self.refused(f"the log of {ns}/{name} container {container}", err, o.pod_node(pod))
            return None

    def window(self, pod: K8sObject, container: str, previous: bool = False) -> Window | None:
        """The log by time and size (see the module's comment); None when the container has none or
        the read failed (kept for `unknowns`)."""
        ns, name = o.namespace(pod) or "default", o.name(pod)
        what = f"the {'previous ' if previous else ''}log of {ns}/{name} container {container}"
        cap = self.ctx.settings.log_window_bytes
        try:
            # The previous instance's marks count only within 24 h; the current one's stand since its start.
            first = self.ctx.log_window(ns, name, container, previous, DAY_S if previous else None, cap)
            if first is None:
                return None
            if not _cut(first, cap):
                return Window((first,))
            texts = [_whole_lines(first)]
            gaps = [f"{what}: past its first {_size(cap)}"]
            if not previous:
                day = self.ctx.log_window(ns, name, container, False, DAY_S, cap)
                if day is not None:
                    texts.append(_whole_lines(day) if _cut(day, cap) else day)
                    gaps = [f"{what}: between its first {_size(cap)} and the last 24 h"]
                    if _cut(day, cap):
                        gaps.append(f"{what}: the last 24 h past their first {_size(cap)}")
            return Window(tuple(texts), tuple(gaps))
        except SourceError as err:
            self.refused(f"the log of {ns}/{name} container {container}", err, o.pod_node(pod))
            return None

    # --- what could not be read ------------------------------------------------------------

    def refused(self, what: str, err: SourceError, node: str | None = None) -> None:
        """Keep a failed read (a log, events, a policy), grouped with others of the same cause (one
        RBAC rule, one outage); `node` is the node the unknown is about."""
        key = (err.kind, err.verb, err.resource, err.namespace, err.message if not err.verb else "")
        got = self._refused.setdefault(key, _Refusal([], err, node))
        if what not in got.whats:
            got.whats.append(what)

    @property
    def failed(self) -> bool:
        return bool(self._refused)

    def unknowns(self, unchecked: str = "") -> list[Finding]:
        """One `unknown` per cause: what could not be read, why, and what was not checked for it."""
        out = []
        for r in self._refused.values():
            tail = f": {unchecked}" if unchecked else ""
            what = shown(r.whats, limit=_SHOWN_PER_CAUSE)
            out.append(unknown(self.layer, f"could not read {what}: {r.error}{tail}", node=r.node))
        return out


def _cut(text: str, cap: int) -> bool:
    """The byte cap ended the read (a log of exactly the cap's size counts too: it may go on)."""
    return cap > 0 and len(text.encode("utf-8")) >= cap


def _whole_lines(text: str) -> str:
    """A capped read without its last line, which the cap may have cut mid-way ("Xid=4" of "Xid=48")."""
    return text[: text.rfind("\n") + 1]


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n} bytes"
