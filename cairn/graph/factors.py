"""The factor journal's Cypher: every query and fragment the factor capability runs
(docs/design.md, "Factor journal").

Reads run on a caller's behalf and carry the access predicates of ``cairn.policy.acl``: the
vertex ACL on every node matched, the edge rule on every relationship walked. Of what the
caller cannot see, a query returns at most a flag (``hidden_influence``, ``needs_hidden``),
never an id, a value or a count. ``LOCK_FACTOR``, ``CLAIM_SESSION`` and ``WRITE_ENTRY`` are the
journal write (journal.py checks the caller's scope before it runs them, and the session between
the last two, in the same transaction); the ``STORED_*``, ``UPSERT_*``
and ``REFRESH_FACTOR_STATE`` queries are the loader's (ingest/factors.py), run as the system.

The dependency walks (docs/design.md, "Factor questions") are built once per hop limit:
quantified-path bounds are literals, so each limit is its own fixed text that Neo4j plans
once and reuses.
"""

from __future__ import annotations

from cairn.policy.acl import (
    MAX_HOPS,
    acl_visible,
    edge_allowed,
    edge_type_walkable,
    field_shown,
    hop_bound,
    name_masked,
    search_fields_shown,
    shown_or,
    step_allowed,
    within_hops,
)

# -- access predicates, from the policy module ---------------------------------------------------

# The vertex ACL on the variable named: a factor ``f``, an entry ``e``, an influencing factor
# ``g``, and ``s`` (the start of a walk, an option, an entry's session).
_VISIBLE_F = acl_visible("f")
_VISIBLE_E = acl_visible("e")
_VISIBLE_G = acl_visible("g")
_VISIBLE_S = acl_visible("s")
# An entry's ``timestamp`` where the scope shows it, else null, and whether it shows (docs/design.md
# §Policy module, "Ordering by a maskable field"): entries are ordered newest first by the time the
# caller sees, then by their journal sequence (the append order, which each entry's previous
# value already tells); a time window (since, until, as of) matches only entries whose time the
# caller sees, so no window, order or "latest" tells a masked time. The entries of one factor
# share its domain, so one field rule decides for all of them.
_AT = shown_or("e", "timestamp", "null")
_AT_SHOWN = field_shown("e", "timestamp")
_NEWEST_FIRST = f"{_AT} DESC, e.seq DESC, e.id DESC"
# A query that keeps only entries whose time shows (a window) orders them by the stored time, which
# is then the shown one, and evaluates the field rule once per entry.
# An entry ``e`` read from its factor ``f`` (stored e -ABOUT-> f, walked in).
_ABOUT_FROM_FACTOR = edge_allowed("ABOUT", "e", "f", "in")
# A factor ``g`` reached from an entry ``e`` that it influenced.
_INFLUENCE_FROM_ENTRY = edge_allowed("INFLUENCED_BY", "e", "g", "out")
# Only a type the scope walks somewhere can hide something from it (acl.edge_type_walkable): a
# role that walks no INFLUENCED_BY (DEPENDS_ON) edge is not told an entry (a factor) has one.
_INFLUENCE_WALKABLE = edge_type_walkable("'INFLUENCED_BY'")
_DEPENDS_WALKABLE = edge_type_walkable("'DEPENDS_ON'")

# -- journal entries -----------------------------------------------------------------------------

# Projection of an entry ``e`` about factor ``f``: its visible influences, and only a flag for
# the hidden ones ('' marks a hidden one inside the subquery; the flag is all that is returned).
_ENTRY_INFLUENCES = f"""
CALL (e) {{
  OPTIONAL MATCH (e)-[:INFLUENCED_BY]->(g:Entity)
  WITH CASE WHEN g IS NULL THEN null
            WHEN {_VISIBLE_G} AND {_INFLUENCE_FROM_ENTRY} THEN g.id
            WHEN {_INFLUENCE_WALKABLE} THEN '' END AS seen
  WITH collect(seen) AS seen
  RETURN [i IN seen WHERE i <> ''] AS influence, '' IN seen AS hidden_influence
}}
"""
_ENTRY_MAP = (
    """e {.id, .domain, .op, .timestamp, .previous_number, .new_number, .rationale, .excerpt, .confidence,
           .session_id, .inference_status, .details, .seq, order_at: """
    + _AT
    + "}"
)
# The entry columns as one map, for queries that collect entries into a list; journal.py's
# ``entries_from_rows`` reads both forms.
_ENTRY_ROW = (
    f"{{factor_id: f.id, entry: {_ENTRY_MAP}, influence: influence, hidden_influence: hidden_influence}}"
)
# The tail of a query that returns entries one per row: factor_id, entry, influence, hidden_influence.
_ENTRY_COLUMNS = f"""{_ENTRY_INFLUENCES}
RETURN f.id AS factor_id, {_ENTRY_MAP} AS entry, influence, hidden_influence
"""

