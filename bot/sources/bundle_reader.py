"""Reading a must-gather bundle back: the scenario.yaml inside it, for `gpubot why --bundle FILE`.

The writer is bot/actions/bundle_writer.py; a bundle is untrusted input here, and a small one
may inflate to gigabytes (issue 28: a 5.5 MB bundle holding a 700 MB comment-only scenario.yaml
cost 2 GB of memory and 700 MB of temporary files before it was refused). So nothing is
extracted to disk, and before a byte of a member is inflated its size, as the tar header gives
it, is held to MAX_SCENARIO_BYTES and to MAX_RATIO times the bundle's compressed size; the
members before it are skipped with a running count under the same two limits (skipping inflates
them too). The member is then read into memory in chunks, its running size checked again.
"""

from __future__ import annotations

import os
import tarfile
from pathlib import Path

from bot.sources.scenario import Scenario, ScenarioError, decode_scenario

SCENARIO_MEMBER = "scenario.yaml"
# What the writer can produce: scenario.yaml is essential, so it may pass Caps.total_bytes (50 MB);
# a 65,000-node fleet's is ~100 MB.
MAX_SCENARIO_BYTES = 256 << 20
# Inflated bytes per compressed byte: YAML of a real bundle compresses 5-30x, a fleet's up to ~60x.
MAX_RATIO = 100
_CHUNK = 1 << 20


def _limit(source: str, what: str, size: int, packed: int) -> None:
    if size > MAX_SCENARIO_BYTES:
        raise ScenarioError(
            source,
            SCENARIO_MEMBER,
            f"{what} inflates to {size >> 20} MiB, over {MAX_SCENARIO_BYTES >> 20} MiB",
        )
    if size > MAX_RATIO * max(packed, 1 << 16):
        raise ScenarioError(
            source,
            SCENARIO_MEMBER,
            f"{what} inflates {size // max(packed, 1)}x its {packed} compressed bytes, over {MAX_RATIO}x: "
            "a compression bomb, not a must-gather bundle",
        )


def read_bundle(path: str | Path) -> Scenario:
    """The scenario inside a bundle, for `gpubot why --bundle FILE`."""
    source = str(path)
    try:
        packed = os.stat(path).st_size
        with tarfile.open(path, "r:gz") as tar:
            member = None
            while (entry := tar.next()) is not None:
                # The bytes inflated to reach this member's end, checked before any is inflated.
                _limit(source, "the bundle", entry.offset_data + max(entry.size, 0), packed)
                if entry.name == SCENARIO_MEMBER:
                    member = entry
                    break
            if member is None:
                raise ScenarioError(
                    source, "", f"no {SCENARIO_MEMBER} inside: not a gpubot must-gather bundle"
                )
            if not member.isfile():
                raise ScenarioError(source, SCENARIO_MEMBER, "not a regular file")
            _limit(source, SCENARIO_MEMBER, member.size, packed)
            src = tar.extractfile(member)
            assert src is not None  # isfile() above
            chunks: list[bytes] = []
            read = 0
            while chunk := src.read(_CHUNK):
                read += len(chunk)
                _limit(source, SCENARIO_MEMBER, read, packed)
                chunks.append(chunk)
    except FileNotFoundError:
        raise ScenarioError(source, "", "no such file") from None
    except (tarfile.TarError, OSError, EOFError) as err:
        # An OSError's own text repeats the path the message already starts with.
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ScenarioError(source, "", f"not a must-gather bundle (a .tar.gz): {reason}") from None
    text = b"".join(chunks)
    del chunks
    return decode_scenario(text, f"{source}:{SCENARIO_MEMBER}")
