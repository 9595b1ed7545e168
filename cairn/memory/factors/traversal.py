"""Fetch the DEPENDS_ON subgraph a question needs, under the caller's scope, in one round trip.

Each query walks with a quantified path pattern whose every step must land on a node the
caller may see; with ``DISTINCT`` endpoints Neo4j plans it as a pruning breadth-first
expansion, so the work is linear in the part of the graph reached, not in the number of
paths. Of the prerequisites a reached node has that the caller cannot see, only whether there
are any comes back (``needs_hidden``): no id, no value, no threshold, and not how many.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from neo4j import Driver

from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.models import Scale
from cairn.policy.acl import acl_visible
from cairn.policy.scope import Scope

VIS_S = acl_visible("s")
VIS_M = acl_visible("m")
VIS_Y = acl_visible("y")

# The closure rows: every reached node with its edges to visible nodes, and a flag (never a
# count) for whether it also depends on something the caller cannot see.
_CLOSURE_TAIL = f"""
WITH DISTINCT x
OPTIONAL MATCH (x)-[r:DEPENDS_ON]->(y:Entity)
WITH x, r, y, r IS NOT NULL AND {VIS_Y} AS y_visible
RETURN x.id AS id, CASE WHEN x:Option THEN 'Option' ELSE 'Factor' END AS label,
       x.name AS name, x.category AS category, x.current_value AS value,
       x.current_confidence AS confidence, x.scale AS scale,
       collect(CASE WHEN y_visible
                    THEN {{target: y.id, min_value: coalesce(r.min_value, 0.0), weight: r.weight}}
               END) AS edges,
       count(CASE WHEN r IS NOT NULL AND NOT y_visible THEN 1 END) > 0 AS needs_hidden
"""

DOWNSTREAM_QUERY = f"""
UNWIND $starts AS sid
MATCH (s:Entity {{id: sid}})
WHERE (s:Factor OR s:Option) AND {VIS_S}
MATCH (s) (()-[:DEPENDS_ON]->(m:Entity) WHERE {VIS_M})* (x)
{_CLOSURE_TAIL}
"""

# What-if: the visible nodes that depend on the factor, then everything they depend on.
WHAT_IF_QUERY = f"""
MATCH (s:Factor {{id: $factor}})
WHERE {VIS_S}
CALL (s) {{
  MATCH (s) (()<-[:DEPENDS_ON]-(m:Entity) WHERE {VIS_M})* (u)
  RETURN collect(DISTINCT u) AS ups
}}
UNWIND ups AS u
MATCH (u) (()-[:DEPENDS_ON]->(m:Entity) WHERE {VIS_M})* (x)
{_CLOSURE_TAIL}
"""

VISIBLE_OPTIONS_QUERY = f"""
MATCH (s:Option)
WHERE {VIS_S}
RETURN s.id AS id ORDER BY id
"""


def _graph(rows: Iterable[Any]) -> DepGraph:
    nodes: list[DepNode] = []
    edges: list[DepEdge] = []
    for row in rows:
        scale = Scale.parse(row["scale"]) if row["scale"] else None
        nodes.append(
            DepNode(
                id=row["id"],
                label=row["label"],
                name=row["name"] or row["id"],
                category=row["category"],
                value=row["value"],
                confidence=row["confidence"],
                scale=scale,
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
    records, _, _ = driver.execute_query(DOWNSTREAM_QUERY, {**scope.cypher_params(), "starts": starts})
    return _graph(records)


def what_if_subgraph(driver: Driver, scope: Scope, factor_id: str) -> DepGraph:
    """The factor, every visible node depending on it, and all their prerequisites."""
    records, _, _ = driver.execute_query(WHAT_IF_QUERY, {**scope.cypher_params(), "factor": factor_id})
    return _graph(records)


def visible_options(driver: Driver, scope: Scope) -> list[str]:
    records, _, _ = driver.execute_query(VISIBLE_OPTIONS_QUERY, scope.cypher_params())
    return [str(r["id"]) for r in records]


DEPENDENTS_QUERY = f"""
MATCH (s:Factor {{id: $factor}})
WHERE {VIS_S}
MATCH (m:Entity)-[r:DEPENDS_ON]->(s)
WHERE {VIS_M}
RETURN m.id AS id, CASE WHEN m:Option THEN 'Option' ELSE 'Factor' END AS label, m.name AS name,
       coalesce(r.min_value, 0.0) AS min_value
ORDER BY id
"""


def dependents(driver: Driver, scope: Scope, factor_id: str) -> list[tuple[str, str, str, float]]:
    """Visible nodes that need ``factor_id`` directly: (id, label, name, threshold)."""
    records, _, _ = driver.execute_query(DEPENDENTS_QUERY, {**scope.cypher_params(), "factor": factor_id})
    return [
        (str(r["id"]), str(r["label"]), str(r["name"] or r["id"]), float(r["min_value"])) for r in records
    ]
