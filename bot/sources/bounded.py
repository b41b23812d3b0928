"""Nesting depth of untrusted scenario text, judged before a parser builds it (issue 28, item 4).

A `.json` scenario, or a bundle's scenario.yaml, nested 200,000 deep is a few hundred KB: the
standard JSON decoder and msgspec stop with RecursionError (an internal error to the CLI), and
libyaml's C composer recurses on the C stack and kills the process (SIGSEGV past ~100,000
levels). Nothing a cluster holds nests this deep (a Node's managedFields, the deepest, ~20),
so past MAX_DEPTH the file is refused with one line.

YAML is judged before it is composed: a cheap bound first (each level of block nesting costs at
least one column of a line's leading blanks and `- `/`? ` indicators, two levels at most per
column; each level of flow nesting one `[` or `{`, counted without their closers, which a quoted
scalar can fake), and only a text past the bound is read as libyaml's events (its parser keeps a
state stack on the heap, never the C stack), stopping at the first level past MAX_DEPTH.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["MAX_DEPTH", "TooDeep", "check_yaml_depth", "deep_message"]

MAX_DEPTH = 200

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# A line whose leading blanks and block indicators run past a quarter of MAX_DEPTH (one class: linear).
_DEEP_BLOCK = re.compile(r"(?m)^[ \t?-]{" + str(MAX_DEPTH // 4) + "}")
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class TooDeep(ValueError):
    """The text nests deeper than MAX_DEPTH."""


def deep_message() -> str:
    return f"nested too deep to be a scenario (over {MAX_DEPTH} levels)"


def check_yaml_depth(text: str) -> None:
    """Raise TooDeep when the YAML text nests deeper than MAX_DEPTH; a YAML syntax error is left
    to the loader, which reports it with its line."""
    if text.count("[") + text.count("{") < MAX_DEPTH // 2 and not _DEEP_BLOCK.search(text):
        return
    depth = 0
    try:
        for event in yaml.parse(text, Loader=_BaseLoader):
            if isinstance(event, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    raise TooDeep(deep_message())
            elif isinstance(event, _CLOSE):
                depth -= 1
    except yaml.YAMLError:
        return
