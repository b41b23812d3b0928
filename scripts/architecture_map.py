"""Writes the module map of docs/architecture.md from the tree: one table per room, each module
with the first sentence of its docstring, between the MAP markers. `tests/test_house.py` fails
when the committed map and the tree disagree, so the map cannot drift from the code.

    python scripts/architecture_map.py          # rewrite the map in docs/architecture.md
    python scripts/architecture_map.py --check  # exit 1 when it is out of date
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("bot", "handlers", "layers")
BEGIN = "<!-- MAP: written by scripts/architecture_map.py; do not edit by hand -->"
END = "<!-- /MAP -->"


def first_sentence(doc: str) -> str:
    """The docstring's first paragraph up to its first full stop, on one line, pipes escaped."""
    para = " ".join(doc.strip().split("\n\n", 1)[0].split())
    match = re.search(r"(?<![.\w]\w)[.:;](\s|$)", para)
    sentence = para[: match.start() + 1] if match else para
    return sentence.rstrip(":;").replace("|", "\\|")


def rooms() -> dict[str, list[Path]]:
    """Every package directory (a room) and its modules, `__init__.py` left out."""
    found: dict[str, list[Path]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            room = path.parent.relative_to(ROOT).as_posix()
            found.setdefault(room, []).append(path)
    return dict(sorted(found.items()))


def render() -> str:
    lines = [BEGIN, ""]
    for room, paths in rooms().items():
        lines += [f"### `{room}/`", "", "| module | what it holds |", "|---|---|"]
        for path in paths:
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            lines.append(f"| `{path.name}` | {first_sentence(doc)} |")
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def updated(text: str) -> str:
    """`text` with its map replaced (or appended under a `## Module map` heading)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        return head + render() + tail
    return text.rstrip("\n") + "\n\n## Module map\n\n" + render() + "\n"


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    new = updated(text)
    if "--check" in argv:
        if new != text:
            print("docs/architecture.md's module map is out of date: run python scripts/architecture_map.py")
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