# The visible factor $factor now, and the id of its current entry (null when it has none).
FACTOR_NOW = f"""
MATCH (f:Factor {{id: $factor}})
WHERE {_VISIBLE_F}
OPTIONAL MATCH (f)-[:CURRENT_STATE]->(e:JournalEntry)
WHERE {_VISIBLE_E} AND {edge_allowed("CURRENT_STATE", "f", "e", "out")}
RETURN f {{.id, .domain, .name, .category, .scale, .current_value, .current_confidence, .inference_status,
          .last_updated, .aliases}} AS factor, e.id AS entry_id
"""

# The visible factor $factor and its newest visible entry at or before $at (null: none yet).
FACTOR_AS_OF = f"""
MATCH (f:Factor {{id: $factor}})
WHERE {_VISIBLE_F}
OPTIONAL MATCH (e:JournalEntry)-[:ABOUT]->(f)
WHERE e.timestamp <= $at AND {_VISIBLE_E} AND {_ABOUT_FROM_FACTOR} AND {_AT_SHOWN}
WITH f, e ORDER BY e.timestamp DESC, e.seq DESC, e.id DESC
WITH f, collect(e)[0] AS e
RETURN f {{.id, .domain, .name, .category, .scale, .aliases}} AS factor,
       e {{.id, .new_number, .confidence, .inference_status, .timestamp}} AS entry
"""

# The visible entries about $factor in [$since, $until] with an op in $ops (nulls: any; an op or a
# time matched only where the caller sees it), newest first, at most $limit, one per row.
FACTOR_HISTORY = f"""
MATCH (f:Factor {{id: $factor}})
WHERE {_VISIBLE_F}
MATCH (e:JournalEntry)-[:ABOUT]->(f)
WHERE {_VISIBLE_E} AND {_ABOUT_FROM_FACTOR}
  AND ($since IS NULL OR ({_AT_SHOWN} AND e.timestamp >= $since))
  AND ($until IS NULL OR ({_AT_SHOWN} AND e.timestamp <= $until))
  AND ($ops IS NULL OR ({field_shown("e", "op")} AND e.op IN $ops))
WITH f, e ORDER BY {_NEWEST_FIRST}
LIMIT $limit
{_ENTRY_COLUMNS}
"""

# The entry $entry, if both it and its factor are visible.
ENTRY_BY_ID = f"""
MATCH (e:JournalEntry {{id: $entry}})-[:ABOUT]->(f:Factor)
WHERE {_VISIBLE_E} AND {_VISIBLE_F} AND {edge_allowed("ABOUT", "e", "f", "out")}
{_ENTRY_COLUMNS}
"""

# Which of the factor ids $ids the caller can see.
VISIBLE_FACTOR_IDS = f"""
UNWIND $ids AS fid
MATCH (f:Factor {{id: fid}})
WHERE {_VISIBLE_F}
RETURN f.id AS id
"""

# Visible assessed factors still marked unconfirmed, least confident first, each with how many
# visible entries are about it and the newest one's time. Status and value are read only where the
# caller sees them: the list must not tell a hidden status, or which factors hold a hidden value.
UNCONFIRMED_FACTORS = f"""
MATCH (f:Factor)
WHERE {_VISIBLE_F} AND {shown_or("f", "inference_status", "null")} = 'unconfirmed'
  AND {shown_or("f", "current_value", "null")} IS NOT NULL
CALL (f) {{
  OPTIONAL MATCH (e:JournalEntry)-[:ABOUT]->(f)
  WHERE {_VISIBLE_E} AND {_ABOUT_FROM_FACTOR}
  RETURN count(e) AS evidence_count, max({_AT}) AS latest
}}
RETURN f.id AS id, {shown_or("f", "name", "null")} AS name, {shown_or("f", "current_value", "null")} AS value,
       {shown_or("f", "current_confidence", "null")} AS confidence, evidence_count, latest
ORDER BY confidence ASC, id
"""

