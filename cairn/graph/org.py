"""The org capability's Cypher: decisions, events, their transitions and alias overlays.

docs/design.md "Queries by capability". Reads and writes alike: the ingest upserts
(``cairn/ingest/org_memory.py``), the semantic search (``cairn/memory/org_search.py``) and the
Pre-Selector's walk (``cairn/policy/preselector.py``). The access predicates are spliced in from
``cairn.policy.acl``, never written here.
"""

from __future__ import annotations

from cairn.policy.acl import MAX_HOPS, acl_reason, acl_visible, edge_allowed

# Stored for the machine, never shown: vectors and their bookkeeping.
INTERNAL_FIELDS = frozenset({"embedding", "centroid_sum", "summary_pool", "embedding_text_sha"})

# -- ingest (cairn/ingest/org_memory.py) ---------------------------------------------------------

STORED_EMBEDDINGS = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, n.embedding_model AS model, n.embedding_text_sha AS sha
"""

STORED_CAUSAL = "MATCH (a:Entity)-[:CAUSAL_PRECEDES]->(b:Entity) RETURN a.id AS a, b.id AS b"

# Whether a stored element differs from the row about to be SET on it (a null on both
# sides is equal: SET += removes a property given as null).
_DIFFERS = """(old.timestamp IS NULL) <> (row.timestamp IS NULL)
  OR old.timestamp <> datetime(row.timestamp)
  OR any(k IN keys(row.props) WHERE (old[k] IS NULL) <> (row.props[k] IS NULL) OR old[k] <> row.props[k])"""
_COUNTS = """RETURN sum(CASE WHEN old IS NULL THEN 1 ELSE 0 END) AS created,
       sum(CASE WHEN old IS NOT NULL AND coalesce(changed, false) THEN 1 ELSE 0 END) AS updated"""


def upsert_vertex(label: str) -> str:
    return f"""
UNWIND $rows AS row
OPTIONAL MATCH (old:Entity {{id: row.id}})
WITH row, old WHERE old IS NULL OR ({acl_visible("old")} AND old:{label})
WITH row, old, {_DIFFERS} AS changed
MERGE (n:Entity:{label} {{id: row.id}})
ON CREATE SET n.created_at = datetime()
SET n += row.props, n.timestamp = datetime(row.timestamp)
{_COUNTS}
"""


UPSERT_DECISIONS = upsert_vertex("Decision")
UPSERT_EVENTS = upsert_vertex("Event")

UPSERT_CAUSAL = f"""
UNWIND $rows AS row
MATCH (a:Entity {{id: row.from_id}})
MATCH (b:Entity {{id: row.to_id}})
WHERE {acl_visible("a")} AND {acl_visible("b")}
OPTIONAL MATCH (a)-[old:CAUSAL_PRECEDES]->(b)
WITH row, a, b, old, {_DIFFERS} AS changed
MERGE (a)-[r:CAUSAL_PRECEDES]->(b)
SET r += row.props, r.timestamp = CASE WHEN row.timestamp IS NULL THEN null
                                       ELSE datetime(row.timestamp) END
{_COUNTS}
"""

UPSERT_ALIASES = f"""
UNWIND $rows AS row
MATCH (d:Decision {{id: row.decision_id}})
MATCH (e:Event {{id: row.event_id}})
WHERE {acl_visible("d")} AND {acl_visible("e")}
OPTIONAL MATCH (d)-[old:ALIAS_OF]->(e)
WITH row, d, e, old, any(k IN keys(row.props) WHERE old[k] <> row.props[k]) AS changed
MERGE (d)-[r:ALIAS_OF]->(e)
SET r += row.props
{_COUNTS}
"""


# -- search (cairn/memory/org_search.py) ---------------------------------------------------------

SEARCH_QUERY = f"""
MATCH (n:Entity)
WHERE any(l IN labels(n) WHERE l IN $labels) AND n.embedding IS NOT NULL AND {acl_visible("n")}
WITH n, 2 * vector.similarity.cosine(n.embedding, $vector) - 1 AS score
WHERE score >= $threshold
WITH collect({{n: n, score: score}}) AS hits
WITH hits, size(hits) AS total
UNWIND hits AS hit
WITH total, hit.n AS n, hit.score AS score
ORDER BY score DESC, n.id ASC
LIMIT $k
OPTIONAL MATCH (ref:Entity {{id: n.alias_of_decision}})
WITH total, n, score, ref IS NOT NULL AND {acl_visible("ref")} AS ref_visible
RETURN total, n.id AS id, [l IN labels(n) WHERE l <> 'Entity'][0] AS label,
       n {{.*, embedding: null}} AS props, score, CASE WHEN ref_visible THEN n.alias_of_decision END AS ref
