"""The API servers' answers decode as `json.loads` reads them (bot/sources/jsonbody.py): msgspec
for speed, the standard library for what msgspec refuses, and the collector switched back on."""

from __future__ import annotations

import gc
import json
import math

import pytest

from bot.sources.jsonbody import PAUSE_BYTES, decode_body

BODIES = [
    b'{"kind":"NodeList","items":[{"metadata":{"name":"gpu-1"},"status":{"capacity":{"nvidia.com/gpu":"8"}}}]}',
    b'{"a":1,"a":2}',  # duplicate keys: the last
    b"123456789012345678901234567890",  # beyond 64 bits
    b"[1.0000000000000002, 5e-324, 0.1, -0.0, 1E2, -0]",
    '{"message":"caf\u00e9 \u2014 ok"}'.encode(),
    b'"\\ud800"',  # a lone surrogate escape: msgspec refuses it, json reads it
    b"\xef\xbb\xbf{}",  # a byte-order mark
    b"[1e400]",  # out of range: json gives inf
]


def _large(body: bytes) -> bytes:
    """The same value past PAUSE_BYTES (the msgspec path): trailing whitespace is no JSON."""
    return body + b" " * PAUSE_BYTES


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
@pytest.mark.parametrize("body", BODIES)
def test_same_value_as_json_loads(body: bytes, large: bool) -> None:
    if large:
        body = _large(body)
    got, want = decode_body(body), json.loads(body)
    assert repr(got) == repr(want)


def test_nan_as_json_reads_it() -> None:
    assert math.isnan(decode_body(b"NaN"))
    assert math.isnan(decode_body(_large(b"NaN")))


def test_malformed_raises_as_before() -> None:
    for body in (b'{"items": [', _large(b'{"items": [')):
        with pytest.raises(json.JSONDecodeError):
            decode_body(body)


def test_the_collector_is_back_on_after_a_large_answer_even_a_bad_one() -> None:
    big = b'{"items":[' + b",".join(b'{"n":%d}' % i for i in range(PAUSE_BYTES // 8)) + b"]}"
    assert len(decode_body(big)["items"]) == PAUSE_BYTES // 8
    assert gc.isenabled()
    with pytest.raises(json.JSONDecodeError):
        decode_body(big[:-1])
    assert gc.isenabled()
    gc.disable()
    try:
        decode_body(big)
        assert not gc.isenabled()  # left off by someone else: not switched on behind their back
    finally:
        gc.enable()
