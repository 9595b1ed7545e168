"""Queries by capability (docs/design.md, "Queries by capability"), checked without Neo4j.

Every Cypher text a domain module runs is written in its capability's module under
``cairn.graph`` (or, for the access predicates, the write checks and the schema's own
migrations, in ``cairn.policy`` and ``cairn.schema``); domain modules only import them. And no
capability's query module imports another's: a fragment two capabilities need is an access
predicate and belongs to the policy module.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import cairn
import cairn.graph

# A Cypher statement or fragment, as test_explain recognises one.
CLAUSE = r"^\s*(?:CYPHER|MATCH|OPTIONAL MATCH|MERGE|CREATE|UNWIND|CALL|WITH|RETURN|SHOW|DROP)\b"
CYPHER = re.compile(CLAUSE + r"|\b(?:MATCH|MERGE)\b")
# The modules that write Cypher: the capabilities' queries; the access predicates and the write
# checks built from them; constraints, indexes, the schema version and the graph checksum; the
# embedded server's status probe, with the drivers (cairn/runtime/database.py).
OWN_CYPHER = ("cairn.graph", "cairn.policy", "cairn.schema", "cairn.runtime.database")


def _module_names() -> list[str]:
    return [info.name for info in pkgutil.walk_packages(cairn.__path__, "cairn.")]


def _strings(module_name: str) -> list[tuple[str, str]]:
    """(name, text) of the module-level strings and those in module-level dicts, tuples, lists."""
    found = []
    for name, value in vars(importlib.import_module(module_name)).items():
        values = (
            value.values()
            if isinstance(value, dict)
            else value
            if isinstance(value, (tuple, list))
            else [value]
        )
        found.extend((name, text) for text in values if isinstance(text, str) and not name.startswith("__"))
    return found


def _owned(name: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in OWN_CYPHER)


def test_domain_modules_only_import_their_queries() -> None:
    imported = {id(text) for m in _module_names() if _owned(m) for _, text in _strings(m)}
    written_here = [
        f"{m}.{n}"
        for m in _module_names()
        if not _owned(m)
        for n, text in _strings(m)
        if CYPHER.search(text) and id(text) not in imported
    ]
    assert written_here == []


def test_no_capability_borrows_another_capabilitys_queries() -> None:
    folder = Path(cairn.graph.__file__).parent
    borrowed = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cairn.graph"):
                borrowed.append(f"{path.stem} imports {node.module}")
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "cairn"
                and any(a.name == "graph" for a in node.names)
            ):
                borrowed.append(f"{path.stem} imports cairn.graph")
    assert borrowed == []
