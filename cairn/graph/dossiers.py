"""The dossiers capability's Cypher (docs/design.md §Dossiers): every query and fragment it runs.

The services in ``cairn.memory.dossiers`` import their queries from here and nowhere else.
Access predicates come from ``cairn.policy.acl``; numbers the services own (summary sizes,
thresholds, fetch sizes) are parameters, never spliced in. Which vector arithmetic is done
here and which in Python, and why: docs/design.md §Dossier queries.

Sections: index names and the score scale; the routing lock and the journal; summaries;
the vote; packet writes; blocks and the gardener; curation; reading dossiers; fact search.
"""

from __future__ import annotations

from cairn.policy.acl import (
    access_covers,
    acl_visible,
    edge_allowed,
    edge_allowed_between_visible,
    field_shown,
    fields_shown,
    search_fields_shown,
    shown_or,
    status_in_view,
)
from cairn.policy.writes import hidden_among
from cairn.schema.keys import HOLD_SECRET, TAKE_SECRET
from cairn.schema.nodes import fulltext_index_name, vector_index_name

# --- index names and the score scale -------------------------------------------------------------

FACT_VECTOR_INDEX = vector_index_name("Fact")
FACT_TEXT_INDEX = fulltext_index_name("Fact", "text")


def index_score(cosine: float) -> float:
    """Neo4j's vector score for a plain cosine: it reports cosine rescaled to [0, 1] as ``(1 + cos) / 2``."""
    return (1.0 + cosine) / 2.0


def plain_cosine(score: float) -> float:
    """Plain cosine for a Neo4j vector score."""
    return 2.0 * score - 1.0


def _two(n: str) -> str:
    return f"right('0' + toString({n}), 2)"


def iso_text(x: str) -> str:
    """Cypher for the value of expression ``x``: a zoned DateTime as the text the driver's
    ``DateTime.iso_format()`` gives it (``2023-05-08T13:56:00.000000000+00:00``, what
    ``cairn.policy.preselector.mask`` shows), anything else as it is. Decoding a DateTime costs the
    Python driver tens of microseconds (a fact search returned ~70 of them); text costs nothing.
    The offset is split like the driver's, ``divmod(minutes, 60)`` (floor), so -03:30 reads -04:30."""
    off = f"toInteger(floor({x}.offsetSeconds / 60.0))"
    hours = f"toInteger(floor({off} / 60.0))"
    return (
        f"CASE WHEN valueType({x}) STARTS WITH 'ZONED DATETIME' THEN "
        f"right('000' + toString({x}.year), 4) + '-' + {_two(f'{x}.month')} + '-' + {_two(f'{x}.day')}"
        f" + 'T' + {_two(f'{x}.hour')} + ':' + {_two(f'{x}.minute')} + ':' + {_two(f'{x}.second')}"
        f" + '.' + right('00000000' + toString({x}.nanosecond), 9)"
        f" + CASE WHEN {hours} < 0 THEN '-' ELSE '+' END + {_two(f'abs({hours})')}"
        f" + ':' + {_two(f'{off} - 60 * {hours}')} ELSE {x} END"
    )


# Ingest statements reuse their cached plan whatever the graph's statistics say
# (docs/design.md §Dossier queries, "Plans"). Each is anchored on parameters and unique-id
# seeks, so a fresh plan would be the same plan; re-planning them every time the counts moved
# (a growing graph, a wiped one) cost more Neo4j CPU than the statements themselves, mostly in
# the JIT compiling the new plans.
KEEP_PLAN = "CYPHER replan=skip"

# --- the routing lock and the journal ------------------------------------------------------------

# Clauses run in order: the journal lookup reads only once the lock is held. Setting a property
# takes the node's exclusive lock even when the value does not change, so after the first time
# taking the lock leaves the graph as it was (a re-run of applied work changes nothing).
TAKE_ROUTING_LOCK = f"""{KEEP_PLAN}
MERGE (l:CairnLock {{id: $lock}})
SET l.held = true
WITH l
OPTIONAL MATCH (:JournalEntry {{id: $marker}})-[:ABOUT]->(d:Dossier)
RETURN min(d.id) AS applied_to
"""

# The routing lock, and the database's secret that keys curation ids (``lock.keyed_lock``): set
# once, under the lock, so every later transaction reads the same one.
TAKE_KEYED_LOCK = f"{KEEP_PLAN}\n{TAKE_SECRET}"

# Which of these packets were applied before (their first journal entry exists), and where.
PACKETS_APPLIED = f"""{KEEP_PLAN}
UNWIND $markers AS marker
MATCH (:JournalEntry {{id: marker}})-[:ABOUT]->(d:Dossier)
RETURN marker, min(d.id) AS applied_to
"""


def _journal_entry(row: str, entry_id: str, now: str, also: str = "") -> str:
    """One journal entry from the bound map ``row`` (its ``props`` and the dossier ids it is
    ``about``), stored as ``entry_id`` at the time ``now``; ``also``: more ``SET`` items on ``j``."""
    return f"""MERGE (j:Entity:JournalEntry {{id: {entry_id}}})
ON CREATE SET j.created_at = datetime({now})
SET j += {row}.props, j.timestamp = datetime({now}){also}
WITH j, {row}
UNWIND {row}.about AS dossier_id
MATCH (d:Dossier {{id: dossier_id}})
MERGE (j)-[:ABOUT]->(d)"""


# Journal entries, each with its own time ``e.now`` (one statement may journal several units).
WRITE_JOURNAL_ENTRIES = f"""{KEEP_PLAN}
UNWIND $entries AS e
{_journal_entry("e", "e.id", "e.now")}
"""

# --- summaries (docs/design.md §Dossiers: the facts nearest the centroid) ------------------------

# Subquery body over a bound dossier ``d`` (its ``centroid_sum`` already advanced) and a list
# ``new_ids`` of facts just added to it: the new pool of its ``$pool_facts`` most central facts
# (ids, most central first) and the texts of its ``$summary_facts`` most central facts in the
# order they were added. Only the pool and the new facts are ranked (``summary`` explains why).
SUMMARY_POOL_RANKED = """
  WITH d, CASE WHEN d.summary_pool IS NULL
              THEN COLLECT { MATCH (d)-[:HAS_FACT]->(x:Fact) RETURN x.id }
              ELSE d.summary_pool + new_ids END AS ids
  UNWIND ids AS fid
  WITH DISTINCT d, fid
  MATCH (f:Fact {id: fid})
  WHERE f.embedding IS NOT NULL
  WITH f, vector.similarity.cosine(f.embedding, d.centroid_sum) AS centrality
  ORDER BY centrality DESC, f.added_at, f.id
  LIMIT $pool_facts
  WITH collect(f) AS ranked
  CALL (ranked) {
    UNWIND ranked[0..$summary_facts] AS f
    WITH f ORDER BY f.added_at, f.id
    RETURN collect(f.text) AS central
  }
  RETURN [f IN ranked | f.id] AS pool, central
"""

# Subquery body over a bound dossier ``d``: the texts of its ``$summary_facts`` most central
# facts of all, in the order they were added.
CENTRAL_FACT_TEXTS = """
  MATCH (d)-[:HAS_FACT]->(f:Fact)
  WHERE f.embedding IS NOT NULL
  WITH f, vector.similarity.cosine(f.embedding, d.centroid_sum) AS centrality
  ORDER BY centrality DESC, f.added_at, f.id
  LIMIT $summary_facts
  WITH f ORDER BY f.added_at, f.id
  RETURN collect(f.text) AS central
"""

# Expression: the summary text made of a list ``central`` (``summary.join_sentences`` in Cypher).
SUMMARY_FROM_CENTRAL = """reduce(s = '', t IN central |
  s + CASE WHEN s = '' THEN '' ELSE ' ' END
    + CASE WHEN t ENDS WITH '.' OR t ENDS WITH '!' OR t ENDS WITH '?' THEN t ELSE t + '.' END)"""