# -- journal writes ------------------------------------------------------------------------------

# Taken first inside the write transaction: the factor's write lock, held until commit; returns
# the state the new entry follows.
LOCK_FACTOR = f"""
MATCH (f:Factor {{id: $factor}})
WHERE {_VISIBLE_F}
SET f.journal_lock = true
RETURN f {{.id, .name, .scale, .current_value, .current_confidence, .inference_status,
          .last_updated, .journal_seq}} AS factor
"""

# The entry's session, claimed inside the write transaction: created with the factor's access,
# or the node stored under that id. ``MERGE`` on the unique ``Entity.id`` serialises concurrent
# creations of one id, so a session another writer creates meanwhile is seen here, committed,
# and checked before anything is filed under it (journal.py: hidden, not a session, or less
# visible than the factor is refused and the transaction rolled back). Whether the node is a
# session is read only once it is known to be visible to the writer.
CLAIM_SESSION = """
MATCH (f:Factor {id: $factor})
MERGE (s:Entity {id: $session_id})
  ON CREATE SET s:Session, s.created_at = datetime(), s.started_at = $timestamp,
                s.title = $session_title, s.domain = f.domain, s.sensitivity = f.sensitivity,
                s.namespaces = f.namespaces, s.roles_allowed = f.roles_allowed
RETURN 'Session' IN labels(s) AS is_session
"""

# The entry, ABOUT/PART_OF/INFLUENCED_BY and CURRENT_STATE, and the factor's new state, under the
# lock LOCK_FACTOR took (which it releases) and on the session CLAIM_SESSION claimed. Returns
# nothing.
WRITE_ENTRY = """
MATCH (f:Factor {id: $factor})
OPTIONAL MATCH (f)-[old:CURRENT_STATE]->()
DELETE old
WITH DISTINCT f
MATCH (s:Session {id: $session_id})
CREATE (e:Entity:JournalEntry {id: $entry_id})
SET e += $props,
    e.timestamp = $timestamp, e.created_at = datetime(),
    e.domain = f.domain, e.sensitivity = f.sensitivity, e.namespaces = f.namespaces,
    e.roles_allowed = f.roles_allowed
CREATE (e)-[:ABOUT]->(f)
CREATE (e)-[:PART_OF]->(s)
CREATE (f)-[:CURRENT_STATE]->(e)
SET f.current_value = $props.new_number, f.current_confidence = $props.confidence,
    f.inference_status = $props.inference_status, f.last_updated = $timestamp,
    f.journal_seq = $props.seq
REMOVE f.journal_lock
WITH e
UNWIND $influenced_by AS iid
MATCH (g:Factor {id: iid})
MERGE (e)-[:INFLUENCED_BY]->(g)
"""

# -- dependency walks (traversal.py) -------------------------------------------------------------

# One walked DEPENDS_ON step (from ``a`` to ``m``), with the scope's edge rules and the vertex ACL.
_STEP_DOWN = step_allowed("DEPENDS_ON", "a", "m", "out", "m")  # prerequisites: a -> m
_STEP_UP = step_allowed("DEPENDS_ON", "m", "a", "in", "m")  # dependents: a <- m
# An edge leaving a reached node ``x`` is named only when the walk could take it: the rules
# allow it, its target is visible, and ``x`` is nearer than the hop limit.
_NAMED_EDGE = f"{within_hops('depth')} AND {step_allowed('DEPENDS_ON', 'x', 'y', 'out', 'y')}"


# Walks expand from their bound start (StatefulShortestPath(All)). Left to its estimates, the
# planner may instead pair the start with every node in the graph (AllNodesScan, CartesianProduct,
# ShortestPath): the same answer at a cost that grows with the whole graph, 20-90 ms at 1k factors.
PLAN_WALKS = "CYPHER statefulShortestPlanningMode=all_if_possible"


