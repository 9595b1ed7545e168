"""The packages of ``cairn`` form layers, each importing only those below it (docs/design.md, "Layers").

An upward import is how a capability ends up depending on its caller: the Pre-Selector reaching
into a capability's query module, a reader borrowing the ingest parser's grammar. Checked on the
source, without importing anything.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import cairn
from cairn.policy.scope import Scope

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


# docs/design.md §Layers, "Domain services know nothing of GraphQL", nor resolvers and commands
# of Cypher, and every access predicate comes from cairn/policy; docs/design.md §One driver model.

# A string is Cypher when it holds a clause that opens a pattern or returns a projection: prose
# (a docstring saying "MERGE" or "match") has neither.
_CYPHER = re.compile(
    r"\b(?:OPTIONAL MATCH|MATCH|MERGE|CREATE)\s*\(|\bUNWIND\s+[$\w]|\bRETURN\s+\S+\s+AS\s+\w"
)
# The packages whose own Cypher is their job: each capability's queries, the policy's predicates
# and walk, the schema's migrations and constraints, the server's start-up probe.
_CYPHER_HOMES = {"graph", "policy", "schema", "runtime"}
_WEB = ("strawberry", "starlette", "graphql")
_WEB_HOMES = {"resolvers", "app"}


@functools.cache
def _sources() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple((path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(ROOT.rglob("*.py")))


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _strings(tree: ast.Module) -> list[ast.Constant]:
    """The module's string literals (f-string parts included), docstrings left out."""
    docs = _docstrings(tree)
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def cypher_outside_its_homes(sources: tuple[tuple[Path, ast.Module], ...]) -> list[str]:
    return [
        f"{path.relative_to(ROOT.parent)}:{node.lineno}"
        for path, tree in sources
        if _package(path) not in _CYPHER_HOMES
        for node in _strings(tree)
        if _CYPHER.search(str(node.value))
    ]


def test_cypher_lives_in_graph_policy_schema_and_runtime() -> None:
    sources = _sources()
    assert cypher_outside_its_homes(sources) == []
    # The detector sees Cypher where it is: every capability's module holds some.
    graph = [(p, t) for p, t in sources if _package(p) == "graph" and p.name != "__init__.py"]
    assert all(any(_CYPHER.search(str(n.value)) for n in _strings(t)) for _, t in graph)
    # ... and in a resolver, were one to write its own query.
    planted = ast.parse('Q = "MATCH (d:Dossier {id: $id}) RETURN d.title AS title"')
    assert cypher_outside_its_homes(((ROOT / "resolvers" / "planted.py", planted),)) == [
        "cairn/resolvers/planted.py:1"
    ]


def test_only_the_resolvers_and_the_app_know_graphql() -> None:
    found = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            web = [n for n in names if n.split(".")[0] in _WEB]
            if web and _package(path) not in _WEB_HOMES:
                found.append(f"{path.relative_to(ROOT.parent)} imports {web[0]}")
    assert found == []


def test_access_predicates_come_from_policy() -> None:
    """Cypher outside ``cairn/policy`` reads none of the scope's parameters: a query that did
    would be testing visibility itself instead of composing ``cairn.policy.acl``'s predicates."""
    names = sorted(Scope.system().cypher_params(), key=len, reverse=True)
    reads = re.compile(r"\$(?:" + "|".join(map(re.escape, names)) + r")\b")
    found = [
        f"{path.relative_to(ROOT.parent)}:{node.lineno} reads {reads.findall(str(node.value))}"
        for path, tree in _sources()
        if _package(path) != "policy"
        for node in _strings(tree)
        if reads.search(str(node.value))
    ]
    assert found == []
    assert reads.search("WHERE n.domain =~ $domain_re") and not reads.search("$domain_regexp")


def test_one_driver_path() -> None:
    """Drivers are made in ``cairn/runtime/database.py`` only: the pooled ``sync_driver`` and
    the embedded server's one-query probe (``embedded_version``, for its start-up and ``cairn
    neo4j status``), which share its options and its address and password for the server."""
    makers = {"GraphDatabase", "AsyncGraphDatabase"}
    found = set()
    for path, tree in _sources():
        for node in ast.walk(tree):
            name = (
                node.id if isinstance(node, ast.Name) else node.name if isinstance(node, ast.alias) else None
            )
            if name in makers:
                found.add(str(path.relative_to(ROOT.parent)))
    assert found == {"cairn/runtime/database.py"}


def test_entry_points_run_no_query_themselves() -> None:
    """The app, the CLI, the commands and the resolvers open no session and send no query: what
    they ask of the graph goes through a domain or schema function, where its Cypher lives."""
    opens = {"session", "execute_query", "begin_transaction"}
    found = [
        f"{path.relative_to(ROOT.parent)}:{node.lineno} calls .{node.func.attr}()"
        for path, tree in _sources()
        if _package(path) in {"app", "cli", "commands", "resolvers"}
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in opens
    ]
    assert found == []
