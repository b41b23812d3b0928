"""A walk's claims and the facts that outlive them.

A claim (`walk:W:claim:NAME`) is a lease: taken with `set_if_absent` for at
most `claim_s` (30 s) and renewed by its holder's process while the work runs
(bot/slack/leases.py), so a holder SIGKILLed mid-layer frees the layer within
the lease. That a layer was *posted* is a separate, durable fact
(`walk:W:posted:N`, kept as long as the walk), written once the layer message
is in Slack; the stored result (`walk:W:layer:N`) says it ran. So "layer 5 has
already been run" is said only of a layer that ran, never of a lease its dead
holder left behind.

Whoever meets a layer claimed by someone else waits for it (`take_layer`):
either the holder finishes (the result appears: nothing to run) or its lease
lapses (it died: the waiter takes the layer and runs it). A walk never skips a
layer silently because somebody else once claimed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from handlers.ports import StateStore, StateUnavailable

log = logging.getLogger("gpubot.walks")

# A claim is a lease on running work: renewed while it runs, expired soon after its holder died.
CLAIM_S = 30.0
POLL_S = 0.25


def walk_part(walk_id: str, *parts: object) -> str:
    return ":".join(["walk", walk_id, *(str(p) for p in parts)])


class LayerClaims:
    """Claims (leases) and posted marks of walks, in the state store."""

    def __init__(
        self,
        state: StateStore,
        retention_s: float,
        claim_s: float = CLAIM_S,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.state = state
        self.retention_s = retention_s
        self.claim_s = claim_s
        self.clock = clock
        self.sleep = sleep

    def claim(self, walk_id: str, name: str, who: str | None, ttl_s: float | None = None) -> bool:
        """Take `name` for this walk exactly once (across replicas) for `ttl_s` (default: the walk's
        retention; a lease when it is `claim_s` or less)."""
        value = {"by": who, "at": self.clock()}
        return self.state.set_if_absent(walk_part(walk_id, "claim", name), value, ttl_s or self.retention_s)

    def held(self, walk_id: str, name: str) -> bool:
        """Someone holds `name` for this walk (a durable record, or a live lease)."""
        return self.state.get(walk_part(walk_id, "claim", name)) is not None

    def release(self, walk_id: str, name: str) -> None:
        self.state.delete(walk_part(walk_id, "claim", name))

    def release_quietly(self, walk_id: str, name: str) -> None:
        """Free a claim once the action is over; a store that fails here is logged (the claim expires)."""
        try:
            self.release(walk_id, name)
        except StateUnavailable as err:
            log.warning("walk %s: claim %s not released (it will expire): %s", walk_id, name, err)

    def posted(self, walk_id: str, layer: int) -> bool:
        """The layer's message is in Slack (the claim's old "done" counts too: walks stored before)."""
        if self.state.get(walk_part(walk_id, "posted", layer)) is not None:
            return True
        return self.state.get(walk_part(walk_id, "claim", f"layer:{layer}")) == "done"

    def mark_posted(self, walk_id: str, layer: int) -> None:
        """The durable fact first, then the lease is freed (it no longer guards anything)."""
        self.state.set(walk_part(walk_id, "posted", layer), {"at": self.clock()}, self.retention_s)
        self.release_quietly(walk_id, f"layer:{layer}")

    def take_layer(self, walk_id: str, layer: int, who: str | None, done: Callable[[], bool]) -> bool:
        """True once this caller holds the layer's lease; False when `done()` says another holder ran
        it meanwhile. A live holder is waited for; a dead one's lease lapses within `claim_s`, then the
        layer is ours. Gives up (False, logged) only after three leases without either."""
        return self._lease_when_free(
            walk_id, f"layer:{layer}", who, done, 3 * self.claim_s + 5, f"layer {layer}"
        )

    def take_action(self, walk_id: str, done: str, running: str, who: str | None) -> bool:
        """The running lease of a node action (a click); False when it is done (`done` held), or when
        another holder still runs it after a whole lease. A click that finds it running waits, as a
        layer does: a SIGKILLed holder's lease lapses within `claim_s` and the action is this
        click's (or the agent's that took the request over), not refused as "already there"."""
        return self._lease_when_free(
            walk_id, running, who, lambda: self.held(walk_id, done), self.claim_s + 1.0
        )

    def _lease_when_free(
        self,
        walk_id: str,
        name: str,
        who: str | None,
        done: Callable[[], bool],
        patience_s: float,
        logged: str | None = None,
    ) -> bool:
        """Take `name`'s lease once no live holder renews it (True), unless `done()` first (False);
        False too after `patience_s` of a holder still at it. `logged` names it in the log."""
        deadline = time.monotonic() + patience_s
        waited = False
        while not done():
            if self.claim(walk_id, name, who, self.claim_s):
                if waited and logged:
                    log.info("walk %s: %s's holder went away: running it here", walk_id, logged)
                # Finished just before the lease was ours: nothing to run.
                return not done() or self._unclaim(walk_id, name)
            if time.monotonic() >= deadline:
                if logged:
                    log.warning("walk %s: %s still held by another holder: left to it", walk_id, logged)
                return False
            waited = True
            self.sleep(POLL_S)
        return False

    def _unclaim(self, walk_id: str, name: str) -> bool:
        """Taken just as the holder finished: give it back; nothing to run."""
        self.release_quietly(walk_id, name)
        return False
