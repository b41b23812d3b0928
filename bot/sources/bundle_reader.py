"""Reading a must-gather bundle back: the scenario.yaml inside it, for `gpubot why --bundle FILE`.

The writer is bot/actions/bundle_writer.py; a bundle is untrusted input here.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

from bot.sources.scenario import Scenario, ScenarioError, load_scenario

SCENARIO_MEMBER = "scenario.yaml"
MAX_SCENARIO_BYTES = 1 << 30  # refuse to inflate more than this from an untrusted bundle


def read_bundle(path: str | Path) -> Scenario:
    """The scenario inside a bundle, for `gpubot why --bundle FILE`."""
    source = str(path)
    try:
        with tarfile.open(path, "r:gz") as tar:
            try:
                member = tar.getmember(SCENARIO_MEMBER)
            except KeyError:
                raise ScenarioError(
                    source, "", f"no {SCENARIO_MEMBER} inside: not a gpubot must-gather bundle"
                ) from None
            if not member.isfile() or member.size > MAX_SCENARIO_BYTES:
                raise ScenarioError(source, SCENARIO_MEMBER, "not a regular file of a sane size")
            src = tar.extractfile(member)
            assert src is not None  # isfile() above
            with tempfile.TemporaryDirectory(prefix="gpubot-bundle-") as tmp:
                inner = Path(tmp) / SCENARIO_MEMBER
                with inner.open("wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                try:
                    return load_scenario(inner)
                except ScenarioError as err:
                    raise ScenarioError(f"{source}:{SCENARIO_MEMBER}", err.key_path, err.message) from None
    except FileNotFoundError:
        raise ScenarioError(source, "", "no such file") from None
    except (tarfile.TarError, OSError, EOFError) as err:
        # An OSError's own text repeats the path the message already starts with.
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ScenarioError(source, "", f"not a must-gather bundle (a .tar.gz): {reason}") from None