# --- the vote (docs/design.md §Routing) ----------------------------------------------------------

# Subquery body over a bound dossier ``d``: the sum of its fact embeddings, for a dossier written
# before centroid sums were kept. Summed here, not in Python: returning the vectors instead made
# the vote's round trip about 10% slower where it applies (docs/design.md §Dossier queries).
CENTROID_SUM_FROM_FACTS = """
  MATCH (d)-[:HAS_FACT]->(f:Fact)
  WHERE f.embedding IS NOT NULL
  WITH collect(f.embedding) AS es
  RETURN CASE WHEN size(es) = 0 THEN null
    ELSE reduce(acc = [x IN es[0] | 0.0], e IN es | [i IN range(0, size(e) - 1) | acc[i] + e[i]]) END
    AS centroid_sum
"""

# Per packet fact, its hits: the top ``$k`` stored facts at cosine ``$min_score`` or more in
# active dossiers with exactly its packet's access fields (``$accesses[q.p]``: one statement votes
# for every packet of a transaction, docs/design.md §Dossier queries), by the full-float Fact
# index's score (schema 5: the exact cosine, so no rescoring). The access is applied before the
# top-k cut: facts of another access (which the writer may not read) never take a slot, so they
# cannot change where a packet goes (docs/design.md §Policy module). When the index's ``$fetch``
# candidates are all above the threshold but too few of them have the packet's access, the hits
# come from an exact scan of that access's facts instead. Texts only for hits at duplicate
# distance. One row per dossier hit: per packet, its hits there, and once for all the packets
# (a transaction's packets reach the same dossiers: 598 (packet, dossier) pairs but 75 dossiers in
# LoCoMo's conv-41), the dossier's centroid sum (the stored one, else summed from its facts) and
# its fact count (a degree lookup).
_SAME_ACCESS = """d.status = 'active'
    AND d.domain = access.domain AND d.sensitivity = access.sensitivity
    AND d.namespaces = access.namespaces AND d.roles_allowed = access.roles_allowed"""


def _vote(queries: str, states: bool = True) -> str:
    """The vote over the list expression ``queries`` (``$queries``, or the part of it a statement
    still votes for): one row per dossier reached, ordered by its id. ``VOTE_FOR_DOSSIERS``
    returns the rows, ``CLAIM_PACKETS`` collects them. Without ``states`` (``VOTE_TALLY``) the rows
    carry no centroid sum and size: the packet rule's tally does not read them, and at 10 facts per
    dossier a 5-fact packet's vote reached ~50 dossiers, 50 sums of 384 floats each read (summed
    from their facts where none is stored) and shipped back for nothing."""
    tail = f"""OPTIONAL CALL (d) {{
  WITH d WHERE d.centroid_sum IS NULL
  {CENTROID_SUM_FROM_FACTS}
}}
WITH d.id AS dossier_id, d.title AS title, packets, coalesce(d.centroid_sum, centroid_sum) AS centroid,
     COUNT {{ (d)-[:HAS_FACT]->() }} AS size"""
    if not states:
        tail = "WITH d.id AS dossier_id, d.title AS title, packets"
    return f"""UNWIND {queries} AS q
CALL (q) {{
  WITH q, $accesses[q.p] AS access
  CALL db.index.vector.queryNodes($index, $fetch, q.vec) YIELD node AS f, score
  WITH q, access, collect({{f: f, score: score}}) AS fetched
  CALL (access, fetched) {{
    UNWIND fetched AS hit
    WITH access, hit.f AS f, hit.score AS score
    WHERE score >= $min_score
    MATCH (d:Dossier)-[:HAS_FACT]->(f)
    WHERE {_SAME_ACCESS}
    WITH d, f, score
    ORDER BY score DESC, f.id
    LIMIT $k
    RETURN collect({{d: d, f: f, score: score}}) AS indexed
  }}
  WITH q, access, indexed,
       size(fetched) = $fetch AND size(indexed) < $k AND fetched[-1].score >= $min_score AS crowded
  CALL (q, access, crowded) {{
    WITH q, access WHERE crowded
    MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact)
    WHERE {_SAME_ACCESS} AND f.embedding IS NOT NULL
    WITH d, f, vector.similarity.cosine(f.embedding, q.vec) AS score
    WHERE score >= $min_score
    ORDER BY score DESC, f.id
    LIMIT $k
    RETURN collect({{d: d, f: f, score: score}}) AS scanned
  }}
  UNWIND CASE WHEN crowded THEN scanned ELSE indexed END AS hit
  WITH hit.d AS d, hit.f AS f, hit.score AS score
  RETURN d, f.id AS fact_id, score, CASE WHEN score >= $dup_score THEN f.text END AS text
}}
WITH q.p AS p, d, collect({{i: q.i, fact_id: fact_id, score: score, text: text}}) AS hits
WITH d, collect({{p: p, hits: hits}}) AS packets
{tail}
ORDER BY dossier_id"""


VOTE_FOR_DOSSIERS = f"""{KEEP_PLAN}
{_vote("$queries")}
RETURN dossier_id, title, packets, centroid, size
"""

# The vote as the packet rule reads it (``governor.read_vote``: a preview, an adjudicator's view):
# hits and titles, no dossier state.
VOTE_TALLY = f"""{KEEP_PLAN}
{_vote("$queries", states=False)}
RETURN dossier_id, title, packets
"""

# A packet transaction's first statement (docs/design.md §Dossier queries, "Round trips"): the
# routing lock and the database's secret, then, under the lock, which packets were applied before
# (``$markers``: per packet ``p`` its markers ``k`` in order, ``_markers``; the first found names
# the dossier it went to), which of the ids a writer's packet claims (``$claimed``: null for an
# operator) or the dossier its key went to are hidden from the writer (the scope in the
# parameters), and the vote for every packet neither applied before nor refused. Clauses run in
# order, as in ``TAKE_ROUTING_LOCK``, and each subquery imports what the one before it bound (the
# first, the secret): nothing after the lock reads before it is held. The ids of a packet sent
# without a ``packet_id`` are derived from the secret the service last saw; when the returned
# ``secret`` differs, the caller checks them again with the ids it gives (``governor._claim``).
CLAIM_PACKETS = f"""{KEEP_PLAN}
{HOLD_SECRET}
CALL (secret) {{
  WITH secret WHERE secret IS NOT NULL
  UNWIND $markers AS m
  MATCH (:JournalEntry {{id: m.id}})-[:ABOUT]->(d:Dossier)
  WITH m, min(d.id) AS applied_to
  ORDER BY m.p, m.k
  WITH m.p AS p, collect(applied_to)[0] AS applied_to
  RETURN collect({{p: p, applied_to: applied_to}}) AS applied
}}
CALL (applied) {{
  {hidden_among("$claimed + [a IN applied | a.applied_to]")}
}}
CALL (applied, hidden) {{
  {_vote("[q IN $queries WHERE size(hidden) = 0 AND NOT q.p IN [a IN applied | a.p]]")}
  RETURN collect({{dossier_id: dossier_id, title: title, packets: packets, centroid: centroid, size: size}})
    AS dossiers
}}
RETURN secret, applied, hidden, dossiers
"""

# --- packet writes (docs/design.md §Routing) -----------------------------------------------------

# A skipped duplicate's turn and block ids join those of the stored fact it restates (each
# list: the fact's own first, then every restatement's, each once): a unit subquery of
# ``WRITE_ROUTES`` over ``$restated``.
_RESTATED_PROVENANCE = """
  UNWIND $restated AS row
  MATCH (f:Fact {id: row.id})
  WITH f, row,
       coalesce(f.source_turn_ids, CASE WHEN f.source_turn_id IS NULL THEN [] ELSE [f.source_turn_id] END)
         AS turns,
       coalesce(f.source_block_ids, CASE WHEN f.source_block_id IS NULL THEN [] ELSE [f.source_block_id] END)
         AS blocks
  SET f.source_turn_ids = reduce(acc = turns, t IN row.turns | CASE WHEN t IN acc THEN acc ELSE acc + t END),
      f.source_block_ids =
        reduce(acc = blocks, b IN row.blocks | CASE WHEN b IN acc THEN acc ELSE acc + b END)
"""

