"""How many nodes become one finding or one line: the one fold (issue 14).

A pending pod examines every GPU node of its pool, and the digest covers the fleet: one finding
or one name per node would drown the thread. Past MAX_LISTED, the rest of a code's findings
become one finding naming their nodes (`fold`), and a list of names ends in "… and N more"
(`shown`, `listed`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from layers.findings import Finding, finding

MAX_LISTED = 10  # findings of one code, or names in one line, before the rest are counted


def shown(names: Sequence[str], limit: int = MAX_LISTED) -> str:
    """Up to `limit` names, then how many more: `a, b, c … and 4 more`."""
    head = ", ".join(names[:limit])
    return head + (f" … and {len(names) - limit} more" if len(names) > limit else "")


def listed(lines: Sequence[str], limit: int = MAX_LISTED) -> list[str]:
    """At most `limit` evidence lines; the rest are counted in one more line."""
    extra = len(lines) - limit
    return [*lines[:limit], *([f"… and {extra} more"] if extra > 0 else [])]


def same_finding(rest: Sequence[Finding]) -> Finding:
    """The default fold: the first of the rest as the example, every node of them named."""
    nodes = [f.node for f in rest if f.node]
    return finding(
        rest[0].code,
        f"{len(rest)} more examined GPU nodes have the same finding, e.g. {rest[0].summary}",
        evidence=[*rest[0].evidence, f"nodes: {shown(nodes)}"],
        commands=rest[0].commands,
        severity=rest[0].severity,
    )


def fold(
    findings: Sequence[Finding],
    *,
    keep: int = MAX_LISTED - 1,
    codes: Collection[str] | None = None,
    into: Callable[[Sequence[Finding]], Finding] = same_finding,
) -> list[Finding]:
    """Past MAX_LISTED findings of one code (of `codes`, or any), the first `keep` stay and the rest
    become the one finding `into` makes of them. Order is kept, the folded one last of its code."""
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    out: list[Finding] = []
    for code, group in by_code.items():
        if len(group) <= MAX_LISTED or (codes is not None and code not in codes):
            out += group
        else:
            out += [*group[:keep], into(group[keep:])]
    return out
