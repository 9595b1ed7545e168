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
query texts are fixed per hop limit, so Neo4j plans each once and reuses the plan
(docs/design.md, "Factor journal" and "Policy in Cypher").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from neo4j import READ_ACCESS, Driver, Record
from neo4j.exceptions import DriverError, Neo4jError

from cairn.memory.factors.dependencies import DepEdge, DepGraph, DepNode
from cairn.memory.factors.journal import ABOUT_IN, ENTRY_INFLUENCE, ENTRY_ROW, VIS_E, entries_from_rows
from cairn.memory.factors.models import JournalEntryView, Scale
from cairn.policy.acl import MAX_HOPS, acl_visible, edge_allowed, hop_bound, step_allowed, within_hops
from cairn.policy.scope import Scope

VIS_S = acl_visible("s")
VIS_M = acl_visible("m")

# One walked DEPENDS_ON step (from ``a`` to ``m``), with the scope's edge rules and the vertex ACL.
STEP_DOWN = step_allowed("DEPENDS_ON", "a", "m", "out", "m")  # prerequisites: a -> m
STEP_UP = step_allowed("DEPENDS_ON", "m", "a", "in", "m")  # dependents: a <- m
# An edge leaving a reached node ``x`` is named only when the walk could take it: the rules
# allow it, its target is visible, and ``x`` is nearer than the hop limit.
NAMED_EDGE = f"{within_hops('depth')} AND {step_allowed('DEPENDS_ON', 'x', 'y', 'out', 'y')}"


# Walks expand from their bound start (StatefulShortestPath(All)). Left to its estimates, the
# planner may instead pair the start with every node in the graph (AllNodesScan, CartesianProduct,
# ShortestPath): the same answer at a cost that grows with the whole graph, 20-90 ms at 1k factors.
PLAN_WALKS = "CYPHER statefulShortestPlanningMode=all_if_possible"


def _walk(start: str, hops: int | None, *, up: bool = False) -> str:
    """Every node ``x`` the scope reaches from ``start``, with its ``depth`` (0 for ``start``)."""
    if hops == 0:  # a zero-step quantifier is not valid Cypher; the walk is the start alone
        return f"WITH {start} AS x, 0 AS depth"
    step = (
        f"(a)<-[:DEPENDS_ON]-(m:Entity) WHERE {STEP_UP}"
        if up
        else f"(a)-[:DEPENDS_ON]->(m:Entity) WHERE {STEP_DOWN}"
    )
    return f"""MATCH p = ANY SHORTEST ({start}) ({step}){hop_bound(hops)} (x)
WITH x, min(length(p)) AS depth"""


# The closure rows: every reached node ``x`` (at ``depth``) with its edges to nodes the walk may
# reach, a flag (never a count) for whether it also depends on something the caller cannot
# reach, and the visible factors it needs whose threshold is not met (the blockers' targets).
_NODE = f"""
OPTIONAL MATCH (x)-[r:DEPENDS_ON]->(y:Entity)
WITH x, depth, r, y, r IS NOT NULL AND {NAMED_EDGE} AS y_reachable
WITH x,
     collect(CASE WHEN y_reachable
                  THEN {{target: y.id, min_value: coalesce(r.min_value, 0.0), weight: r.weight}}
             END) AS edges,
     count(CASE WHEN r IS NOT NULL AND NOT y_reachable THEN 1 END) > 0 AS needs_hidden,
     collect(CASE WHEN y_reachable AND y:Factor
                       AND (y.current_value IS NULL OR y.current_value < coalesce(r.min_value, 0.0))
                  THEN y END) AS unmet
WITH {{id: x.id, label: CASE WHEN x:Option THEN 'Option' ELSE 'Factor' END, name: x.name,
       category: x.category, value: x.current_value, confidence: x.current_confidence,
       scale: x.scale, edges: edges, needs_hidden: needs_hidden}} AS node, unmet
"""


def _latest_entries(limit: str) -> str:
    """The newest ``limit`` visible entries of each factor ``f``, as ENTRY_ROW maps in ``entries``."""
    return f"""
  CALL (f) {{
    MATCH (e:JournalEntry)-[:ABOUT]->(f)
    WHERE {VIS_E} AND {ABOUT_IN}
    RETURN e ORDER BY e.timestamp DESC, e.seq DESC LIMIT {limit}
  }}
  {ENTRY_INFLUENCE}
  RETURN collect({ENTRY_ROW}) AS entries
"""