# A packet transaction's second and last statement (docs/design.md §Dossier queries, "Round
# trips"): every route of each packet (``$packets``, in order) into its dossier, the restated
# duplicates' provenance (``$restated``), then every packet's journal (``$journal``), so a packet
# is three round trips with its BEGIN and COMMIT whatever it holds.
#
# Routes, in one subquery whose cost does not grow with the dossier: the facts are written, the
# centroid sum (advanced in Python from the one the vote read) is stored, and the summary is
# re-chosen from the dossier's pool of central facts and the new facts. A transaction of
# ``ingest_packets`` writes all its packets with this one statement (docs/design.md §Dossier
# queries): each packet's subquery runs after the previous one's, so a dossier two packets route
# into shows the second the first one's writes, as separate statements did. ``FROM_BLOCK`` is
# drawn only to a block the writer may read and every reader of the packet's facts may see
# (``access_covers``): to a writer, a hidden block is one that does not exist, and to a packet, so
# is a block less visible than its facts.
#
# The journal: per packet (``unit.p``, its ``pk.n``) its entries in order; an entry with a
# ``summary_of`` (a dossier the packet appended to) is a ``summary_updated`` kept only when the
# write changed that summary, its values the write's. Entries are numbered (``seq``) once those are
# left out, each stored under the id ``unit.ids[seq]`` (``journal.entry_id``, made in Python: the
# one place the id's form is written, which the idempotency check reads too), so a packet's first
# entry, its idempotency marker, is always ``-0``.
WRITE_ROUTES = f"""{KEEP_PLAN}
CALL () {{
  UNWIND $packets AS pk
  CALL (pk) {{
    UNWIND pk.routes AS r
    MERGE (d:Entity:Dossier {{id: r.dossier_id}})
    ON CREATE SET d += pk.create_props, d.created_at = datetime(pk.now), d.summary = ''
    WITH pk, d, r, d.summary AS previous
    OPTIONAL MATCH (b:Block {{block_id: pk.block_id}})
    WHERE {acl_visible("b")} AND {access_covers("b", "pk.create_props")}
    CALL (pk, d, r, b) {{
      UNWIND r.facts AS row
      MERGE (f:Entity:Fact {{id: row.id}})
      ON CREATE SET f.created_at = datetime(pk.now)
      SET f += row.props, f.added_at = datetime(pk.now), f.observed_at = datetime(pk.observed_at)
      MERGE (d)-[:HAS_FACT]->(f)
      FOREACH (_ IN CASE WHEN b IS NULL THEN [] ELSE [1] END | MERGE (f)-[:FROM_BLOCK]->(b))
    }}
    SET d.centroid_sum = r.centroid_sum,
        d.last_updated = CASE WHEN 'last_updated' IN r.keep THEN d.last_updated ELSE datetime(pk.now) END
    WITH d, r, previous, [row IN r.facts | row.id] AS new_ids
    CALL (d, new_ids) {{
      {SUMMARY_POOL_RANKED}
    }}
    SET d.summary_pool = pool,
        d.summary = CASE WHEN 'summary' IN r.keep THEN previous ELSE {SUMMARY_FROM_CENTRAL} END
    RETURN d.id AS dossier_id, coalesce(previous, '') AS previous, coalesce(d.summary, '') AS summary
  }}
  RETURN collect({{p: pk.n, dossier_id: dossier_id, previous: previous, summary: summary}}) AS written
}}
CALL () {{
{_RESTATED_PROVENANCE}
}}
CALL (written) {{
  UNWIND $journal AS unit
  WITH unit, [e IN unit.entries |
              e {{.*, s: [w IN written WHERE w.p = unit.p AND w.dossier_id = e.summary_of][0]}}] AS entries
  WITH unit, [e IN entries WHERE e.summary_of IS NULL OR e.s.summary <> e.s.previous] AS kept
  UNWIND range(0, size(kept) - 1) AS seq
  WITH unit, seq, kept[seq] AS e
  {
    _journal_entry(
        "e",
        "unit.ids[seq]",
        "unit.now",
        ", j.seq = seq, j.previous_value = coalesce(e.s.previous, e.props.previous_value),"
        " j.new_value = coalesce(e.s.summary, e.props.new_value)",
    )
}
}}
RETURN size(written) AS routes
"""

# --- blocks and the gardener (docs/design.md §Gardener) ------------------------------------------

PROCESSED_BLOCKS = """
UNWIND $block_ids AS bid
MATCH (b:Block {block_id: bid})
WHERE b.processed_at IS NOT NULL
RETURN b.block_id AS block_id
"""

WRITE_BLOCK = """
MERGE (b:Entity:Block {id: $id})
ON CREATE SET b.created_at = datetime($now)
SET b += $props, b.observed_at = CASE WHEN $keep_observed_at THEN b.observed_at
                                      WHEN $observed_at IS NULL THEN null ELSE datetime($observed_at) END
WITH b
UNWIND $turns AS t
MERGE (turn:Entity:Turn {id: t.id})
ON CREATE SET turn.created_at = datetime($now)
SET turn += t.props
MERGE (turn)-[:PART_OF]->(b)
"""

SAVE_BLOCK_METADATA = """
MERGE (b:Entity:Block {id: $id})
ON CREATE SET b.created_at = datetime(), b.block_id = $block_id, b += $access
SET b.global_tags = $global_tags, b.section_rules = $section_rules
"""

# A block as the caller may see it, with its visible turns and facts counted.
BLOCK_METADATA = f"""
MATCH (b:Block {{block_id: $block_id}})
WHERE {acl_visible("b")}
OPTIONAL MATCH (t:Turn)-[:PART_OF]->(b)
WHERE {acl_visible("t")} AND {edge_allowed("PART_OF", "t", "b", "in")}
WITH b, count(t) AS turns
OPTIONAL MATCH (f:Fact)-[:FROM_BLOCK]->(b)
WHERE {acl_visible("f")} AND {edge_allowed("FROM_BLOCK", "f", "b", "in")}
RETURN properties(b) AS props, turns, count(f) AS facts
"""

# The tags of the visible blocks among ``$block_ids``, to hydrate retrieved chunks.
BLOCK_TAGS_FOR_CHUNKS = f"""
UNWIND $block_ids AS bid
MATCH (b:Block {{block_id: bid}})
WHERE {acl_visible("b")}
RETURN bid AS block_id, b {{.id, .domain, .global_tags, .section_rules}} AS props
"""

LOAD_BLOCK = """
MATCH (b:Block {block_id: $block_id})
RETURN properties(b) AS props
"""

UNPROCESSED_BLOCKS = """
MATCH (b:Block)
WHERE b.processed_at IS NULL
RETURN b.block_id AS block_id ORDER BY coalesce(b.observed_at, b.created_at), b.block_id
"""

SAVE_BLOCK_TAGS = """
MATCH (b:Block {id: $id})
SET b.global_tags = $global_tags, b.section_rules = $section_rules
WITH b
UNWIND $tag_facts AS row
MERGE (f:Entity:Fact {id: row.id})
ON CREATE SET f.created_at = datetime($now), f.added_at = datetime($now)
SET f += row.props
MERGE (f)-[:FROM_BLOCK]->(b)
"""

FINISH_BLOCK = """
MATCH (b:Block {id: $id})
OPTIONAL MATCH (t:Turn)-[:PART_OF]->(b)
WITH b, collect(t) AS turns
SET b.processed_at = datetime($now)
REMOVE b.pending_facts
WITH b, turns, size(turns) AS n
FOREACH (t IN turns | DETACH DELETE t)
RETURN n
"""

