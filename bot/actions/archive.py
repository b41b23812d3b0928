"""The must-gather archive: a tar.gz written member by member, with a budget on the uncompressed total.

What does not fit is listed in the manifest's `cut`, never silently dropped.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bot.actions.redact import MASK, mask_text
from layers import remedy as rm

_MASK = MASK.encode()
NAME_PART = 60  # a node name is up to 253 characters; a file name component only 255 bytes


def name_part(name: str, limit: int = NAME_PART) -> str:
    """`name` fit for a file name: kept when short and plain, else its start and a hash of it all."""
    plain = "".join(c if c.isascii() and (c.isalnum() or c in ".-_") else "_" for c in name)
    if plain == name and len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "replace")).hexdigest()[:12]
    return f"{plain[: limit - 13].rstrip('.-_')}-{digest}"


@dataclass(frozen=True)
class Caps:
    log_tail_lines: int = 10_000
    log_bytes: int = 5 * 2**20
    total_bytes: int = 50 * 2**20
    series_step_s: int = rm.SERIES_STEP_S


class Archive:
    """A tar.gz written member by member, with a budget on the uncompressed total."""

    def __init__(self, path: Path, caps: Caps, manifest: rm.Manifest, now: float) -> None:
        self.tar = tarfile.open(path, "w:gz")  # noqa: SIM115 - closed by close()
        self.caps = caps
        self.manifest = manifest
        self.now = now
        self.used = 0
        self.prepaid = 0  # scenario.yaml bytes already counted as their logs were spooled

    def left(self) -> int:
        return self.caps.total_bytes - self.used

    def _member(self, name: str, size: int, data: IO[bytes], masked: int | None = None) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, int(self.now), 0o644
        self.tar.addfile(info, data)
        self.used += size
        entry: dict[str, Any] = {"name": name, "bytes": size}
        if masked is not None:
            entry["masked"] = masked  # values replaced by <masked>, by structure or by pattern
        self.manifest.files.append(entry)

    def add(self, name: str, text: str | bytes, *, essential: bool = False, reserve: int = 0) -> bool:
        """Add one file unless it would pass the total cap (`reserve` = bytes it will cost elsewhere)."""
        # Text is masked here, whatever built it; bytes are a log masked as it was read, or a report.
        data = mask_text(text).encode() if isinstance(text, str) else text
        if not essential and len(data) + reserve > self.left():
            self.manifest.cut.append(
                {
                    "file": name,
                    "reason": "total size cap",
                    "bytes_dropped": len(data),
                    "cap": self.caps.total_bytes,
                }
            )
            return False
        self._member(name, len(data), io.BytesIO(data), None if name.endswith(".gz") else data.count(_MASK))
        return True

    def add_spooled(self, name: str, spool: IO[bytes], masked: int | None = None) -> None:
        size = spool.seek(0, os.SEEK_END)
        spool.seek(0)
        self._member(name, size, spool, masked)
        self.used -= min(self.prepaid, size)

    def close(self) -> None:
        self.tar.close()
