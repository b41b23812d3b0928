"""Every finding code is in the registry, the docs and a layer: what a newcomer adding one must touch.

CONTRIBUTING.md ("Add a finding code") names the three places; this test fails
with the code and the place it is missing from.
"""

from __future__ import annotations

import re
from pathlib import Path

from layers.findings import CODES

ROOT = Path(__file__).resolve().parents[1]
CODE = re.compile(r"\b(L[1-5]_[A-Z0-9_]+)\b")
# `unknown(ctx_or_layer, ...)` builds L<n>_UNKNOWN for whichever layer could not look.
BUILT_BY_UNKNOWN = {f"L{n}_UNKNOWN" for n in range(1, 6)}


def _layer_sources() -> dict[str, str]:
    return {
        str(p.relative_to(ROOT)): p.read_text()
        for p in sorted((ROOT / "layers").rglob("*.py"))
        if p.name != "findings.py"
    }


def test_every_code_is_documented_and_every_documented_code_exists() -> None:
    doc = (ROOT / "docs" / "findings.md").read_text()
    documented = set(re.findall(r"^\| `(L[1-5]_[A-Z0-9_]+)` \|", doc, re.M))
    assert sorted(set(CODES) - documented) == [], "codes missing from docs/findings.md"
    assert sorted(documented - set(CODES)) == [], "docs/findings.md documents codes layers/findings.py lacks"


def test_every_code_is_raised_by_a_layer_and_every_raised_code_is_registered() -> None:
    sources = _layer_sources()
    raised = {code: sorted(f for f, text in sources.items() if f'"{code}"' in text) for code in CODES}
    assert sorted(c for c, files in raised.items() if not files and c not in BUILT_BY_UNKNOWN) == []
    quoted = {c for text in sources.values() for c in re.findall(r"\"(L[1-5]_[A-Z0-9_]+)\"", text)}
    assert sorted(quoted - set(CODES)) == [], "a layer names a code layers/findings.py does not register"


def test_a_code_lives_in_its_own_layer() -> None:
    """L3_* codes are raised by the layer-3 rules (or the facts they use), never by layer 1's module."""
    layer_modules = {1: "scheduling.py", 2: "runtime.py", 3: "versions.py", 4: "memory.py", 5: "card.py"}
    for layer, module in layer_modules.items():
        text = (ROOT / "layers" / module).read_text()
        foreign = sorted({c for c in re.findall(r"\"(L[1-5]_[A-Z0-9_]+)\"", text) if int(c[1]) != layer})
        assert foreign == [], f"layers/{module} raises another layer's codes"