def _walk(start: str, hops: int | None, *, up: bool = False) -> str:
    """Every node ``x`` the scope reaches from ``start``, with its ``depth`` (0 for ``start``)."""
    if hops == 0:  # a zero-step quantifier is not valid Cypher; the walk is the start alone
        return f"WITH {start} AS x, 0 AS depth"
    step = (
        f"(a)<-[:DEPENDS_ON]-(m:Entity) WHERE {_STEP_UP}"
        if up
        else f"(a)-[:DEPENDS_ON]->(m:Entity) WHERE {_STEP_DOWN}"
    )
    return f"""MATCH p = ANY SHORTEST ({start}) ({step}){hop_bound(hops)} (x)
WITH x, min(length(p)) AS depth"""


# The closure rows: every reached node ``x`` (at ``depth``) with its edges to nodes the walk may
# reach, a flag (never a count) for whether it also depends on something the caller cannot
# reach, and the visible factors it needs whose threshold is not met (the blockers' targets).
_NODE = f"""
OPTIONAL MATCH (x)-[r:DEPENDS_ON]->(y:Entity)
WITH x, depth, r, y, r IS NOT NULL AND {_NAMED_EDGE} AS y_reachable
WITH x,
     collect(CASE WHEN y_reachable
                  THEN {{target: y.id, min_value: coalesce(r.min_value, 0.0), weight: r.weight}}
             END) AS edges,
     count(CASE WHEN r IS NOT NULL AND NOT y_reachable AND {_DEPENDS_WALKABLE} THEN 1 END) > 0
       AS needs_hidden,
     collect(CASE WHEN y_reachable AND y:Factor
                       AND NOT coalesce({shown_or("y", "current_value", "null")}
                                        >= coalesce(r.min_value, 0.0), false)
                  THEN y END) AS unmet
WITH {{id: x.id, label: CASE WHEN x:Option THEN 'Option' ELSE 'Factor' END,
       name: {shown_or("x", "name", "null")}, masked: {name_masked("x")},
       category: {shown_or("x", "category", "null")},
       value: {shown_or("x", "current_value", "null")},
       confidence: {shown_or("x", "current_confidence", "null")},
       scale: {shown_or("x", "scale", "null")}, edges: edges, needs_hidden: needs_hidden}} AS node, unmet
"""


def _latest_entries(limit: str) -> str:
    """The newest ``limit`` visible entries of each factor ``f``, as entry maps in ``entries``."""
    return f"""
  CALL (f) {{
    MATCH (e:JournalEntry)-[:ABOUT]->(f)
    WHERE {_VISIBLE_E} AND {_ABOUT_FROM_FACTOR}
    RETURN e ORDER BY {_NEWEST_FIRST} LIMIT {limit}
  }}
  {_ENTRY_INFLUENCES}
  RETURN collect({_ENTRY_ROW}) AS entries
"""


def _downstream_query(hops: int | None) -> str:
    """Everything the visible $starts depend on: one row, ``nodes`` (the closure rows)."""
    return f"""{PLAN_WALKS}
UNWIND $starts AS sid
MATCH (s:Entity {{id: sid}})
WHERE (s:Factor OR s:Option) AND {_VISIBLE_S}
{_walk("s", hops)}
{_NODE}
RETURN collect(node) AS nodes
"""