SPLIT_CANDIDATES = """
MATCH (d:Dossier {status: 'active'})
WHERE $ids IS NULL OR d.id IN $ids
WITH d, COUNT { (d)-[:HAS_FACT]->() } AS n
WHERE n >= $min_facts
RETURN d.id AS id ORDER BY id
"""

LOAD_DOSSIER_FACTS = """
MATCH (d:Dossier {id: $id, status: 'active'})-[:HAS_FACT]->(f:Fact)
WHERE f.embedding IS NOT NULL
RETURN d {.title, .domain, .sensitivity, .namespaces, .roles_allowed} AS dossier, f.id AS id, f.text AS text,
       f.embedding AS embedding
ORDER BY f.added_at, f.id
"""

# Each new part: a dossier with the source's access fields and its facts moved over; every part
# (the source keeps the first) gets the centroid sum of its facts.
WRITE_SPLIT = """
MATCH (src:Dossier {id: $source})
UNWIND $parts AS part
MERGE (d:Entity:Dossier {id: part.dossier_id})
ON CREATE SET d += $create_props, d.title = part.title, d.created_at = datetime($now), d.summary = ''
SET d.last_updated = datetime($now), d.centroid_sum = part.centroid_sum, d.summary_pool = null
WITH src, d, part
CALL (src, d, part) {
  UNWIND part.fact_ids AS fid
  MATCH (src)-[r:HAS_FACT]->(f:Fact {id: fid})
  WHERE d <> src
  DELETE r
  MERGE (d)-[:HAS_FACT]->(f)
}
"""

# Once every fact has moved: each part's summary, chosen from all its facts.
SPLIT_SUMMARIES = f"""
UNWIND $ids AS did
MATCH (d:Dossier {{id: did}})
WITH d, d.summary AS previous, [] AS new_ids
CALL (d, new_ids) {{
  {SUMMARY_POOL_RANKED}
}}
SET d.summary_pool = pool, d.summary = {SUMMARY_FROM_CENTRAL}
RETURN d.id AS dossier_id, previous, d.summary AS summary
"""

# The validation counts after a migration (docs/design.md §Gardener), on the graph.
DOSSIER_COUNT = "MATCH (d:Dossier) RETURN count(d) AS n"
FACT_DISTRIBUTION = """
MATCH (d:Dossier)
OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
RETURN d.id AS id, d.title AS title, d.status AS status, count(f) AS facts
ORDER BY facts DESC, d.id
"""
PROVENANCE_COUNTS = """
MATCH (j:JournalEntry)-[:ABOUT]->(d:Dossier)
RETURN d.id AS id, j.op AS op, count(j) AS n
ORDER BY d.id, op
"""
EMBEDDING_COVERAGE = """
MATCH (:Dossier)-[:HAS_FACT]->(f:Fact)
RETURN count(DISTINCT f) AS total, count(DISTINCT CASE WHEN f.embedding IS NOT NULL THEN f END) AS embedded
"""

# --- curation (docs/design.md §Curation) ---------------------------------------------------------

# The dossiers' status and access fields, for the writer's scope check (in Python).
LOAD_DOSSIER_ACCESS = """
UNWIND $ids AS did
MATCH (d:Dossier {id: did})
RETURN d.id AS id, d.status AS status, d.merged_into AS merged_into,
       d.domain AS domain, d.sensitivity AS sensitivity, d.namespaces AS namespaces,
       d.roles_allowed AS roles_allowed
"""

# The source's facts move to the target; returns the moved ids (in the order moved) and the
# vectors of all the target's facts afterwards, from which the caller computes its centroid sum.
MOVE_FACTS = """
MATCH (t:Dossier {id: $target})
CALL (t) {
  MATCH (:Dossier {id: $source})-[r:HAS_FACT]->(f:Fact)
  MERGE (t)-[:HAS_FACT]->(f)
  DELETE r
  RETURN collect(f.id) AS moved
}
RETURN moved, COLLECT { MATCH (t)-[:HAS_FACT]->(f:Fact) WHERE f.embedding IS NOT NULL RETURN f.embedding }
         AS fact_vectors
"""

# After the move: the source marked merged, the target's centroid sum (``$centroid_sum``, from
# all its facts) stored and its summary chosen from all its facts. A field named in
# ``$keep_source`` / ``$keep_target`` (one the writer may not read) keeps its stored value.
MARK_MERGED = f"""
MATCH (s:Dossier {{id: $source}}), (d:Dossier {{id: $target}})
SET s.status = 'merged', s.merged_into = $target,
    s.last_updated = CASE WHEN 'last_updated' IN $keep_source THEN s.last_updated ELSE datetime($now) END,
    d.last_updated = CASE WHEN 'last_updated' IN $keep_target THEN d.last_updated ELSE datetime($now) END
WITH d, d.summary AS previous
SET d.centroid_sum = $centroid_sum, d.summary_pool = null
WITH d, previous
CALL (d) {{
  {CENTRAL_FACT_TEXTS}
}}
WITH d, previous, CASE WHEN 'summary' IN $keep_target THEN previous ELSE {SUMMARY_FROM_CENTRAL} END AS summary
SET d.summary = summary
RETURN previous, summary
"""

MARK_ARCHIVED = """
MATCH (d:Dossier {id: $id})
SET d.status = 'archived',
    d.last_updated = CASE WHEN 'last_updated' IN $keep THEN d.last_updated ELSE datetime($now) END
"""

# Other dossiers by multi-vector vote of this one's visible facts, over what the scope may see.
RELATED_BY_FACTS = f"""
MATCH (d:Dossier {{id: $id}})-[:HAS_FACT]->(src:Fact)
WHERE {acl_visible("d")} AND {acl_visible("src")} AND src.embedding IS NOT NULL
  AND {edge_allowed("HAS_FACT", "d", "src", "out")} AND {search_fields_shown("src", "Fact")}
WITH collect(src.embedding) AS vecs
MATCH (o:Dossier)-[:HAS_FACT]->(f:Fact)
WHERE o.id <> $id AND {status_in_view("o")} AND f.embedding IS NOT NULL
  AND {acl_visible("o")} AND {acl_visible("f")} AND {edge_allowed("HAS_FACT", "o", "f", "out")}
  AND {search_fields_shown("f", "Fact")}
UNWIND vecs AS v
WITH o, vector.similarity.cosine(f.embedding, v) AS s
WHERE s >= $min_score
WITH o, count(*) AS hits, sum(2 * s - 1) AS score_sum
ORDER BY hits DESC, score_sum DESC, o.id
LIMIT $top_k
RETURN o.id AS id, o {{.*, centroid_sum: null, summary_pool: null}} AS props, hits, score_sum
"""

# Explicit links: entries of op "linked", counted only where the scope shows an entry's ``op``.
LINKED_DOSSIERS = f"""
MATCH (d:Dossier {{id: $id}})<-[:ABOUT]-(j:JournalEntry {{op: 'linked'}})-[:ABOUT]->(o:Dossier)
WHERE o.id <> $id AND {acl_visible("d")} AND {acl_visible("j")} AND {acl_visible("o")}
  AND {field_shown("j", "op")}
  AND {edge_allowed("ABOUT", "j", "d", "in")} AND {edge_allowed("ABOUT", "j", "o", "out")}
WITH DISTINCT o, j ORDER BY o.id, j.id
WITH o, collect(j)[0] AS j
RETURN o.id AS id, o {{.*, centroid_sum: null, summary_pool: null}} AS props, j {{.*}} AS entry
ORDER BY o.id
"""

# --- reading dossiers (docs/design.md §Reading dossiers) -----------------------------------------

# The tail of both dossier searches over rows ``f, score``: the visible dossiers holding a
# visible fact above the threshold, each scored by its best such fact (a fact whose text the
# caller may not read is no such fact: acl.search_fields_shown).
DOSSIER_RANK_VISIBLE = f"""
  WHERE score >= $min_score
  MATCH (d:Dossier)-[:HAS_FACT]->(f)
  WHERE {status_in_view("d")}
    AND {acl_visible("d")} AND {acl_visible("f")} AND {edge_allowed("HAS_FACT", "d", "f", "out")}
    AND {search_fields_shown("f", "Fact")}
  WITH d, max(score) AS best
  ORDER BY best DESC, d.id
  RETURN collect({{props: d {{.*, centroid_sum: null}}, score: best}}) AS ranked
"""

