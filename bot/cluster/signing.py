"""Requests between gateway and agents, authenticated end to end.

Redis is shared infrastructure: whoever can XADD to `gpubot:requests:<c>`
could otherwise queue a cordon "clicked" by any operator, or have an agent
post "asked by …" in any channel. So the gateway signs every entry it queues
with HMAC-SHA256 under `GPUBOT_REQUEST_KEY` (held by gateway and agents only,
never the Redis password), over the stream it is queued on, the kind, id,
time, sender version, a random nonce and the JSON body. An agent takes only
entries whose signature holds; then (bot/cluster/agent.py) it refuses one
older than the replay window and one whose nonce it has already seen in
another entry. What fails is dropped, counted
(`gpubot_stream_requests_total{outcome="forged"}`) and kept in the dead stream, never said in
any channel: the attacker chose the channel.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections.abc import Mapping

SCHEME = "v1"
SIGNED = ("kind", "id", "at", "version", "nonce", "body")
REPLAY_WINDOW_S = 86400.0  # an entry may wait a day for an agent (one down overnight); not longer
FUTURE_SKEW_S = 3600.0  # a gateway's clock may run ahead of the agent's by this much


class RequestSigner:
    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def _mac(self, stream: str, fields: Mapping[str, str]) -> str:
        parts = [SCHEME, stream, *(fields.get(name, "") for name in SIGNED)]
        # Lengths first: no two different field lists give the same message.
        message = "".join(f"{len(p)}:{p}\n" for p in parts).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def sign(self, stream: str, fields: Mapping[str, str]) -> dict[str, str]:
        signed = {**fields, "nonce": secrets.token_hex(16)}
        signed["sig"] = f"{SCHEME}:{self._mac(stream, signed)}"
        return signed

    def check(self, stream: str, fields: Mapping[str, str]) -> str | None:
        """None when the entry was signed with our key for this stream; else why not (one line)."""
        sig = fields.get("sig")
        if not sig:
            return "the entry is not signed"
        if not fields.get("nonce"):
            return "the entry has no nonce"
        want = f"{SCHEME}:{self._mac(stream, fields)}"
        if not hmac.compare_digest(sig.encode(), want.encode()):
            return "the entry's signature does not hold (another key, another stream, or changed)"
        return None


def age_problem(queued_at: float, now: float) -> str | None:
    """Why a signed entry is too old (or from too far ahead) to run; None when it is fresh enough."""
    if math.isnan(queued_at) or math.isinf(queued_at):
        return "the entry has no usable time"
    if now - queued_at > REPLAY_WINDOW_S:
        return f"the entry was queued {int(now - queued_at)} s ago, past the replay window"
    if queued_at - now > FUTURE_SKEW_S:
        return "the entry is dated in the future"
    return None