def _why_blocked_query(hops: int | None) -> str:
    """Why-blocked: the closure below the subject, and the newest entries of every unmet prerequisite."""
    return f"""{PLAN_WALKS}
MATCH (s:Entity {{id: $start}})
WHERE (s:Factor OR s:Option) AND {_VISIBLE_S}
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
WHERE {_VISIBLE_S}
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
WHERE {_VISIBLE_S}
CALL (s) {{
  {_walk("s", hops)}
  {_NODE}
  RETURN collect(node) AS nodes
}}
CALL (s) {{
  OPTIONAL MATCH (s)-[:CURRENT_STATE]->(e:JournalEntry)
  WHERE {_VISIBLE_E} AND {edge_allowed("CURRENT_STATE", "s", "e", "out")}
  WITH e LIMIT 1
  OPTIONAL MATCH (e)-[:ABOUT]->(f:Factor)
  WHERE {_VISIBLE_F} AND {edge_allowed("ABOUT", "e", "f", "out")}
  WITH e, f LIMIT 1
  {_ENTRY_INFLUENCES}
  RETURN CASE WHEN f IS NULL THEN null ELSE {_ENTRY_ROW} END AS current
}}
CALL (s) {{
  WITH s AS f
  MATCH (e:JournalEntry)-[:ABOUT]->(f)
  WHERE {_VISIBLE_E} AND {_ABOUT_FROM_FACTOR}
  WITH f, e ORDER BY {_NEWEST_FIRST} LIMIT $history_limit
  {_ENTRY_INFLUENCES}
  RETURN collect({_ENTRY_ROW}) AS history
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
                   name: {shown_or("m", "name", "null")}, masked: {name_masked("m")},
                   min_value: coalesce(r.min_value, 0.0)}}) AS dependents
}}
RETURN s {{.id, .domain, .name, .category, .scale, .current_value, .current_confidence, .inference_status,
          .last_updated, .aliases}} AS factor,
       current, history, nodes, entries AS last, dependents
"""


# Quantified-path bounds are literals, so there is one query per possible hop limit (None: system).
HOP_LIMITS: tuple[int | None, ...] = (*range(MAX_HOPS + 1), None)
DOWNSTREAM_QUERIES = {h: _downstream_query(h) for h in HOP_LIMITS}
WHY_BLOCKED_QUERIES = {h: _why_blocked_query(h) for h in HOP_LIMITS}
WHAT_IF_QUERIES = {h: _what_if_query(h) for h in HOP_LIMITS}
WHY_VALUE_QUERIES = {h: _why_value_query(h) for h in HOP_LIMITS}

# The ids of every visible option, in order.
VISIBLE_OPTIONS = f"""
MATCH (s:Option)
WHERE {_VISIBLE_S}
RETURN s.id AS id ORDER BY id
"""

# The visible nodes that need the visible factor $factor directly, with their threshold on it.
DIRECT_DEPENDENTS = f"""
MATCH (s:Factor {{id: $factor}})
WHERE {_VISIBLE_S}
MATCH (m:Entity)-[r:DEPENDS_ON]->(s)
WHERE {within_hops("0")} AND {step_allowed("DEPENDS_ON", "m", "s", "in", "m")}
RETURN m.id AS id, CASE WHEN m:Option THEN 'Option' ELSE 'Factor' END AS label,
       {shown_or("m", "name", "null")} AS name, {name_masked("m")} AS masked,
       coalesce(r.min_value, 0.0) AS min_value
ORDER BY id
"""

# -- what changed (questions.py) -----------------------------------------------------------------

# The entries in the window grouped by factor (oldest first), each factor with the value its
# newest visible entry before the window set.
WHAT_CHANGED = f"""
MATCH (e:JournalEntry)-[:ABOUT]->(f:Factor)
WHERE e.timestamp >= $since AND ($until IS NULL OR e.timestamp <= $until)
  AND ($factors IS NULL OR f.id IN $factors)
  AND {_VISIBLE_E} AND {_VISIBLE_F} AND {_ABOUT_FROM_FACTOR} AND {_AT_SHOWN}
WITH f, e ORDER BY e.timestamp ASC, e.seq ASC, e.id ASC
{_ENTRY_INFLUENCES}
WITH f, collect({_ENTRY_ROW}) AS entries
CALL (f) {{
  OPTIONAL MATCH (e:JournalEntry)-[:ABOUT]->(f)
  WHERE e.timestamp < $since AND {_VISIBLE_E} AND {_ABOUT_FROM_FACTOR} AND {_AT_SHOWN}
  WITH e ORDER BY e.timestamp DESC, e.seq DESC, e.id DESC LIMIT 1
  RETURN {shown_or("e", "new_number", "null")} AS before
}}
RETURN f.id AS id, {shown_or("f", "name", "null")} AS name, {name_masked("f")} AS masked, before, entries
"""

# -- assessment (assessment.py) ------------------------------------------------------------------