# Index candidates by the full-float Fact index's score, which is the exact cosine (schema 5, as
# for fact search and the vote: re-reading the candidates' vectors to rescore them was about a
# fifth of this query's Neo4j CPU); ``lowest`` tells whether the fetch reached below the threshold.
# Fact properties a caller may be shown in a dossier (before masking), named so that the
# 384-float vector is never read for display: reading it made results with large dossiers
# several times slower.
_DOSSIER_FACT_FIELDS = (
    "f {.id, .text, .fact_type, .confidence, .added_at, .observed_at, .source_block_id, "
    ".source_turn_id, .turn_index, .domain, .sensitivity, .namespaces, .roles_allowed}"
)

# A fact's ``added_at`` as a sort key where the caller may see it, else null (after the rest,
# by id): which facts a limit keeps, and their order, must not tell a masked time
# (docs/design.md §Policy module, "Ordering by a maskable field").
_ADDED_AT_SHOWN = shown_or("f", "added_at", "null")

# The visible facts of each dossier (the newest ``$limit``, or all). ``stored`` (how many facts
# the dossier has in all) never leaves this query: it only tells whether the stored summary may
# quote a fact the caller cannot see or whose text it may not read; only then do the vectors of
# the facts it may quote travel, to rebuild the summary from them. ``stored`` is counted once per
# dossier, before its facts are expanded: counted in the grouping, it was counted again for every
# fact (a dossier of n facts walked n² edges).
# ``did`` bound to a dossier id: its row (``_VISIBLE_FACTS_ROW``), if the dossier exists.
_VISIBLE_FACTS_BODY = f"""
MATCH (d:Dossier {{id: did}})
WITH d, did, COUNT {{ (d)-[:HAS_FACT]->(:Fact) }} AS stored
OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
WHERE {acl_visible("f")} AND {edge_allowed("HAS_FACT", "d", "f", "out")}
WITH did, stored, f ORDER BY {_ADDED_AT_SHOWN}, f.id
WITH did, collect(f) AS visible, stored
WITH did, visible, stored, [f IN visible WHERE {search_fields_shown("f", "Fact")}] AS quotable
"""
_VISIBLE_FACTS_ROW = f"""{{dossier_id: did, visible_count: size(visible),
  facts: [f IN CASE WHEN $limit IS NULL THEN visible ELSE visible[-$limit..] END | {_DOSSIER_FACT_FIELDS}],
  summary_rows: CASE WHEN size(quotable) < stored THEN [f IN quotable | f {{.text, .embedding}}] END}}"""
VISIBLE_FACTS = f"""
UNWIND $ids AS did
{_VISIBLE_FACTS_BODY}
RETURN {_VISIBLE_FACTS_ROW} AS row
"""

# The visible facts of a search's ``top`` dossiers, read by the search itself (one round trip,
# issue 15's mixed load); none while ``settled`` is false (the index search will fetch again).
_TOP_FACTS = f"""
CALL (top, settled) {{
  UNWIND CASE WHEN settled THEN top ELSE [] END AS t
  WITH t.props.id AS did
  {_VISIBLE_FACTS_BODY}
  RETURN collect({_VISIBLE_FACTS_ROW}) AS facts
}}
"""

# Index candidates by the full-float Fact index's score, which is the exact cosine (schema 5, as
# for fact search and the vote: re-reading the candidates' vectors to rescore them was about a
# fifth of this query's Neo4j CPU); ``lowest`` tells whether the fetch reached below the threshold,
# and the answer is ``settled`` when the fetch came short or reached below it.
DOSSIER_SEARCH_INDEXED = f"""
CALL db.index.vector.queryNodes($index, $fetch, $vec) YIELD node AS f, score
WITH collect({{f: f, score: score}}) AS fetched
CALL (fetched) {{
  UNWIND fetched AS x
  WITH x.f AS f, x.score AS score
  {DOSSIER_RANK_VISIBLE}
}}
WITH size(fetched) AS fetched, reduce(m = 1.0, x IN fetched | CASE WHEN x.score < m THEN x.score ELSE m END)
       AS lowest, size(ranked) AS total, ranked[0..$top_k] AS top
WITH fetched, lowest, total, top, fetched < $fetch OR lowest < $min_score AS settled
{_TOP_FACTS}
RETURN settled, total, top, facts
"""

# Every visible fact, scored exactly: the fallback when the index cannot settle the answer.
DOSSIER_SEARCH_EXACT = f"""
CALL () {{
  MATCH (f:Fact)
  WHERE f.embedding IS NOT NULL AND {acl_visible("f")}
  WITH f, vector.similarity.cosine(f.embedding, $vec) AS score
  {DOSSIER_RANK_VISIBLE}
}}
WITH size(ranked) AS total, ranked[0..$top_k] AS top, true AS settled
{_TOP_FACTS}
RETURN total, top, facts
"""


# Dossiers as context for fact search: the fields a hit shows (id, title, summary; domain for the
# field rules), the visible-fact count, and the visible facts' texts and vectors only when some
# are hidden (the summary is then rebuilt from them): the row ``FACT_DOSSIER_HEADERS`` collects per
# dossier, read by ``retriever.header_views``.
DOSSIER_HEADER_ROW = """{props: d {.id, .domain, .title, .summary}, visible_count: visible_count,
  summary_rows: CASE WHEN quotable_count < stored THEN [f IN quotable | f {.text, .embedding}] END}"""

ONE_DOSSIER = f"""
MATCH (d:Dossier {{id: $id}})
WHERE {acl_visible("d")}
RETURN d {{.*, centroid_sum: null}} AS props
"""

# A merged dossier's history continues in the dossier it was merged into, where the scope shows
# the merged one's ``merged_into`` (else its entries there would tell what that field holds).
DOSSIER_HISTORY = f"""
MATCH (d:Dossier {{id: $id}})
WHERE {acl_visible("d")}
CALL (d) {{
  MATCH (j:JournalEntry)-[:ABOUT]->(d)
  RETURN j
  UNION
  MATCH (x:Dossier {{merged_into: d.id}})<-[:ABOUT]-(j:JournalEntry)
  WHERE {acl_visible("x")} AND {field_shown("x", "merged_into")}
  RETURN j
}}
WITH d, j
WHERE {acl_visible("j")} AND {edge_allowed("ABOUT", "j", "d", "in")}
RETURN j {{.*, embedding: null}} AS props
ORDER BY {shown_or("j", "timestamp", "null")}, j.seq, j.id
"""

# --- fact search (``facts.FactRetriever``; docs/design.md §Reading dossiers) ---------------------

# A fact is a candidate only if it, its dossier and the edge between them are visible
# (``_FACT_VISIBLE_IN_VIEW``: what a dossier header counts as visible), and the caller may read its
# text (``_FACT_QUOTABLE``: what its vector and its full-text entry are made of).
_FACT_VISIBLE_IN_VIEW = f"""{status_in_view("d")} AND {acl_visible("d")} AND {acl_visible("f")}
    AND {edge_allowed_between_visible("HAS_FACT", "d", "f", "out")}"""
_FACT_QUOTABLE = search_fields_shown("f", "Fact")

# A candidate of every list after the view: the pair of its dossier and itself is one of the view's
# (``candidates``, collected by ``FACT_VIEW`` under both predicates above), so the access rules
# are evaluated once per visible fact, not again in each list that meets it. A pair is the two
# nodes' element ids in one string: Neo4j hashes the strings of a list that ``IN`` meets row after
# row, so a lookup costs the same whatever the view's size, found or not; a list of ``[d, f]``
# lists is scanned anew for every pair it does not hold (measured: 3,000 misses in 10,000 pairs
# 2.0 s as lists, 9 ms as strings), which a caller who may not see much would pay per hidden fact.
_FACT_PAIR = "elementId(d) + ' ' + elementId(f)"
_FACT_IN_VIEW = f"{_FACT_PAIR} IN candidates"