def _downstream_query(hops: int | None) -> str:
    return f"""{PLAN_WALKS}
UNWIND $starts AS sid
MATCH (s:Entity {{id: sid}})
WHERE (s:Factor OR s:Option) AND {VIS_S}
{_walk("s", hops)}
{_NODE}
RETURN collect(node) AS nodes
"""


def _why_blocked_query(hops: int | None) -> str:
    """Why-blocked: the closure below the subject, and the newest entries of every unmet prerequisite."""
    return f"""{PLAN_WALKS}
MATCH (s:Entity {{id: $start}})
WHERE (s:Factor OR s:Option) AND {VIS_S}
{_walk("s", hops)}
{_NODE}
WITH collect(node) AS nodes, collect(unmet) AS unmet
CALL (unmet) {{
  UNWIND unmet AS targets
  UNWIND targets AS f
  WITH DISTINCT f
  {_latest_entries("$limit")}
}}
RETURN nodes, entries
"""


def _what_if_query(hops: int | None) -> str:
    """What-if: the visible nodes that depend on the factor, then everything they depend on."""
    return f"""{PLAN_WALKS}
MATCH (s:Factor {{id: $factor}})
WHERE {VIS_S}
CALL (s) {{
  {_walk("s", hops, up=True)}
  RETURN collect(x) AS ups
}}
UNWIND ups AS u
{_walk("u", hops)}
{_NODE}
RETURN collect(node) AS nodes
"""


def _why_value_query(hops: int | None) -> str:
    """Why-value: the factor, its current entry, its history, its closure, the newest entry of each
    visible direct prerequisite, and its visible direct dependents."""
    return f"""{PLAN_WALKS}
MATCH (s:Factor {{id: $factor}})
WHERE {VIS_S}
CALL (s) {{
  {_walk("s", hops)}
  {_NODE}
  RETURN collect(node) AS nodes
}}
CALL (s) {{
  OPTIONAL MATCH (s)-[:CURRENT_STATE]->(e:JournalEntry)
  WHERE {VIS_E} AND {edge_allowed("CURRENT_STATE", "s", "e", "out")}
  WITH e LIMIT 1
  OPTIONAL MATCH (e)-[:ABOUT]->(f:Factor)
  WHERE {acl_visible("f")} AND {edge_allowed("ABOUT", "e", "f", "out")}
  WITH e, f LIMIT 1
  {ENTRY_INFLUENCE}
  RETURN CASE WHEN f IS NULL THEN null ELSE {ENTRY_ROW} END AS current
}}
CALL (s) {{
  WITH s AS f
  MATCH (e:JournalEntry)-[:ABOUT]->(f)
  WHERE {VIS_E} AND {ABOUT_IN}
  WITH f, e ORDER BY e.timestamp DESC, e.seq DESC LIMIT $history_limit
  {ENTRY_INFLUENCE}
  RETURN collect({ENTRY_ROW}) AS history
}}
CALL (s) {{
  MATCH (s)-[:DEPENDS_ON]->(f:Factor)
  WHERE {within_hops("0")} AND {step_allowed("DEPENDS_ON", "s", "f", "out", "f")}
  WITH DISTINCT f
  {_latest_entries("1")}
}}
CALL (s) {{
  MATCH (m:Entity)-[r:DEPENDS_ON]->(s)
  WHERE {within_hops("0")} AND {step_allowed("DEPENDS_ON", "m", "s", "in", "m")}
  WITH m, r ORDER BY m.id
  RETURN collect({{id: m.id, label: CASE WHEN m:Option THEN 'Option' ELSE 'Factor' END,
                   name: m.name, min_value: coalesce(r.min_value, 0.0)}}) AS dependents
}}
RETURN s {{.id, .name, .category, .scale, .current_value, .current_confidence, .inference_status,
          .last_updated, .aliases}} AS factor,
       current, history, nodes, entries AS last, dependents
"""