# Per category of visible factors: how many, how many assessed, the sum of the assessed ones'
# confidence (averaged in Python, where the overall figures are summed too), the newest update.
# All as the caller sees the factors (docs/design.md §Policy module): a factor whose category the
# scope hides is counted under MASKED_CATEGORY, one whose value it hides is not assessed, and a
# hidden confidence counts as none (0), as a missing one does.
MASKED_CATEGORY = "(masked)"
CATEGORY_FIGURES = f"""
MATCH (f:Factor)
WHERE {_VISIBLE_F}
WITH coalesce({shown_or("f", "category", repr(MASKED_CATEGORY))}, 'uncategorised') AS category,
     {shown_or("f", "current_value", "null")} AS value,
     {shown_or("f", "current_confidence", "null")} AS confidence, f
RETURN category,
       count(f) AS total,
       count(value) AS assessed,
       sum(CASE WHEN value IS NULL THEN 0.0 ELSE coalesce(confidence, 0.0) END) AS confidence_sum,
       max({shown_or("f", "last_updated", "null")}) AS last_updated
ORDER BY category
"""

# The newest visible entry of all whose time the caller sees, its factor, and its session if
# visible. Among such entries the stored time is the shown one, so it may order them.
LAST_CONVERSATION = f"""
MATCH (e:JournalEntry)-[:ABOUT]->(f:Factor)
WHERE {_VISIBLE_E} AND {_VISIBLE_F} AND {_ABOUT_FROM_FACTOR} AND {_AT_SHOWN}
WITH e, f ORDER BY e.timestamp DESC, e.seq DESC, e.id DESC LIMIT 1
OPTIONAL MATCH (e)-[:PART_OF]->(s:Session)
WHERE {_VISIBLE_S} AND {edge_allowed("PART_OF", "e", "s", "out")}
RETURN f.id AS factor_id, {shown_or("f", "name", "null")} AS topic,
       {shown_or("f", "current_value", "null")} AS value,
       {shown_or("f", "current_confidence", "null")} AS confidence,
       e.timestamp AS timestamp, {shown_or("e", "rationale", "null")} AS rationale,
       s.id AS session_id, {shown_or("s", "title", "null")} AS session_title
"""

# -- entity linking (router.py) ------------------------------------------------------------------

# Every visible factor and option with its names, and its cosine with $q (0 without a vector);
# not one whose name, description or aliases (what it is linked and embedded by) the caller may
# not read: matched or ranked by them, it would tell what they say (acl.search_fields_shown).
LINKABLE_NODES = f"""
MATCH (n:Entity)
WHERE (n:Factor OR n:Option) AND {acl_visible("n")}
  AND CASE WHEN n:Option THEN {search_fields_shown("n", "Option")}
           ELSE {search_fields_shown("n", "Factor")} END
RETURN n.id AS id, CASE WHEN n:Option THEN 'Option' ELSE 'Factor' END AS label, n.name AS name,
       coalesce(n.aliases, []) AS aliases,
       CASE WHEN $q IS NULL OR n.embedding IS NULL THEN 0.0
            ELSE vector.similarity.cosine(n.embedding, $q) END AS score
"""

# The visible factor whose visible entries come closest to $q, if the best reaches $threshold.
# An entry's vector is made from its factor's name, its rationale and its excerpt: an entry
# counts only where the caller reads all three, else a hidden name would link (and so name) it.
JOURNAL_LINK = f"""
MATCH (e:JournalEntry)-[:ABOUT]->(f:Factor)
WHERE e.embedding IS NOT NULL AND {_VISIBLE_E} AND {_VISIBLE_F} AND {_ABOUT_FROM_FACTOR}
  AND {search_fields_shown("e", "JournalEntry")} AND {field_shown("f", "name")}
WITH f, max(vector.similarity.cosine(e.embedding, $q)) AS score
WHERE score >= $threshold
RETURN f.id AS id, f.name AS name, score
ORDER BY score DESC, id
LIMIT 1
"""

# -- the loader (ingest/factors.py), run as the system -------------------------------------------

