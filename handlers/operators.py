"""Who is an operator: the Slack user ids of GPUBOT_OPERATORS and the members of the user groups of
GPUBOT_OPERATOR_GROUPS. Group members are looked up (usergroups.users.list, through the function bot/
passes in) and cached briefly; a group that cannot be read grants nothing (fail closed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

log = logging.getLogger("gpubot.buttons")

GROUP_CACHE_S = 60.0


class Operators:
    """GPUBOT_OPERATORS user ids, and members of GPUBOT_OPERATOR_GROUPS (cached briefly)."""

    def __init__(
        self,
        users: Iterable[str],
        groups: Iterable[str],
        members: Callable[[str], Iterable[str]],
        ttl_s: float = GROUP_CACHE_S,
    ) -> None:
        self.users = frozenset(users)
        self.groups = tuple(groups)
        self.members = members
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def _group(self, group: str) -> frozenset[str]:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(group)
            if hit and now - hit[0] < self.ttl_s:
                return hit[1]
        try:
            ids = frozenset(self.members(group))
        except Exception as err:  # fail closed: an unreadable group grants nothing
            log.warning("could not list user group %s: %s", group, err)
            return frozenset()
        with self._lock:
            self._cache[group] = (now, ids)
        return ids

    def allows(self, user: str) -> bool:
        if user in self.users:
            return True
        return any(user in self._group(g) for g in self.groups)