# What a caller may be shown of a fact hit (before masking); never the 384-float vector. A fact
# that absorbed skipped duplicates lists every source turn in ``source_turn_ids``.
# Its two timestamps travel as the text the caller is shown (``iso_text``), not as DateTimes.
_FACT_HIT_FIELDS = f"""f {{.id, .text, .fact_type, .confidence, added_at: {iso_text("f.added_at")},
  observed_at: {iso_text("f.observed_at")}, .source_block_id,
  .turn_index, .domain, .sensitivity, .namespaces, .roles_allowed,
  source_turn_ids: coalesce(f.source_turn_ids, CASE WHEN f.source_turn_id IS NULL
      OR NOT {field_shown("f", "source_turn_id")} THEN [] ELSE [f.source_turn_id] END)}}"""
# A candidate inside the query: the node itself (its fields are read only for the facts returned).
_FACT_CANDIDATE = "{f: f, dossier_id: d.id, score: score}"

# The caller's view, in one pass over the facts it may see and read (the candidates' own filter):
# the full-text list's N and avgdl (``FACT_FULLTEXT``), and the dense query centred on the view
# (``FusionConfig.centre``, docs/design.md §Fact search scores): ``$vec`` minus ``$centre`` times
# the mean vector of those facts (one without a vector, which ingest never writes, counts as
# zero), so what every fact of the view shares says less than what sets a fact apart. A dossier
# whose facts are all such facts adds its stored ``centroid_sum`` (the sum of its fact vectors,
# kept by the governor, merges and splits), one vector instead of each fact's, whose reads were
# most of the centring's cost; any other dossier adds its visible facts' vectors one by one, so a
# hidden fact's vector never moves the query. No visible fact, or ``$centre`` 0: ``$vec`` as it is.
# The same pass yields ``candidates``, every (dossier, fact) pair it kept (``_FACT_PAIR``): each
# list below admits a fact only as one of these pairs (``_FACT_IN_VIEW``), so the access rules run
# once per visible fact per search, here, and every list's test is a hashed lookup, not the rules
# again for each candidate of each list (issue #16). A fact's length is read once (``dl``), not once per sum.
# It walks the facts the caller may see (``_FACT_VISIBLE_IN_VIEW``) and keeps, per dossier, those it
# may also read (``seen``, the candidates) and how many it sees (``visible``): ``groups``, from which
# the hits' dossier headers are read (``FACT_DOSSIER_HEADERS``) without walking their facts again.
FACT_VIEW = f"""
  OPTIONAL MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact)
  WHERE {_FACT_VISIBLE_IN_VIEW}
  WITH d, f, {_FACT_QUOTABLE} AS quotable
  WITH d, f, quotable, CASE WHEN quotable THEN size(f.text) END AS dl
  WITH d, collect(CASE WHEN quotable THEN f END) AS seen, count(f) AS visible, count(dl) AS texts,
       coalesce(sum(dl), 0) AS chars
  WITH d, seen, visible, size(seen) AS n, texts, chars,
       CASE WHEN $centre = 0 OR size(seen) = 0 THEN []
            WHEN d.centroid_sum IS NOT NULL AND size(seen) = COUNT {{ (d)-[:HAS_FACT]->(:Fact) }}
            THEN [d.centroid_sum] ELSE [g IN seen WHERE g.embedding IS NOT NULL | g.embedding] END AS parts
  WITH sum(n) AS n, sum(texts) AS texts, sum(chars) AS chars,
       reduce(acc = [], p IN collect(parts) | acc + p) AS sums,
       collect({{d: d, seen: seen, visible: visible}}) AS groups
  CALL (groups) {{
    UNWIND groups AS g
    UNWIND g.seen AS f
    WITH g.d AS d, f
    RETURN collect({_FACT_PAIR}) AS candidates
  }}
  RETURN n, candidates, groups, CASE WHEN texts = 0 THEN null ELSE toFloat(chars) / texts END AS avgdl,
    CASE WHEN size(sums) = 0 THEN $vec
    ELSE [i IN range(0, size($vec) - 1) | $vec[i] - $centre * reduce(s = 0.0, v IN sums | s + v[i]) / n]
    END AS qvec
"""

# The dense list is the first ``$depth`` of the ``$dense_pool`` best visible candidates (cosine
# order); the named list those of them whose text holds one of the question's names as a whole
# word (``$name_pattern``: one regular expression for all of them, ``facts.name_pattern``; null
# when the question names no one), at most ``$depth``. Only candidates the caller may see and read
# reach either list, so a hidden fact that names someone never takes a named slot.
_DENSE_AND_NAMED = """size(visible) AS dense_count, visible[..$depth] AS dense,
  [h IN visible WHERE h.f.text =~ $name_pattern][..$depth] AS named"""