# The stored nodes among $ids: label, scale, and what their embedding was made from.
STORED_NODES = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, [l IN labels(n) WHERE l <> 'Entity'][0] AS label, n.scale AS scale,
       n.embedding_source AS source, n.embedding_model AS model
"""
# Every stored DEPENDS_ON edge (the cycle check includes them).
STORED_DEPENDS_ON = "MATCH (a:Entity)-[:DEPENDS_ON]->(b:Entity) RETURN a.id AS source, b.id AS target"
# Which journal each stored entry among $ids is in: the ids of what it is ABOUT (a factor, or a
# dossier for a dossier's journal). Read only to refuse an entry id that would move.
STORED_ENTRY_OWNERS = """
UNWIND $ids AS id
MATCH (e:JournalEntry {id: id})
OPTIONAL MATCH (e)-[:ABOUT]->(o:Entity)
RETURN e.id AS id, collect(o.id) AS about
"""
# Per factor of $factors: its newest stored entry's time and the ids of all its entries.
STORED_LATEST_ENTRIES = """
UNWIND $factors AS fid
MATCH (e:JournalEntry)-[:ABOUT]->(:Factor {id: fid})
RETURN fid AS factor, max(e.timestamp) AS latest, collect(e.id) AS ids
"""

# A factor's access fields are its journal entries' too, whenever they are written: an entry
# always shares its factor's access, so the factor's state (its newest entry's value, journal_seq,
# the assessment built from them) never shows an entry its reader may not see.
UPSERT_FACTORS = """
UNWIND $rows AS row
MERGE (n:Entity:Factor {id: row.id})
ON CREATE SET n.created_at = datetime()
SET n += row.props
WITH n
OPTIONAL MATCH (e:JournalEntry)-[:ABOUT]->(n)
SET e.domain = n.domain, e.sensitivity = n.sensitivity, e.namespaces = n.namespaces,
    e.roles_allowed = n.roles_allowed
"""
UPSERT_OPTIONS = """
UNWIND $rows AS row
MERGE (n:Entity:Option {id: row.id})
ON CREATE SET n.created_at = datetime()
SET n += row.props
"""
UPSERT_DEPENDS_ON = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.source})
MATCH (b:Factor {id: row.target})
MERGE (a)-[r:DEPENDS_ON]->(b)
SET r.min_value = row.min_value, r.weight = row.weight
"""
UPSERT_SESSIONS = """
UNWIND $rows AS row
MERGE (n:Entity:Session {id: row.id})
ON CREATE SET n.created_at = datetime()
SET n += row.props, n.started_at = row.started_at
"""
# Entries take their factor's access fields.
UPSERT_ENTRIES = """
UNWIND $rows AS row
MATCH (f:Factor {id: row.factor})
MATCH (s:Session {id: row.session})
MERGE (e:Entity:JournalEntry {id: row.id})
ON CREATE SET e.created_at = datetime()
SET e += row.props, e.timestamp = row.timestamp,
    e.domain = f.domain, e.sensitivity = f.sensitivity, e.namespaces = f.namespaces,
    e.roles_allowed = f.roles_allowed
MERGE (e)-[:ABOUT]->(f)
MERGE (e)-[:PART_OF]->(s)
WITH e, row
UNWIND row.influenced_by AS iid
MATCH (g:Factor {id: iid})
MERGE (e)-[:INFLUENCED_BY]->(g)
"""
# Each factor's state is its newest stored entry (by time, then sequence), whoever wrote it.
REFRESH_FACTOR_STATE = """
UNWIND $factors AS fid
MATCH (f:Factor {id: fid})
CALL (f) {
  MATCH (e:JournalEntry)-[:ABOUT]->(f)
  RETURN e ORDER BY e.timestamp DESC, e.seq DESC LIMIT 1
}
OPTIONAL MATCH (f)-[old:CURRENT_STATE]->()
DELETE old
WITH DISTINCT f, e
CREATE (f)-[:CURRENT_STATE]->(e)
SET f.current_value = e.new_number, f.current_confidence = e.confidence,
    f.inference_status = e.inference_status, f.last_updated = e.timestamp,
    f.journal_seq = CASE WHEN coalesce(f.journal_seq, 0) > e.seq THEN f.journal_seq ELSE e.seq END
"""
