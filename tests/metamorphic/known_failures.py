"""(case id, mutation) -> the cause, for metamorphic cases that fail today because of a bug in another
helper's area (tests/metamorphic/KNOWN_FAILURES.md has the same list with the owner). Each is a strict
xfail: when the fix lands the case passes, the xfail fails, and the entry is removed."""

from __future__ import annotations

KNOWN_FAILURES: dict[tuple[str, str], str] = {}
