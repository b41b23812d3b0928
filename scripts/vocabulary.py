"""Writes bot/actions/data/vocabulary.txt: the words a bundle's free text may keep (issue 28).

The GPU stack's own vocabulary, from what it really prints and what gpubot reads and writes:

- the real operand logs, events and describes in the samples folder (default
  /work/shared/samples, `--samples DIR`; skipped when absent, so a clean clone regenerates the
  rest and keeps the committed words of the samples only if they are given again);
- the bundled scenarios (bot/scenarios) and the incidents (tests/incidents): their logs, events
  and objects as clusters print them, but for words no one wrote (a random pod-name suffix with
  no vowel, the hex letters of a UUID) unless a trusted source below has them too;
- every string of layers/ (the log signatures of layers/facts/logsigs.py and the other readers,
  the finding texts that summary.md quotes), bot/render.py and the bundle writer's own text;
- the Xid catalog (layers/data/xid_catalog.csv).

A word is a run of 2-24 ASCII letters between non-alphanumerics, split at case changes
(`XidCriticalError`: xid, critical, error) when it splits into at most four parts; from a run
mixing letters and digits (`el9`, `x86`, `sm90`, `h100`) only letter parts of at most four
letters, when the run has at most three parts. So a token with digits (`Sh4p3sKey`, an AWS key
id) never lends its pieces to the vocabulary, and random base64 (many case changes) does not.

    python scripts/vocabulary.py [--samples DIR] [--check]
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bot" / "actions" / "data" / "vocabulary.txt"
SAMPLES = Path("/work/shared/samples")

_LETTERS = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2,24}(?![A-Za-z0-9])")
_MIXED = re.compile(r"(?<![A-Za-z0-9])(?=[A-Za-z]{0,4}[0-9])[A-Za-z0-9]{2,12}(?![A-Za-z0-9])")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+")
_SEGMENTS = re.compile(r"[A-Za-z]+|[0-9]+")
_VOWEL = re.compile(r"[aeiouy]")
_HEX_LETTERS = re.compile(r"[a-f]+")
# Words the bundle writes itself (scenario.yaml's head, summary.md, errors.txt) and the mask.
OWN = (
    "kind scenario name description now objects logs metrics exposition must gather gather must-gather "
    "collected from node nodes pod pods all gpu gpus metrics kube api context masked previous namespace "
    "container containers replay bundle read reads failed skipped cut caps diagnosis walk no target"
)


def words_of(text: str) -> Iterator[str]:
    for run in _LETTERS.findall(text):
        parts = _CAMEL.findall(run)
        if "".join(parts) == run and len(parts) <= 4:
            yield from (p.lower() for p in parts if len(p) >= 2)
        if len(parts) == 1 or run.islower() or run.isupper():
            yield run.lower()
    for run in _MIXED.findall(text):
        segments = _SEGMENTS.findall(run)
        if len(segments) <= 3:
            yield from (s.lower() for s in segments if s.isalpha() and 2 <= len(s) <= 4)


def _strings(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def scenarios() -> Iterable[str]:
    for folder in (ROOT / "bot" / "scenarios", ROOT / "tests" / "incidents"):
        yield from (p.read_text() for p in sorted(folder.rglob("*.yaml")))


def _generated(word: str) -> bool:
    """A word no one wrote: a random name suffix (`tdjhp`: Kubernetes draws a pod's five and a
    ReplicaSet's 8-10 characters from an alphabet without vowels) or hex letters (`fadf`)."""
    return (len(word) in (5, 8, 9, 10) and not _VOWEL.search(word)) or (
        len(word) >= 3 and _HEX_LETTERS.fullmatch(word) is not None
    )


def sources(samples: Path | None) -> Iterable[str]:
    if samples is not None and samples.is_dir():
        yield from (p.read_text(errors="replace") for p in sorted(samples.iterdir()) if p.is_file())
    for py in sorted((ROOT / "layers").rglob("*.py")):
        yield from _strings(py)
    for own in ("bot/render.py", "bot/actions/bundle_writer.py", "bot/actions/bundle_text.py"):
        yield from _strings(ROOT / own)
    yield (ROOT / "layers" / "data" / "xid_catalog.csv").read_text()
    yield OWN


def vocabulary(samples: Path | None) -> list[str]:
    """The words of the sources, and those of the scenarios that someone wrote (random pod-name
    suffixes and hex fragments of UUIDs are left out unless a trusted source has them too)."""
    trusted = {w for text in sources(samples) for w in words_of(text)}
    seen = {w for text in scenarios() for w in words_of(text)}
    return sorted(trusted | {w for w in seen if not _generated(w)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=Path, default=SAMPLES, help="the real samples folder")
    ap.add_argument("--check", action="store_true", help="exit 1 when a word of the repo is missing")
    args = ap.parse_args(argv)
    words = vocabulary(args.samples)
    if args.check:
        have = set(OUT.read_text().split())
        missing = sorted(set(vocabulary(None)) - have)
        print(
            f"{len(missing)} word(s) of the repo missing from {OUT.relative_to(ROOT)}: {' '.join(missing[:20])}"
        )
        return 1 if missing else 0
    OUT.write_text("\n".join(words) + "\n")
    print(f"{len(words)} words -> {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
