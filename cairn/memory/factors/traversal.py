"""Fetch what a factor question needs, under the caller's scope, in one round trip per question.

Each query walks with a quantified path pattern whose every step must follow an edge the
scope's rules allow (type, direction, from/to domain globs) and land on a node the caller may
see, at most the scope's ``max_hops`` steps from where the walk starts; ``ANY SHORTEST`` finds
each reached node's depth with a breadth-first search, so the work is linear in the part of
the graph reached, not in the number of paths. Of the prerequisites a reached node has that
the caller cannot reach (hidden, behind a disallowed edge, or past the hop limit), only
whether there are any comes back (``needs_hidden``): no id, no value, no threshold, and not
how many. A prerequisite past the hop limit therefore makes a verdict undetermined, never ready.

Each question (why-blocked, why-value, what-if; what-changed in questions.py) is one
parameterised query: the subgraph and the journal entries its answer cites come back together,
and the readiness evaluation runs in Python over the fetched subgraph (dependencies.py). The
queries are in cairn/graph/factors.py, one fixed text per hop limit, so Neo4j plans each once
and reuses the plan (docs/design.md, "Factor journal" and "Policy module").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from neo4j import Driver

from cairn.graph import factors as queries
from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.journal import entries_from_rows
from cairn.memory.factors.models import JournalEntryView, NodeRef, Scale
from cairn.policy.scope import Scope
from cairn.runtime.database import read


def _limit(scope: Scope) -> int | None:
    return None if scope.unrestricted else scope.max_hops


# Scales are a handful of strings ("0-100"); a Scale is immutable, so one parse serves them all.
_scale = lru_cache(maxsize=1024)(Scale.parse)


def _graph(rows: Iterable[Any]) -> DepGraph:
    nodes: list[DepNode] = []
    edges: list[DepEdge] = []
    for row in rows:
        scale = _scale(row["scale"]) if row["scale"] else None
        nodes.append(
            DepNode(
                id=row["id"],
                label=row["label"],
                name=row["name"] or row["id"],
                category=row["category"],
                value=row["value"],
                confidence=row["confidence"],
                scale=scale,
                masked=tuple(row["masked"] or ()),
            )
        )
        for e in row["edges"]:
            weight = e["weight"]
            edges.append(
                DepEdge(
                    row["id"], e["target"], float(e["min_value"]), None if weight is None else float(weight)
                )
            )
        if row["needs_hidden"]:
            edges.append(DepEdge(row["id"], None, 0.0))  # one anonymous edge, however many are hidden
    return DepGraph(nodes, edges)


def downstream(driver: Driver, scope: Scope, starts: list[str]) -> DepGraph:
    """Everything the visible ``starts`` depend on, transitively, as the scope sees it."""
    rows = read(
        driver, queries.DOWNSTREAM_QUERIES[_limit(scope)], {**scope.cypher_params(), "starts": starts}
    )
    return _graph(node for row in rows for node in row["nodes"])


def why_blocked_subgraph(
    driver: Driver, scope: Scope, node_id: str, entries_per_factor: int
) -> tuple[DepGraph, list[JournalEntryView]]:
    """What ``node_id`` depends on as the scope sees it, and the newest entries of its unmet
    prerequisites (``entries_per_factor`` each), in one round trip."""
    params = {**scope.cypher_params(), "start": node_id, "limit": entries_per_factor}
    row = read(driver, queries.WHY_BLOCKED_QUERIES[_limit(scope)], params)[0]
    return _graph(row["nodes"]), entries_from_rows(row["entries"], scope)


def what_if_subgraph(driver: Driver, scope: Scope, factor_id: str) -> DepGraph:
    """The factor, every visible node depending on it, and all their prerequisites."""
    rows = read(
        driver, queries.WHAT_IF_QUERIES[_limit(scope)], {**scope.cypher_params(), "factor": factor_id}
    )
    return _graph(rows[0]["nodes"])


DependentRow = tuple[NodeRef, float]  # (node, threshold)


def _dependent(row: Any) -> DependentRow:
    name = str(row["name"] or row["id"])
    node = NodeRef(str(row["id"]), str(row["label"]), name, tuple(row["masked"] or ()))
    return (node, float(row["min_value"]))


@dataclass(frozen=True)
class ValueRows:
    """What why-value reads, in one round trip: the factor node, its current and recent entries,
    its closure, the newest entry of each visible direct prerequisite, its direct dependents."""

    factor: dict[str, Any]
    current: JournalEntryView | None
    history: list[JournalEntryView]
    graph: DepGraph
    last: list[JournalEntryView]
    dependents: list[DependentRow]


def why_value_rows(driver: Driver, scope: Scope, factor_id: str, history_limit: int) -> ValueRows | None:
    """None when the factor is unknown or not visible."""
    params = {**scope.cypher_params(), "factor": factor_id, "history_limit": max(0, history_limit)}
    rows = read(driver, queries.WHY_VALUE_QUERIES[_limit(scope)], params)
    if not rows:
        return None
    row = rows[0]
    current = entries_from_rows([row["current"]], scope) if row["current"] is not None else []
    return ValueRows(
        factor=dict(row["factor"]),
        current=current[0] if current else None,
        history=entries_from_rows(row["history"], scope),
        graph=_graph(row["nodes"]),
        last=entries_from_rows(row["last"], scope),
        dependents=[_dependent(d) for d in row["dependents"]],
    )


def visible_options(driver: Driver, scope: Scope) -> list[str]:
    return [str(r["id"]) for r in read(driver, queries.VISIBLE_OPTIONS, scope.cypher_params())]


def dependents(driver: Driver, scope: Scope, factor_id: str) -> list[DependentRow]:
    """Visible nodes that need ``factor_id`` directly: (id, label, name, threshold)."""
    records = read(driver, queries.DIRECT_DEPENDENTS, {**scope.cypher_params(), "factor": factor_id})
    return [_dependent(r) for r in records]