# The dense list from the vector index, as a subquery body. The index keeps full floats (schema 5,
# ``cairn.schema.migrate.FACT_INDEX``), so its score is the exact cosine on the same (1 + cos) / 2
# scale as ``vector.similarity.cosine``: no candidate's vector is read again to re-score it.
# The index answers best first, so the first ``$dense_pool`` visible candidates are the best ones:
# the cut comes before the sort, and candidates are looked up in the view only until the pool is
# full (half the fetch when nothing is hidden). Candidates of
# equal score at the cut keep the index's order.
FACT_DENSE_FROM_INDEX = f"""
  CALL db.index.vector.queryNodes($vector_index, $dense_fetch, qvec) YIELD node, score
  WITH collect({{f: node, score: score}}) AS fetched
  CALL (fetched, candidates) {{
    UNWIND fetched AS hit
    WITH hit.f AS f, hit.score AS score
    MATCH (d:Dossier)-[:HAS_FACT]->(f)
    WHERE {_FACT_IN_VIEW}
    WITH f, d, score
    LIMIT $dense_pool
    WITH f, d, score
    ORDER BY score DESC, f.id
    RETURN collect({_FACT_CANDIDATE}) AS visible
  }}
  RETURN size(fetched) AS dense_fetched, {_DENSE_AND_NAMED}
"""
# The dense list by exact cosine over every visible fact: when hidden facts crowd the index's
# answer out.
FACT_DENSE_EXACT = f"""
  MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact)
  WHERE f.embedding IS NOT NULL AND {_FACT_IN_VIEW}
  WITH f, d, vector.similarity.cosine(f.embedding, qvec) AS score
  ORDER BY score DESC, f.id
  LIMIT $dense_pool
  WITH collect({_FACT_CANDIDATE}) AS visible
  RETURN -1 AS dense_fetched, {_DENSE_AND_NAMED}
"""
# The full-text list, scored by BM25 over the facts the caller may read (docs/design.md §Dossiers,
# "Fact search scores"): Lucene's own score counts hidden facts in its IDF and average length,
# so it only finds, per query word, the facts holding it; every statistic is taken here from the
# visible ones. N: visible facts; avgdl: their mean length in characters (BM25 reads length only
# as dl / avgdl; both from ``FACT_VIEW``'s pass over the visible facts, which the centred query
# needs too); df: visible facts holding the word (Lucene's english analyzer decides, as for
# the match); tf: the word's occurrences in the fact's lower-cased text, at least 1. Lucene's
# form: idf(t) * tf / (tf + k1 * (1 - b + b * dl / avgdl)), idf = ln(1 + (N - df + 0.5) / (df + 0.5)).
# A fact found by several words is looked up in the view and split into words once (``holds``:
# the query words whose index match found it), not once per word.
# No query words (``$terms`` empty): no row reaches the index and the list is empty.
FACT_FULLTEXT = f"""
  WITH n, avgdl, candidates, $terms AS terms WHERE size(terms) > 0
  CALL (terms, candidates) {{
    UNWIND terms AS t
    CALL db.index.fulltext.queryNodes($text_index, t) YIELD node AS f
    WITH f, collect(t) AS holds
    MATCH (d:Dossier)-[:HAS_FACT]->(f)
    WHERE {_FACT_IN_VIEW}
    WITH f, d, holds, split(toLower(f.text), $separators) AS words
    RETURN collect({{f: f, dossier_id: d.id, holds: holds, words: words}}) AS found
  }}
  UNWIND terms AS t
  WITH n, avgdl, t, [m IN found WHERE t IN m.holds] AS matches
  WITH n, avgdl, t, matches, log(1.0 + (n - size(matches) + 0.5) / (size(matches) + 0.5)) AS idf
  UNWIND matches AS m
  WITH m.f AS f, m.dossier_id AS dossier_id, avgdl, idf, size([w IN m.words WHERE w = t]) AS count
  WITH f, dossier_id, avgdl, idf, CASE WHEN count > 0 THEN toFloat(count) ELSE 1.0 END AS tf
  WITH f, dossier_id,
       sum(idf * tf / (tf + $k1 * (1.0 - $b + $b * size(f.text) / avgdl))) AS score
  ORDER BY score DESC, f.id
  LIMIT $depth
  WITH collect({{f: f, dossier_id: dossier_id, score: score}}) AS text
  RETURN text
"""
# Pseudo-relevance feedback: the query moved toward the mean of its top ``$feedback`` dense
# hits (Rocchio), asked again; it finds facts worded like the answers rather than the question.
# The mean is taken here, not in Python: the hits are known only inside this query, and one
# round trip per search is the point (docs/design.md §Dossier queries).
FACT_FEEDBACK = f"""
  WITH [h IN dense[..$feedback] | h.f.id] AS ids
  MATCH (g:Fact) WHERE g.id IN ids
  WITH collect(g.embedding) AS tops
  WHERE size(tops) > 0
  WITH [i IN range(0, size(qvec) - 1) | qvec[i] + reduce(a = 0.0, e IN tops | a + e[i]) / size(tops)] AS v
  CALL db.index.vector.queryNodes($vector_index, $dense_fetch, v) YIELD node, score
  WITH collect({{f: node, score: score}}) AS fetched
  CALL (fetched, candidates) {{
    UNWIND fetched AS hit
    WITH hit.f AS f, hit.score AS score
    MATCH (d:Dossier)-[:HAS_FACT]->(f)
    WHERE {_FACT_IN_VIEW}
    WITH f, d, score
    ORDER BY score DESC, f.id
    LIMIT $depth
    RETURN collect({_FACT_CANDIDATE}) AS hits
  }}
  UNWIND hits AS hit
  RETURN collect(hit) AS feedback
"""
# Fusion: each list gives its facts a weighted share, summed per fact. "rrf": reciprocal rank
# 1 / (rrf_k + rank); "score": the list's own score rescaled to [0, 1] (cosine min-max over the
# list, BM25 over its best), which keeps how far apart the scores are, not only their order.
_DENSE_SHARE = """$dense_weight * CASE WHEN $fusion = 'rrf' THEN 1.0 / ($rrf_k + i + 1)
  ELSE (dense[i].score - dense[-1].score) / (dense[0].score - dense[-1].score + 1e-9) END"""
_FEEDBACK_SHARE = """$feedback_weight * CASE WHEN $fusion = 'rrf' THEN 1.0 / ($rrf_k + i + 1)
  ELSE (feedback[i].score - feedback[-1].score) / (feedback[0].score - feedback[-1].score + 1e-9) END"""
_NAMED_SHARE = """$name_weight * CASE WHEN $fusion = 'rrf' THEN 1.0 / ($rrf_k + i + 1)
  ELSE (named[i].score - named[-1].score) / (named[0].score - named[-1].score + 1e-9) END"""
_TEXT_SHARE = """$text_weight * CASE WHEN $fusion = 'rrf' THEN 1.0 / ($rrf_k + i + 1)
  ELSE text[i].score / (text[0].score + 1e-9) END"""
FACT_FUSE = f"""
  WITH [i IN range(0, size(dense) - 1) | {{id: dense[i].f.id, s: {_DENSE_SHARE}}}]
     + [i IN range(0, size(named) - 1) | {{id: named[i].f.id, s: {_NAMED_SHARE}}}]
     + [i IN range(0, size(text) - 1) | {{id: text[i].f.id, s: {_TEXT_SHARE}}}]
     + [i IN range(0, size(feedback) - 1) | {{id: feedback[i].f.id, s: {_FEEDBACK_SHARE}}}] AS shares
  UNWIND shares AS share
  WITH share.id AS id, sum(share.s) AS score
  ORDER BY score DESC, id
  RETURN collect({{id: id, score: score}}) AS fused
"""
# The visible facts told within ``$window`` turns of a seed (one of the top ``$seeds`` fused
# facts) in its block (session); null window: the whole block. Matched by the block and turn only
# where the scope shows them on both facts: a hidden one never lifts a score nor says "block".
# A fact further than the window by its stored turns is passed over before anything else is
# checked: the distance below would drop it anyway (unknown where a turn is hidden, and an unknown
# distance is not within the window), so this changes no answer, only how many of a block's facts
# are looked up in the view (a tenth of a session, not all of it). The block's facts within the
# window are collected per seed before the lookup (an aggregation is a boundary no predicate is
# moved across: the planner once merged the access filter with the window's over the whole block).
# Every fact kept is still looked up, by the subquery per fact, so no plan can walk the block's
# edges first. The seed's turn as the caller is shown it (null where hidden) is read once per
# seed, not once per neighbour; whether a fact's block and turn are shown is decided by one rule
# lookup for both (``fields_shown``), not one per field.
_BLOCK_AND_TURN = ("source_block_id", "turn_index")
FACT_BLOCK_NEIGHBOURS = f"""
  UNWIND fused[..$seeds] AS top
  MATCH (s:Fact {{id: top.id}})
  WITH top, s, {fields_shown("s", _BLOCK_AND_TURN)} AS shown
  WHERE shown.source_block_id
  WITH top, s, CASE WHEN shown.turn_index THEN s.turn_index END AS turn
  MATCH (f:Fact {{source_block_id: s.source_block_id}})
  WHERE f <> s AND ($window IS NULL OR abs(s.turn_index - f.turn_index) <= $window)
  WITH top, turn, collect(f) AS near
  UNWIND near AS f
  CALL (f, candidates) {{
    MATCH (d:Dossier)-[:HAS_FACT]->(f)
    WHERE {_FACT_IN_VIEW}
    WITH d, {fields_shown("f", _BLOCK_AND_TURN)} AS shown
    WHERE shown.source_block_id
    RETURN d, shown.turn_index AS turn_shown
  }}
  WITH top, f, d, 0.0 AS score,
       CASE WHEN turn IS NULL OR f.turn_index IS NULL OR NOT turn_shown THEN null
            ELSE abs(turn - f.turn_index) END AS distance
  WHERE $window IS NULL OR distance <= $window
  RETURN collect({{f: f, dossier_id: d.id, boost: $neighbour_weight * top.score}}) AS neighbours
"""