"""


# -- the Pre-Selector's walk (cairn/policy/preselector.py) ---------------------------------------

ACL_REASON = acl_reason("n")
EDGE_OK = edge_allowed("type(r)", "startNode(r)", "endNode(r)", "outgoing")
# Node properties as they leave the database: vectors stay behind.
NODE_PROPS = "{.*, " + ", ".join(f"{name}: null" for name in sorted(INTERNAL_FIELDS)) + "}"


def _hop_body(capped: bool) -> str:
    """Every edge incident to the frontier node ``f``, classified: the edge rule per step, the
    ACL on the node it reaches. Hidden neighbours stay (id, reason) material; visible ones are
    capped per edge type (``$cap``) beyond the first hop, most important first."""
    kept = "found[0..$cap]" if capped else "found"
    return f"""
    MATCH (f)-[r]-(n:Entity)
    WITH f, r, n, startNode(r) = f AS outgoing
    WITH r, n, outgoing, {EDGE_OK} AS edge_ok, {ACL_REASON} AS acl
    WITH r, n, outgoing, edge_ok, acl, (edge_ok AND acl IS NULL) AS visible
    ORDER BY visible DESC, coalesce(n.importance, 0.0) DESC, n.id
    WITH type(r) AS rel_type, visible,
         collect({{r: r, n: n, outgoing: outgoing, edge_ok: edge_ok, acl: acl}}) AS found
    UNWIND CASE WHEN visible THEN {kept} ELSE found END AS k
    RETURN rel_type, visible, k.r AS r, k.n AS n, k.outgoing AS outgoing,
           k.edge_ok AS edge_ok, k.acl AS acl"""


def _hop_stage(hop: int) -> str:
    """One hop of the walk inside the single query: expand the frontier, keep edge rows (no
    text), hidden rows (id and reason only), and the newly reached visible nodes with their
    properties, once each; those become the next frontier. ``seen`` holds the nodes reached so
    far, compared as nodes (an id is unique), not by reading their ids again on every hop."""
    return f"""
CALL (frontier) {{
  UNWIND frontier AS f
  CALL (f) {{{_hop_body(hop > 1)}
  }}
  RETURN collect(CASE WHEN visible THEN {{from_id: f.id, id: n.id, rel_type: rel_type, relation: r.relation,
           relations: r.relations, reason: r.reason, outgoing: outgoing}} END) AS hop_edges,
         collect(CASE WHEN NOT visible THEN {{id: n.id, edge_ok: edge_ok, acl: acl}} END) AS hop_hidden,
         collect(DISTINCT CASE WHEN visible THEN n END) AS reached
}}
WITH a, anchor_reason, seen, nodes, edges + hop_edges AS edges, hidden + hop_hidden AS hidden,
     [n IN reached WHERE NOT n IN seen] AS frontier
WITH a, anchor_reason, edges, hidden, frontier, seen + frontier AS seen,
     nodes + [n IN frontier | {{id: n.id, hop: {hop}, label: [l IN labels(n) WHERE l <> 'Entity'][0],
                               props: n {NODE_PROPS}}}] AS nodes"""


def expand_query(depth: int) -> str:
    """The anchor and its whole walk up to ``depth`` hops in one round trip; nothing is
    expanded from an anchor the scope may not see."""
    hops = "".join(_hop_stage(hop) for hop in range(1, depth + 1))
    return f"""
MATCH (a:Entity {{id: $anchor}})
WITH a, {acl_reason("a")} AS anchor_reason
WITH a, anchor_reason, CASE WHEN anchor_reason IS NULL THEN [a] ELSE [] END AS frontier,
     [a] AS seen, [] AS nodes, [] AS edges, [] AS hidden{hops}
RETURN a.id AS id,
       [l IN labels(a) WHERE l <> 'Entity'][0] AS label,
       anchor_reason AS reason,
       CASE WHEN anchor_reason IS NULL THEN a {NODE_PROPS} END AS props,
       nodes, edges, hidden
"""


# One query per possible hop limit (Cypher cannot loop a variable number of stages).
EXPAND_QUERIES = tuple(expand_query(depth) for depth in range(MAX_HOPS + 1))
