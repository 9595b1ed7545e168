"""The correspondence capability's Cypher: reads on a caller's behalf and the sync's writes.

Reads (``cairn.memory.correspondence``) splice in the vertex ACL and edge rules from
``cairn.policy.acl``, so a section the caller may not see is never scored, counted or returned.
Search runs on the vector index without quantization (``SEARCH_INDEX``), oversampled and
re-scored exactly over the visible candidates, or falls back to the exact scan
(``SEARCH_EXACT``) when the scope or the filters keep too few of the index's candidates;
docs/design.md §Correspondence, "Search at index speed". The sync's queries
(``cairn.ingest.correspondence.sync``) run as the system or check the writer's scope.
"""

from __future__ import annotations

from cairn.policy.acl import acl_visible, search_fields_shown, step_allowed
from cairn.schema.nodes import vector_index_name

SECTION_INDEX = vector_index_name("Section")

# --- reads on a caller's behalf -----------------------------------------------------------

# The section as the caller may see it: no embedding; links to visible sections only. Numbers
# here are canonical; the domain service turns them into the caller's own.
_ANSWERS = step_allowed("RESPONDS_TO", "s", "t", "out", "t")
_ANSWERED_BY = step_allowed("RESPONDS_TO", "t", "s", "in", "t")
PROJECTION = f"""s {{.*, embedding: null,
  responds_to: [(s)-[:RESPONDS_TO]->(t:Section) WHERE {_ANSWERS} | t.section_number],
  responded_by: [(t:Section)-[:RESPONDS_TO]->(s) WHERE {_ANSWERED_BY} | t.section_number]}}"""

# The canonical numbers of every section the caller may see, ascending: the caller's numbering
# (the tail needs the whole of it to cut its window; divergence shows few sections).
VISIBLE_NUMBERS = f"""
CALL () {{
  MATCH (v:Section)
  WHERE v.section_number IS NOT NULL AND {acl_visible("v")}
  WITH v ORDER BY v.section_number
  RETURN collect(v.section_number) AS numbers
}}"""

# A section is searched by its title and body (its vector): one whose title or body the caller
# may not read is neither ranked nor counted by search or divergence (acl.search_fields_shown).
RANKABLE = search_fields_shown("s", "Section")

# Search filters over ``s``, each joined by AND (a continuation of a WHERE clause).
FILTERS = """
  AND ($authors IS NULL OR toLower(s.author) IN $authors)
  AND ($exec_tags IS NULL OR any(t IN coalesce(s.exec_tags, []) WHERE t IN $exec_tags))
  AND ($status_tags IS NULL OR any(t IN coalesce(s.status_tags, []) WHERE t IN $status_tags))
  AND ($date_from IS NULL OR (s.date IS NOT NULL AND s.date >= $date_from))
  AND ($date_to IS NULL OR (s.date IS NOT NULL AND s.date <= $date_to))"""

# What the store holds, in O(1) (the count store and the section_number index): how many sections,
# and the number, id and element id of the last. Sections are appended and never rewritten, so
# an unchanged stamp means the counts per scope the domain service keeps are still true.
# ``stamp[0]`` (every stored section) also tells the search whether the index had no more to give.
# Neither the stamp nor ``visible`` ever reaches a caller.
STORE_STAMP = """
CALL () {
  MATCH (x:Section) WITH count(x) AS sections
  OPTIONAL MATCH (y:Section) WHERE y.section_number IS NOT NULL
  WITH sections, y ORDER BY y.section_number DESC LIMIT 1
  RETURN [sections, y.section_number, y.id, elementId(y)] AS stamp
}"""

# The index's ``$fetch`` nearest sections, the caller's scope and the filters applied to them,
# the visible ones re-scored exactly and the best ``$k`` returned; ``visible`` (candidates that
# passed) steers the domain service's choice between this and the exact scan.
SEARCH_INDEX = f"""{STORE_STAMP}
CALL db.index.vector.queryNodes('{SECTION_INDEX}', $fetch, $vector) YIELD node AS s
WITH stamp, s
WHERE s.embedding IS NOT NULL AND {acl_visible("s")} AND {RANKABLE}{FILTERS}
WITH stamp, s, vector.similarity.cosine(s.embedding, $vector) AS score
ORDER BY score DESC, s.section_number ASC
WITH stamp, collect({{s: s, score: score}}) AS ranked
WITH stamp, size(ranked) AS visible, ranked[..$k] AS top
UNWIND top AS hit
WITH stamp, visible, hit.s AS s, hit.score AS score
RETURN stamp, visible, collect({{props: {PROJECTION}, score: score}}) AS hits
"""

# Exact cosine over every visible section that passes the filters (the fallback).
SEARCH_EXACT = f"""{STORE_STAMP}
MATCH (s:Section)
WHERE s.embedding IS NOT NULL AND {acl_visible("s")} AND {RANKABLE}{FILTERS}
WITH stamp, s, vector.similarity.cosine(s.embedding, $vector) AS score
ORDER BY score DESC, s.section_number ASC
LIMIT $k
RETURN stamp, collect({{props: {PROJECTION}, score: score}}) AS hits
"""

# One pass over the sections the caller may see: how many pass the filters (the search's total)
# and what the caller's numbers of the canonical numbers the search shows need, in blocks of
# ``$block`` canonical numbers: per block, how many visible sections it holds, and for the
# blocks in ``$wanted_blocks`` (those holding a hit or a link) their visible numbers. The
# caller's number of n is the count of visible sections in the blocks before n's, plus those
# of its own block at or below n. Hidden sections are neither counted nor numbered.
NUMBER_AND_COUNT = f"""
MATCH (s:Section)
WHERE {acl_visible("s")}
WITH s.section_number AS n, ({RANKABLE}{FILTERS}) AS passes
RETURN n / $block AS block, count(n) AS sections, count(CASE WHEN passes THEN 1 END) AS matched,
       collect(CASE WHEN n / $block IN $wanted_blocks THEN n END) AS members
"""

