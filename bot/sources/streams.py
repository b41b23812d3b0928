"""Reading a file that may be a pipe or a device (`--scenario /dev/stdin`, `<(…)`) with a bound."""

from __future__ import annotations

import errno
from typing import BinaryIO

# A scenario read from a pipe (not mapped) stops here: a 10,000-node fleet is ~170 MB of JSON.
MAX_READ_BYTES = 512 * 2**20


def read_capped(f: BinaryIO) -> bytes:
    """A pipe or a device, read to its end; one with NUL bytes (/dev/zero) or without an end
    (`yes |`) is refused early instead of filling memory."""
    chunks: list[bytes] = []
    size = 0
    while chunk := f.read(1 << 20):
        if not chunks and b"\x00" in chunk:
            raise OSError(errno.EINVAL, "NUL bytes, not a text file")
        size += len(chunk)
        if size > MAX_READ_BYTES:
            raise OSError(errno.EFBIG, f"over {MAX_READ_BYTES >> 20} MiB read from a stream and no end")
        chunks.append(chunk)
    return b"".join(chunks)
