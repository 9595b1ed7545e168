"""The packages of ``cairn`` form layers, each importing only those below it (docs/design.md, "Layers").

An upward import is how a capability ends up depending on its caller: the Pre-Selector reaching
into a capability's query module, a reader borrowing the ingest parser's grammar. Checked on the
source, without importing anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import cairn

# Bottom first. A package may import its own modules and any package listed before it.
LAYERS = (
    "errors",
    "runtime",
    "schema",
    "policy",
    "graph",
    "memory",
    "ingest",
    "resolvers",
    "app",
    "commands",
    "cli",
)
ROOT = Path(cairn.__file__).parent


def _package(path: Path) -> str:
    return path.relative_to(ROOT).with_suffix("").parts[0]


def _imported(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "cairn":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("cairn."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("cairn."))
    return found


def test_every_package_is_in_a_layer() -> None:
    packages = {_package(p) for p in ROOT.rglob("*.py") if p.name != "__init__.py" or p.parent != ROOT}
    assert packages == set(LAYERS)


def test_no_package_imports_one_above_it() -> None:
    upward = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.parent == ROOT and path.name == "__init__.py":
            continue
        own = _package(path)
        for target in _imported(ast.parse(path.read_text(encoding="utf-8"))):
            if target != own and LAYERS.index(target) > LAYERS.index(own):
                upward.append(f"{path.relative_to(ROOT.parent)} imports cairn.{target}")
    assert upward == []