# The visible numbers of the blocks in ``$wanted_blocks`` only, through the section_number index:
# with the per-block counts kept from an earlier NUMBER_AND_COUNT under the same stamp, enough to
# number the hits without a pass over the store.
BLOCK_MEMBERS = f"""
UNWIND $wanted_blocks AS b
CALL (b) {{
  MATCH (s:Section)
  WHERE s.section_number >= b * $block AND s.section_number < (b + 1) * $block AND {acl_visible("s")}
  RETURN collect(s.section_number) AS members
}}
RETURN b AS block, members
"""

# ``$from_section`` is a number in the caller's own numbering (1 = the first section it may see).
TAIL_QUERY = f"""
{VISIBLE_NUMBERS}
WITH numbers, CASE WHEN $from_section IS NULL THEN numbers[-$n..]
                   ELSE numbers[$from_section - 1..$from_section - 1 + $n] END AS window
UNWIND window AS number
MATCH (s:Section {{section_number: number}})
WHERE {acl_visible("s")}
WITH numbers, s ORDER BY s.section_number
RETURN numbers, collect({PROJECTION}) AS sections
"""

DIVERGENCE_QUERY = f"""
{VISIBLE_NUMBERS}
UNWIND range(0, size($beings) - 1) AS i
CALL (i) {{
  MATCH (s:Section)
  WHERE toLower(s.author) = $beings[i] AND s.embedding IS NOT NULL AND {acl_visible("s")} AND {RANKABLE}
  WITH s, vector.similarity.cosine(s.embedding, $vector) AS score
  ORDER BY score DESC, s.section_number ASC
  LIMIT $k
  RETURN collect({{props: {PROJECTION}, score: score}}) AS hits
}}
WITH numbers, i, hits ORDER BY i
RETURN numbers, collect(hits) AS by_being
"""

# --- the sync (cairn.ingest.correspondence.sync) ------------------------------------------

# Stored sections and response links as the syncing caller may see them: a section hidden
# from a scoped writer is neither compared, nor reported, nor linked to (cairn.policy.writes).
READ_STORED = f"""
MATCH (s:Section) WHERE s.source = $source AND {acl_visible("s")}
RETURN s.ordinal AS ordinal, s.content_hash AS hash, s.domain AS domain, s.sensitivity AS sensitivity,
       s.namespaces AS namespaces, s.roles_allowed AS roles_allowed, s.filed_id AS filed_id
"""
FIND_EXISTING = """
MATCH (s:Section {source: $source}) WHERE s.ordinal IN $ordinals
RETURN s.ordinal AS ordinal, s.id AS id
"""
# Every correspondence write first sets a property on this one CairnLock node, which Neo4j locks
# exclusively until the transaction ends: writes of sections run one at a time, and each reads
# the numbers and the source's state only once the lock is held (cairn.memory.dossiers.lock
# explains why reads after it see every write committed before it).
SECTIONS_LOCK = "correspondence"
TAKE_SECTIONS_LOCK = "MERGE (l:CairnLock {id: $lock}) SET l.held = true"
READ_MAX = "MATCH (s:Section) RETURN coalesce(max(s.section_number), 0) AS top"
# How many of the source's sections the writer may read, and the source's last ordinal, hidden
# sections included: where new sections go is after every stored one, seen or not.
SOURCE_STATE = f"""
MATCH (s:Section {{source: $source}})
RETURN count(CASE WHEN {acl_visible("s")} THEN 1 END) AS visible, coalesce(max(s.ordinal), 0) AS end
"""
CREATE_SECTIONS = """
UNWIND $rows AS row
MERGE (s:Entity:Section {id: row.id})
ON CREATE SET s += row.props, s.created_at = datetime()
"""
LINK_RESPONSES = f"""
UNWIND $links AS link
MATCH (a:Section {{id: link.from_id}})
MATCH (b:Section {{id: link.to_id}})
WHERE {acl_visible("b")}
MERGE (a)-[:RESPONDS_TO]->(b)
"""
READ_COLLISIONS = """
MATCH (s:Section) WHERE s.source = $source AND s.collision
RETURN s.id AS section_id, s.source_line AS line, s.filed_id AS filed_id, s.filed_number AS filed_number,
       s.section_number AS canonical_number, s.author AS author, s.title AS title
ORDER BY s.section_number
"""
COUNT_STALE = f"""
MATCH (s:Section) WHERE (s.embedding_model IS NULL OR s.embedding_model <> $model) AND {acl_visible("s")}
RETURN count(s) AS n
"""
# A scoped writer's own numbering, to tell it the numbers of what it just created.
OWN_NUMBERS = f"""{VISIBLE_NUMBERS}
RETURN numbers
"""
READ_STALE = """
MATCH (s:Section) WHERE s.embedding_model IS NULL OR s.embedding_model <> $model
RETURN s.id AS id, s.title AS title, s.body AS body
ORDER BY s.section_number
"""
WRITE_EMBEDDINGS = """
UNWIND $rows AS row
MATCH (s:Section {id: row.id})
WHERE s.embedding_model IS NULL OR s.embedding_model <> $model
SET s.embedding = row.embedding, s.embedding_model = $model
"""