# Dossier mates (``FusionConfig.dossier_weight``; docs/design.md §Fact search scores): the other
# facts of a top ``$dossier_seeds`` fused fact's dossier (a topic the routing grouped, across
# sessions) get ``$dossier_weight`` of its score; a seed itself is never lifted this way. The seed's
# dossier is taken only where the seed is in the view in it (``_FACT_IN_VIEW``, as every list), and
# each mate must be in the view in that dossier too: a hidden mate is never lifted, a hidden dossier
# lifts none. Zero seeds: no row, no read. The seed is found by an index seek on its id (a hint, not
# the planner's choice) and its dossier's facts by a walk from that dossier (no label on the mate,
# so no index can stand in for the walk): planned from index statistics taken before an ingest, the
# two MATCH clauses became a join of two scans of every stored fact per seed (hidden and other
# dossiers' facts included), a cost that grew with the whole store (docs/design.md §Fact search
# scores, "Dossier mates").
FACT_DOSSIER_MATES = f"""
  WITH [t IN fused[..$dossier_seeds] | t.id] AS seeds, fused[..$dossier_seeds] AS tops
  UNWIND tops AS top
  CALL (top, candidates) {{
    MATCH (d:Dossier)-[:HAS_FACT]->(f:Fact {{id: top.id}})
    USING INDEX f:Fact(id)
    WHERE {_FACT_IN_VIEW}
    RETURN d
  }}
  CALL (d, seeds, candidates) {{
    MATCH (d)-[:HAS_FACT]->(f)
    WHERE NOT f.id IN seeds AND {_FACT_IN_VIEW}
    RETURN f
  }}
  RETURN collect({{f: f, dossier_id: d.id, boost: $dossier_weight * top.score}}) AS mates
"""


# A fact's source turns as the caller is shown them (none where the field is hidden, so a hidden
# value never moves the order).
def _shown_turns(f: str) -> str:
    return f"""CASE WHEN NOT {field_shown(f, "source_turn_ids")} THEN []
    ELSE coalesce({f}.source_turn_ids, CASE WHEN {f}.source_turn_id IS NULL
        OR NOT {field_shown(f, "source_turn_id")} THEN [] ELSE [{f}.source_turn_id] END) END"""


# Distinct sources (``FusionConfig.distinct_sources``): in rank order, a fact whose source turns are
# all cited by better-ranked facts goes after every fact that cites a new one (a fact without
# source turns always brings something); both parts keep their order. Once ``$limit`` facts bring
# a new turn the returned ones are known, so the rest of the pool is passed over: its turns are
# never read, nothing is copied (the inner reduce over one list item names a fact's turns once).
_NEW_SOURCES_FIRST = f"""reduce(acc = {{cited: [], first: [], later: []}}, h IN pool |
    CASE WHEN size(acc.first) >= $limit THEN acc
    ELSE reduce(a = acc, turns IN [{_shown_turns("h.f")}] |
        CASE WHEN size(turns) > 0 AND all(t IN turns WHERE t IN a.cited)
             THEN {{cited: a.cited, first: a.first, later: a.later + [h]}}
             ELSE {{cited: a.cited + turns, first: a.first + [h], later: a.later}} END) END)"""
# The pool: every listed or expanded fact once, scored as fused plus its best seed's share as a
# block neighbour and its best seed's share as a dossier mate (a fact in no list starts at 0),
# ordered; only the first ``$limit`` facts' fields
# travel, and only their dossiers' headers are read.
FACT_RANK_POOL = f"""
  UNWIND [x IN fused | {{id: x.id, fused: x.score}}]
       + [h IN dense | {{id: h.f.id, f: h.f, dossier_id: h.dossier_id, list: 'dense', cosine: h.score}}]
       + [h IN named | {{id: h.f.id, f: h.f, dossier_id: h.dossier_id, list: 'name', cosine: h.score}}]
       + [h IN text | {{id: h.f.id, f: h.f, dossier_id: h.dossier_id, list: 'text'}}]
       + [h IN feedback | {{id: h.f.id, f: h.f, dossier_id: h.dossier_id, list: 'feedback'}}]
       + [n IN neighbours | {{id: n.f.id, f: n.f, dossier_id: n.dossier_id, list: 'block',
                              boost: n.boost}}]
       + [m IN mates | {{id: m.f.id, f: m.f, dossier_id: m.dossier_id, list: 'dossier',
                         boost: m.boost}}] AS row
  WITH row.id AS id, collect(row) AS rows
  WITH id, [r IN rows WHERE r.f IS NOT NULL][0] AS first, [r IN rows | r.list] AS lists,
       coalesce([r IN rows WHERE r.fused IS NOT NULL][0].fused, 0.0) AS base,
       reduce(b = 0.0, r IN rows | CASE WHEN r.list = 'block' AND r.boost > b THEN r.boost ELSE b END)
           AS boost,
       reduce(b = 0.0, r IN rows | CASE WHEN r.list = 'dossier' AND r.boost > b THEN r.boost ELSE b END)
           AS mate,
       [r IN rows WHERE r.list IN ['dense', 'name'] | r.cosine][0] AS cosine
  WITH id, first, first.f AS f, cosine,
       [m IN ['dense', 'name', 'text', 'feedback', 'block', 'dossier'] WHERE m IN lists] AS matched,
       base + boost + mate AS score
  ORDER BY score DESC, id
  WITH collect({{f: f, dossier_id: first.dossier_id, score: score, cosine: cosine, matched: matched}}) AS pool
  WITH size(pool) AS total,
       CASE WHEN $distinct_sources THEN {_NEW_SOURCES_FIRST} ELSE {{first: pool, later: []}} END AS parts
  WITH total, (parts.first + parts.later)[..$limit] AS top
  RETURN total, [h IN top | h {{.dossier_id, .score, .cosine, .matched}}] AS ranked,
         [f IN [h IN top | h.f] | {_FACT_HIT_FIELDS}] AS facts, top
"""
# The headers of the returned facts' dossiers (``DOSSIER_HEADER_ROW``, as a dossier search gives
# them), from the view's groups rather than a second walk over each dossier's facts: a returned
# fact's dossier is one of the view's (its pair was admitted), whose pass already counted the
# dossier's visible facts (``visible``: the vertex ACL and the edge rule, the count a header
# shows) and kept those the caller may also read (``seen``: its ``quotable``). Only
# the stored count is read here, and the quotable facts are ordered only when some are hidden.
FACT_DOSSIER_HEADERS = f"""
  UNWIND [h IN top | h.dossier_id] AS did
  WITH DISTINCT did
  UNWIND [g IN groups WHERE g.d.id = did] AS g
  WITH g.d AS d, g.visible AS visible_count, size(g.seen) AS quotable_count, g.seen AS seen
  WITH d, visible_count, quotable_count, seen, COUNT {{ (d)-[:HAS_FACT]->(:Fact) }} AS stored
  CALL (seen, quotable_count, stored) {{
    UNWIND CASE WHEN quotable_count < stored THEN seen ELSE [] END AS f
    WITH f ORDER BY {_ADDED_AT_SHOWN}, f.id
    RETURN collect(f) AS quotable
  }}
  RETURN collect({DOSSIER_HEADER_ROW}) AS headers
"""


def fact_search_query(dense: str) -> str:
    """The view (BM25's statistics, the centred query), both ranked lists, the seeds' block
    neighbours, the ranked pool and its headers: one round trip. ``dense`` is
    ``FACT_DENSE_FROM_INDEX`` or ``FACT_DENSE_EXACT``."""
    return (
        f"CALL () {{{FACT_VIEW}}}\n"
        f"CALL (qvec, candidates) {{{dense}}}\nCALL (n, avgdl, candidates) {{{FACT_FULLTEXT}}}\n"
        f"CALL (qvec, dense, candidates) {{{FACT_FEEDBACK}}}\n"
        f"CALL (dense, named, text, feedback) {{{FACT_FUSE}}}\n"
        f"CALL (fused, candidates) {{{FACT_BLOCK_NEIGHBOURS}}}\n"
        f"CALL (fused, candidates) {{{FACT_DOSSIER_MATES}}}\n"
        f"CALL (dense, named, text, feedback, fused, neighbours, mates) {{{FACT_RANK_POOL}}}\n"
        f"CALL (top, groups) {{{FACT_DOSSIER_HEADERS}}}\n"
        "RETURN dense_fetched, dense_count,\n"
        "       total, ranked, facts, headers"
    )


FACT_SEARCH = fact_search_query(FACT_DENSE_FROM_INDEX)
FACT_SEARCH_EXACT = fact_search_query(FACT_DENSE_EXACT)
