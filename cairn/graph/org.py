"""The org capability's Cypher: decisions, events, their transitions and alias overlays.

docs/design.md "Queries by capability". Reads and writes alike: the ingest upserts
(``cairn/ingest/org_memory.py``) and the semantic search (``cairn/memory/org_search.py``). The
Pre-Selector's walk is the policy module's own query (``cairn/policy/walk.py``). The access
predicates are spliced in from ``cairn.policy.acl``, never written here.
"""

from __future__ import annotations

from cairn.policy.acl import acl_visible, search_vector

# -- ingest (cairn/ingest/org_memory.py) ---------------------------------------------------------

STORED_EMBEDDINGS = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, n.embedding_model AS model, n.embedding_text_sha AS sha, n.header_text_sha AS header_sha
"""

STORED_CAUSAL = "MATCH (a:Entity)-[:CAUSAL_PRECEDES]->(b:Entity) RETURN a.id AS a, b.id AS b"

# Whether a stored element's properties differ from the row's about to be SET on it (a null on
# both sides is equal: SET += removes a property given as null; a null on one side differs, where
# `<>` alone would be null, not true).
_PROPS_DIFFER = (
    "any(k IN keys(row.props) WHERE (old[k] IS NULL) <> (row.props[k] IS NULL) OR old[k] <> row.props[k])"
)
# ... or its timestamp from the row's.
_DIFFERS = f"""(old.timestamp IS NULL) <> (row.timestamp IS NULL)
  OR old.timestamp <> datetime(row.timestamp)
  OR {_PROPS_DIFFER}"""
# A vertex row's timestamp is null when the writer may not read the stored one: it is kept.
_VERTEX_DIFFERS = f"""(row.timestamp IS NOT NULL
   AND (old.timestamp IS NULL OR old.timestamp <> datetime(row.timestamp)))
  OR {_PROPS_DIFFER}"""
_COUNTS = """RETURN sum(CASE WHEN old IS NULL THEN 1 ELSE 0 END) AS created,
       sum(CASE WHEN old IS NOT NULL AND coalesce(changed, false) THEN 1 ELSE 0 END) AS updated"""


def upsert_vertex(label: str) -> str:
    return f"""
UNWIND $rows AS row
OPTIONAL MATCH (old:Entity {{id: row.id}})
WITH row, old WHERE old IS NULL OR ({acl_visible("old")} AND old:{label})
WITH row, old, {_VERTEX_DIFFERS} AS changed
MERGE (n:Entity:{label} {{id: row.id}})
ON CREATE SET n.created_at = datetime()
SET n += row.props, n.timestamp = coalesce(datetime(row.timestamp), n.timestamp)
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
WITH row, d, e, old, {_PROPS_DIFFER} AS changed
MERGE (d)-[r:ALIAS_OF]->(e)
SET r += row.props
{_COUNTS}
"""


# The stored x_extra text of nodes and edges an update is about to set, each write-locked first
# (the no-op SET) so the keys kept from it cannot change before the transaction commits
# (cairn.policy.writes.merged_extra).
LOCKED_NODE_EXTRA = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
SET n.x_extra = n.x_extra
RETURN n.id AS id, n.x_extra AS extra
"""


def locked_edge_extra(rel_type: str, start: str, end: str) -> str:
    return f"""
UNWIND $pairs AS pair
MATCH (a:{start} {{id: pair[0]}})-[r:{rel_type}]->(b:{end} {{id: pair[1]}})
SET r.x_extra = r.x_extra
RETURN a.id AS a, b.id AS b, r.x_extra AS extra
"""


LOCKED_CAUSAL_EXTRA = locked_edge_extra("CAUSAL_PRECEDES", "Entity", "Entity")
LOCKED_ALIAS_EXTRA = locked_edge_extra("ALIAS_OF", "Decision", "Event")

# The stored text fields a vector is made from, for an update that keeps the ones its writer may
# not read: the new vector is made from what the node will hold.
STORED_TEXTS = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, n {.option, .rationale, .summary, .description} AS texts
"""

# -- search (cairn/memory/org_search.py) ---------------------------------------------------------

# The labels the org search ranks (``org_search.SEARCHABLE_LABELS``).
SEARCHABLE_LABELS = ("Decision", "Event")


def _label_scans(labels: tuple[str, ...]) -> str:
    """One label scan per searchable label asked for ($labels): matching every Entity and testing
    its labels read every fact, journal entry, turn and section as well, a cost that grew with
    the dossiers rather than with what is searched. UNION keeps a node with both labels once."""
    return "\n  UNION\n  ".join(
        f"MATCH (n:Entity:{label}) WHERE '{label}' IN $labels RETURN n" for label in labels
    )


SEARCH_QUERY = f"""
CALL () {{
  {_label_scans(SEARCHABLE_LABELS)}
}}
WITH n WHERE {acl_visible("n")}
WITH n, {search_vector("n")} AS ranked_by
WHERE ranked_by IS NOT NULL
WITH n, 2 * vector.similarity.cosine(ranked_by, $vector) - 1 AS score
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
       n {{.*, embedding: null, header_embedding: null}} AS props, score,
       CASE WHEN ref_visible THEN n.alias_of_decision END AS ref
"""
