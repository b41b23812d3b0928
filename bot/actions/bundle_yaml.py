"""A bundle's scenario.yaml as the collector writes it: readable YAML, replayable by `gpubot why --bundle`.

Logs are spooled entry by entry while they are read (`log_entry`), as literal
blocks when the text survives one byte for byte; the file is assembled once at
the end (`write_scenario`), so no two logs are held in memory together.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from typing import IO, Any

import yaml

from bot.actions.archive import Archive
from bot.actions.redact import MASK, mask_text
from bot.sources.bundle_reader import SCENARIO_MEMBER
from layers import remedy as rm
from layers.sources import K8sObject

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def log_entry(key: str, text: str) -> bytes:
    """One `logs:` entry of scenario.yaml."""
    if _literal_ok(text):
        return _literal(key, text)
    entry = yaml.dump({key: text}, Dumper=_Dumper, allow_unicode=True, width=1 << 20, default_style=None)
    return _indent(entry)


def write_scenario(
    archive: Archive,
    manifest: rm.Manifest,
    *,
    name: str,
    description: str,
    now: float,
    objects: Iterable[K8sObject],
    logs: IO[bytes],
    series: list[dict[str, Any]],
    compact: Iterable[K8sObject] = (),
) -> None:
    """scenario.yaml: the head, every object kept, the spooled log entries, then the series.
    `compact` objects (a large fleet's slimmed nodes) follow the others one JSON line each (JSON is
    YAML): PyYAML's representer took 24 s for 65,000 nodes, json.dumps under 1 s."""
    from bot.sources.scenario import rfc3339

    head: dict[str, Any] = {
        "kind": "Scenario",
        "name": name,
        "description": description,
        "now": rfc3339(now),
    }
    head["x-bundle"] = {"source": manifest.source, "scope": manifest.scope}
    with tempfile.TemporaryFile() as spool:
        # The description quotes the target; objects and logs were masked as they were read.
        top = mask_text(yaml.dump(head, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120))
        dumped = yaml.dump(
            {"objects": list(objects)}, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120
        )
        masked = top.count(MASK) + dumped.count(MASK)
        spool.write(top.encode())
        lines = [f"- {json.dumps(obj, separators=(',', ':'))}\n" for obj in compact]
        if lines and dumped.startswith("objects: []"):
            dumped = "objects:\n"
        spool.write(dumped.encode())
        for line in lines:
            masked += line.count(MASK)
            spool.write(line.encode())
        if logs.tell():
            spool.write(b"logs:\n")
            logs.seek(0)
            while chunk := logs.read(1 << 20):
                masked += chunk.count(MASK.encode())  # a mask split across chunks is not counted
                spool.write(chunk)
        else:
            spool.write(b"logs: {}\n")
        spool.write(
            yaml.dump(
                {"metrics": series},
                Dumper=_Dumper,
                sort_keys=False,
                default_flow_style=None,
                width=1 << 20,
            ).encode()
        )
        archive.add_spooled(SCENARIO_MEMBER, spool, masked)


def _literal_ok(text: str) -> bool:
    """Text a YAML literal block keeps byte for byte (else PyYAML's quoting is used)."""
    if not text.endswith("\n") or text.endswith("\n\n") or text[0] in " \n":
        return False
    return all(line.isprintable() and line == line.rstrip(" ") for line in text[:-1].split("\n"))


def _literal(key: str, text: str) -> bytes:
    body = "".join(f"    {line}\n" if line else "\n" for line in text[:-1].split("\n"))
    return f"  {json.dumps(key)}: |\n{body}".encode()


def _indent(entry: str) -> bytes:
    return "".join(f"  {line}" if line.strip() else line for line in entry.splitlines(keepends=True)).encode()
