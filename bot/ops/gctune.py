"""The cyclic garbage collector's thresholds for a gpubot process (the CLI and `serve` alike).

A walk over a large fleet keeps hundreds of thousands of decoded objects alive (65,000 nodes'
JSON) while it makes many short-lived ones; with CPython's defaults (700, 10, 10) every tenth
middle-generation pass is a full collection that walks every live object, about 0.5 s of a
65,000-node pending walk's 3 s (benchmarks/README.md, scale). The objects are plain JSON data,
freed by reference counting: collecting the youngest generation less often and the oldest one ten
times less often costs no memory worth measuring and takes ~0.4 s off that walk. Nothing is
disabled or frozen: a long-running `serve` still collects every generation.
"""

from __future__ import annotations

import gc

THRESHOLDS = (2000, 10, 100)


def tune() -> None:
    gc.set_threshold(*THRESHOLDS)
