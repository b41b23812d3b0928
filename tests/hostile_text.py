"""Every regular expression that runs on outside text, and 64 KB inputs built to make it backtrack.

Outside text is anything a cluster, a client or Slack controls: logs, events,
object fields, metric expositions, scheduler messages, request headers and
bodies, API error texts. The patterns are found, not listed: every compiled
pattern at module level of the modules below (and inside tuples, dicts and
objects such as log `Signature`s held there), so a pattern added later is
measured too.

The inputs repeat one short chunk to 64 KB: generic shapes (runs of letters,
`a-a-a-`, digits, spaces, `a://`, `key=`) and, for each pattern, its own
literal words (a phrase that starts a match repeated without what must follow
it), the classic trigger of polynomial backtracking.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import msgspec

SIZE = 64 * 1024

PACKAGES = ("bot", "handlers", "layers")
# Entry points that only parse this process's own argv, and modules that start things on import.
_SKIPPED = ("bot.cli.__main__",)


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, package + "."):
            if not info.name.startswith(_SKIPPED):
                names.append(info.name)
    return names


MODULES = tuple(_modules())
_SOURCES: dict[str, str] = {}

GENERIC_CHUNKS = (
    "a",
    "A",
    "a-",
    "a_",
    "-",
    "0",
    "1 ",
    "0.",
    " ",
    "\t",
    " \t",
    "a ",
    "a=",
    "a:",
    "=",
    ":",
    "a://",
    "://",
    "a:a",
    "a@",
    "/",
    "a/",
    ".",
    "a.",
    "\\",
    '"',
    '\\"',
    "'",
    "{",
    "{a",
    "(",
    "[",
    ",",
    ", 1",
    "x-",
    "GPU-",
    "eyJ",
    "eyJa.",
    "Bearer ",
    "token=",
    "-----BEGIN PRIVATE KEY-----",
    "\x1b[",
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{2,30}")


def patterns() -> Iterator[tuple[str, re.Pattern[str]]]:
    """(where, pattern) for every compiled pattern held at module level of MODULES."""
    seen: set[int] = set()
    _SOURCES.update(_sources())

    def walk(where: str, value: Any, depth: int) -> Iterator[tuple[str, re.Pattern[str]]]:
        if depth > 3 or id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, re.Pattern):
            if isinstance(value.pattern, str):
                yield where, value
        elif isinstance(value, tuple | list | frozenset | set):
            for i, item in enumerate(value):
                yield from walk(f"{where}[{i}]", item, depth + 1)
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from walk(f"{where}[{key!r}]", item, depth + 1)
        elif hasattr(value, "__dataclass_fields__") and not isinstance(value, type):
            for name in value.__dataclass_fields__:
                yield from walk(f"{where}.{name}", getattr(value, name, None), depth + 1)
        elif isinstance(value, msgspec.Struct):
            for name in value.__struct_fields__:
                yield from walk(f"{where}.{name}", getattr(value, name, None), depth + 1)
            # Patterns compiled when first used (layers/facts/logsigs.py Signature): compiled here.
            for name, attr in vars(type(value)).items():
                if isinstance(attr, functools.cached_property):
                    yield from walk(f"{where}.{name}", getattr(value, name), depth + 1)

    for name in MODULES:
        module = importlib.import_module(name)
        for attr, value in sorted(vars(module).items()):
            if attr.startswith("__"):
                continue
            yield from walk(f"{name}:{attr}", value, 0)


# Held in a dict and matched at a position through an alias (`value_re = _QUOTED.get(q)`), which
# `anchored` cannot see: bot/sources/exposition.py never searches with it.
MATCHED_AT_A_POSITION = frozenset({"bot.sources.exposition:_QUOTED"})


def _sources() -> dict[str, str]:
    out = {}
    for name in MODULES:
        try:
            out[name] = inspect.getsource(importlib.import_module(name))
        except (OSError, TypeError):  # a namespace package has no source
            continue
    return out


def anchored(where: str) -> bool:
    """Whether the code only ever calls `.match`/`.fullmatch` on this pattern (one start, not every one).

    Looked up by the pattern's name in every module (a pattern imported elsewhere counts there too):
    every mention but its definition must be a direct match() or fullmatch() call."""
    module_name, _, attr = where.partition(":")
    top = re.match(r"\w+", attr)
    assert top is not None
    if f"{module_name}:{top.group(0)}" in MATCHED_AT_A_POSITION:
        return True
    mentions, direct, definitions = _name_counts(len(_SOURCES))
    name = top.group(0)
    return direct[name] > 0 and direct[name] == mentions[name] - definitions[name]


# A name not after a word character or a dot, whole; then whether `.match(`/`.fullmatch(` follows it,
# and, at the start of a line, whether an `=` follows on that line (its definition).
_MENTION = re.compile(r"(?<![\w.])(\w+)\b(\.(?:match|fullmatch)\()?")


@functools.cache
def _name_counts(_sources_read: int) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """How often each name is mentioned, called directly and defined, over every module's source:
    one pass for all the patterns (keyed by how many sources were read, so a later read counts)."""
    mentions: Counter[str] = Counter()
    direct: Counter[str] = Counter()
    definitions: Counter[str] = Counter()
    for source in _SOURCES.values():
        for m in _MENTION.finditer(source):
            name = m.group(1)
            mentions[name] += 1
            if m.group(2):
                direct[name] += 1
            start = m.start()
            if start == 0 or source[start - 1] == "\n":
                line_end = source.find("\n", m.end(1))
                if "=" in source[m.end(1) : None if line_end < 0 else line_end]:
                    definitions[name] += 1
    return mentions, direct, definitions


def chunks_for(pattern: re.Pattern[str]) -> list[str]:
    """The generic chunks plus the pattern's own first words, alone and followed by a space."""
    text = pattern.pattern.replace(r"\s", " ")
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:4]
    own = [form for w in words for form in (w, w + " ")]
    return [*GENERIC_CHUNKS, *own]


def hostile(chunk: str, size: int = SIZE) -> str:
    return (chunk * (size // len(chunk) + 1))[:size]


def run(pattern: re.Pattern[str], text: str, *, at_start: bool = False) -> int:
    """What the code does with a pattern, at its most expensive: every match of it (or, for a
    pattern only ever matched at one position, that one match)."""
    if at_start:
        return 1 if pattern.match(text) else 0
    return sum(1 for _ in pattern.finditer(text))