# Quantified-path bounds are literals, so there is one query per possible hop limit (None: system).
HOP_LIMITS: tuple[int | None, ...] = (*range(MAX_HOPS + 1), None)
DOWNSTREAM_QUERIES = {h: _downstream_query(h) for h in HOP_LIMITS}
WHY_BLOCKED_QUERIES = {h: _why_blocked_query(h) for h in HOP_LIMITS}
WHAT_IF_QUERIES = {h: _what_if_query(h) for h in HOP_LIMITS}
WHY_VALUE_QUERIES = {h: _why_value_query(h) for h in HOP_LIMITS}


def _limit(scope: Scope) -> int | None:
    return None if scope.unrestricted else scope.max_hops


READ_ATTEMPTS = 3


def read(driver: Driver, query: str, params: Mapping[str, Any]) -> list[Record]:
    """One read, one round trip: an auto-commit query (a managed transaction would add a COMMIT
    round trip), retried like one when the error is transient."""
    for attempt in range(1, READ_ATTEMPTS + 1):
        try:
            with driver.session(default_access_mode=READ_ACCESS) as session:
                return list(session.run(query, dict(params)))
        except (Neo4jError, DriverError) as exc:
            if attempt == READ_ATTEMPTS or not exc.is_retryable():
                raise
    raise AssertionError("unreachable")


VISIBLE_OPTIONS_QUERY = f"""
MATCH (s:Option)
WHERE {VIS_S}
RETURN s.id AS id ORDER BY id
"""


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
    rows = read(driver, DOWNSTREAM_QUERIES[_limit(scope)], {**scope.cypher_params(), "starts": starts})
    return _graph(node for row in rows for node in row["nodes"])


def why_blocked_subgraph(
    driver: Driver, scope: Scope, node_id: str, entries_per_factor: int
) -> tuple[DepGraph, list[JournalEntryView]]:
    """What ``node_id`` depends on as the scope sees it, and the newest entries of its unmet
    prerequisites (``entries_per_factor`` each), in one round trip."""
    params = {**scope.cypher_params(), "start": node_id, "limit": entries_per_factor}
    row = read(driver, WHY_BLOCKED_QUERIES[_limit(scope)], params)[0]
    return _graph(row["nodes"]), entries_from_rows(row["entries"])


def what_if_subgraph(driver: Driver, scope: Scope, factor_id: str) -> DepGraph:
    """The factor, every visible node depending on it, and all their prerequisites."""
    rows = read(driver, WHAT_IF_QUERIES[_limit(scope)], {**scope.cypher_params(), "factor": factor_id})
    return _graph(rows[0]["nodes"])


@dataclass(frozen=True)
class ValueRows:
    """What why-value reads, in one round trip: the factor node, its current and recent entries,
    its closure, the newest entry of each visible direct prerequisite, its direct dependents."""

    factor: dict[str, Any]
    current: JournalEntryView | None
    history: list[JournalEntryView]
    graph: DepGraph
    last: list[JournalEntryView]
    dependents: list[tuple[str, str, str, float]]


def why_value_rows(driver: Driver, scope: Scope, factor_id: str, history_limit: int) -> ValueRows | None:
    """None when the factor is unknown or not visible."""
    params = {**scope.cypher_params(), "factor": factor_id, "history_limit": max(0, history_limit)}
    rows = read(driver, WHY_VALUE_QUERIES[_limit(scope)], params)
    if not rows:
        return None
    row = rows[0]
    current = entries_from_rows([row["current"]]) if row["current"] is not None else []
    return ValueRows(
        factor=dict(row["factor"]),
        current=current[0] if current else None,
        history=entries_from_rows(row["history"]),
        graph=_graph(row["nodes"]),
        last=entries_from_rows(row["last"]),
        dependents=[
            (str(d["id"]), str(d["label"]), str(d["name"] or d["id"]), float(d["min_value"]))
            for d in row["dependents"]
        ],
    )


def visible_options(driver: Driver, scope: Scope) -> list[str]:
    return [str(r["id"]) for r in read(driver, VISIBLE_OPTIONS_QUERY, scope.cypher_params())]


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
    records = read(driver, DEPENDENTS_QUERY, {**scope.cypher_params(), "factor": factor_id})
    return [
        (str(r["id"]), str(r["label"]), str(r["name"] or r["id"]), float(r["min_value"])) for r in records
    ]
