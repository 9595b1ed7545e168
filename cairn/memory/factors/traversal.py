"""Fetch the DEPENDS_ON subgraph a question needs, under the caller's scope, in one round trip.

Each query walks with a quantified path pattern whose every step must follow an edge the
scope's rules allow (type, direction, from/to domain globs) and land on a node the caller may
see, at most the scope's ``max_hops`` steps from where the walk starts; ``ANY SHORTEST`` finds
each reached node's depth with a breadth-first search, so the work is linear in the part of
the graph reached, not in the number of paths. Of the prerequisites a reached node has that
the caller cannot reach (hidden, behind a disallowed edge, or past the hop limit), only
whether there are any comes back (``needs_hidden``): no id, no value, no threshold, and not
how many. A prerequisite past the hop limit therefore makes a verdict undetermined, never ready.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from neo4j import Driver

from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.models import Scale
from cairn.policy.acl import MAX_HOPS, acl_visible, hop_bound, step_allowed, within_hops
from cairn.policy.scope import Scope

VIS_S = acl_visible("s")
VIS_M = acl_visible("m")

# One walked DEPENDS_ON step (from ``a`` to ``m``), with the scope's edge rules and the vertex ACL.
STEP_DOWN = step_allowed("DEPENDS_ON", "a", "m", "out", "m")  # prerequisites: a -> m
STEP_UP = step_allowed("DEPENDS_ON", "m", "a", "in", "m")  # dependents: a <- m
# An edge leaving a reached node ``x`` is named only when the walk could take it: the rules
# allow it, its target is visible, and ``x`` is nearer than the hop limit.
NAMED_EDGE = f"{within_hops('depth')} AND {step_allowed('DEPENDS_ON', 'x', 'y', 'out', 'y')}"

# The closure rows: every reached node with its edges to nodes the walk may reach, and a flag
# (never a count) for whether it also depends on something the caller cannot reach.
_CLOSURE_TAIL = f"""
OPTIONAL MATCH (x)-[r:DEPENDS_ON]->(y:Entity)
WITH x, depth, r, y, r IS NOT NULL AND {NAMED_EDGE} AS y_reachable
RETURN x.id AS id, CASE WHEN x:Option THEN 'Option' ELSE 'Factor' END AS label,
       x.name AS name, x.category AS category, x.current_value AS value,
       x.current_confidence AS confidence, x.scale AS scale,
       collect(CASE WHEN y_reachable
                    THEN {{target: y.id, min_value: coalesce(r.min_value, 0.0), weight: r.weight}}
               END) AS edges,
       count(CASE WHEN r IS NOT NULL AND NOT y_reachable THEN 1 END) > 0 AS needs_hidden
"""


def _downstream_query(hops: int | None) -> str:
    return f"""
UNWIND $starts AS sid
MATCH (s:Entity {{id: sid}})
WHERE (s:Factor OR s:Option) AND {VIS_S}
MATCH p = ANY SHORTEST (s) ((a)-[:DEPENDS_ON]->(m:Entity) WHERE {STEP_DOWN}){hop_bound(hops)} (x)
WITH x, min(length(p)) AS depth
{_CLOSURE_TAIL}
"""


def _what_if_query(hops: int | None) -> str:
    """What-if: the visible nodes that depend on the factor, then everything they depend on."""
    return f"""
MATCH (s:Factor {{id: $factor}})
WHERE {VIS_S}
CALL (s) {{
  MATCH (s) ((a)<-[:DEPENDS_ON]-(m:Entity) WHERE {STEP_UP}){hop_bound(hops)} (u)
  RETURN collect(DISTINCT u) AS ups
}}
UNWIND ups AS u
MATCH p = ANY SHORTEST (u) ((a)-[:DEPENDS_ON]->(m:Entity) WHERE {STEP_DOWN}){hop_bound(hops)} (x)
WITH x, min(length(p)) AS depth
{_CLOSURE_TAIL}
"""


# Quantified-path bounds are literals, so there is one query per possible hop limit (None: system).
HOP_LIMITS: tuple[int | None, ...] = (*range(MAX_HOPS + 1), None)
DOWNSTREAM_QUERIES = {h: _downstream_query(h) for h in HOP_LIMITS}
WHAT_IF_QUERIES = {h: _what_if_query(h) for h in HOP_LIMITS}


def _limit(scope: Scope) -> int | None:
    return None if scope.unrestricted else scope.max_hops


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
    query = DOWNSTREAM_QUERIES[_limit(scope)]
    records, _, _ = driver.execute_query(query, {**scope.cypher_params(), "starts": starts})
    return _graph(records)


def what_if_subgraph(driver: Driver, scope: Scope, factor_id: str) -> DepGraph:
    """The factor, every visible node depending on it, and all their prerequisites."""
    query = WHAT_IF_QUERIES[_limit(scope)]
    records, _, _ = driver.execute_query(query, {**scope.cypher_params(), "factor": factor_id})
    return _graph(records)


def visible_options(driver: Driver, scope: Scope) -> list[str]:
    records, _, _ = driver.execute_query(VISIBLE_OPTIONS_QUERY, scope.cypher_params())
    return [str(r["id"]) for r in records]


DEPENDENTS_QUERY = f"""
MATCH (s:Factor {{id: $factor}})
WHERE {VIS_S}
MATCH (m:Entity)-[r:DEPENDS_ON]->(s)
WHERE {within_hops("0")} AND {step_allowed("DEPENDS_ON", "m", "s", "in", "m")}
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
