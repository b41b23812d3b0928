"""No import circle in bot/, handlers/ or layers/, as Python runs imports (issue 31, "the house").

import-linter's `acyclic_siblings` contract (pyproject.toml) sees the imports grimp resolves: `from
bot.cli import actions` is an import of `bot.cli.actions`. Python also runs `bot/cli/__init__.py`
for it, and a package whose `__init__` imports a module that imports names from the package is a
circle all the same (`bot/cli/__init__.py` ↔ `bot/cli/main.py`, the last one: the half-initialised
package and `python -m bot.cli.main`'s RuntimeWarning). So here every `from PKG import …` is an
edge to PKG as well, imports inside functions and under TYPE_CHECKING included, and the graph must
have no strongly connected component of more than one module."""

from __future__ import annotations

import re

import grimp

PACKAGES = ("bot", "handlers", "layers")
_FROM = re.compile(r"^\s*from\s+([\w.]+)\s+import\b")


def import_graph() -> dict[str, set[str]]:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    edges: dict[str, set[str]] = {m: set() for m in graph.modules}
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            edges[importer].add(imported)
            for detail in graph.get_import_details(importer=importer, imported=imported):
                named = _FROM.match(str(detail["line_contents"]))
                if named and named.group(1) in edges and named.group(1) != importer:
                    edges[importer].add(named.group(1))
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in edges:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_the_check_sees_a_package_and_its_module_importing_each_other() -> None:
    edges = {"p": {"p.main"}, "p.main": {"p.args", "p"}, "p.args": set(), "q": {"p.args"}}
    assert circles(edges) == [["p", "p.main"]]
