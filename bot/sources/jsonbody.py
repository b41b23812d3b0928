"""Decoding the API servers' JSON answers: msgspec first, the standard library for what it refuses.

A 65,000-node list is 130 pages of ~500 KB: decoded with the cyclic garbage collector running,
the collector re-scans the growing fleet of new dicts and lists (0.7 s against 0.2 s of decoding
at 65,000 nodes, benchmarks/README.md). Decoded JSON holds no reference cycles, so the collector
is paused while a large answer is decoded (as bot/sources/scenario.py reads a scenario). It is
one switch for the whole interpreter: another thread's collection waits for the decode only
(a page: milliseconds), and the switch is restored only by the call that turned it off.

msgspec gives the same objects as `json.loads` (key order, duplicate keys: the last, integers of
any size, floats); what it refuses — NaN, a byte-order mark, a lone surrogate escape, a float out
of range — is read by `json.loads`, which accepts those or raises as it always did.
"""

from __future__ import annotations

import gc
import json
from typing import Any

# Below this an answer decodes in well under a millisecond: the standard library, the collector left alone.
PAUSE_BYTES = 64 * 1024


def decode_body(body: bytes) -> Any:
    """The JSON value of an answer's body, exactly as `json.loads(body)` reads it."""
    if len(body) < PAUSE_BYTES:
        # A pod, a node, one node's pods: the standard library is as quick here, and `gpubot why`
        # on a small cluster does not pay msgspec's import (7 ms of a 0.26 s command).
        return json.loads(body)
    import msgspec

    pause = gc.isenabled()
    if pause:
        gc.disable()
    try:
        return msgspec.json.decode(body)
    except msgspec.MsgspecError:
        return json.loads(body)
    finally:
        if pause:
            gc.enable()
