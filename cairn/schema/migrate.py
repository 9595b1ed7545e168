"""Create what the schema needs (constraints, indexes, vector indexes) and record its version.

neomodel installs labels from the node classes; it treats "already exists" as success,
so running this twice is a no-op. The version node lets the service refuse to start on a
database whose schema is older than the code.
"""

from __future__ import annotations

import io
import json
import secrets

from neo4j import Driver, Record
from neomodel import db as neomodel_db

from cairn.schema.keys import LOCK_ID, TAKE_SECRET, keyed_with, unkeyed
from cairn.schema.nodes import EMBEDDING_DIMENSIONS, MACHINERY_CLASSES, NODE_CLASSES, vector_index_name

SCHEMA_VERSION = 11  # 2: uniqueness constraints on the lock and version nodes; 3: Fact.text full-text;
# 4: the Section vector index without quantization (SECTION_INDEX_CONFIG); 5: the Fact one too;
# 6: Section.source indexed (every correspondence write reads its source under one lock);
# 7: sections embedded without knowledge and section references (section_text.embeddable_text);
# 8: journal sessions no longer named after their time (RENAME_TIME_NAMED_SESSIONS);
# 9: the journal ids of links, merges and splits keyed with the database's secret (rekey_curation);
# 10: sections embedded from their text closed up as the mask shows it (review pass 16);
# 11: the same inside block quotes (red-team pass 17: an empty `>` line a stripped decision left)

# Sections embedded before schema 7 were embedded from text a role's mask may strip, before 11 from
# that text with the gaps the strip left (a stray `.`, a leading blank line, an empty `>` line): marked as
# embedded by no model, so `cairn correspondence reembed` (which `cairn db migrate` runs when any
# are marked) embeds them again.
SECTION_TEXT_VERSION = 11
# Their old vectors go at once (out of the vector index and every exact score): until re-embedded
# the marked sections are found by no search, and `cairn serve` refuses to start.
MARK_SECTIONS_STALE = """
MATCH (s:Section) WHERE s.embedding_model IS NOT NULL SET s.embedding_model = null REMOVE s.embedding
"""
COUNT_UNEMBEDDED_SECTIONS = "MATCH (s:Section) WHERE s.embedding_model IS NULL RETURN count(s) AS n"

# Before schema 8 the factor journal named a session it opened after its first entry's time
# (``session-YYYYmmddHHMMSS-xxxxxx``), and a session's id shows wherever the session does, the
# entry's time only where its rule shows it. Such sessions are renamed at random, as the journal
# names them now (cairn/memory/factors/journal.py), and so is each entry's copy of the id. A
# session is the journal's when its id's digits are its own start within two seconds (the id was
# stamped just before the write took its lock); an id a client chose in that form, for another
# moment, stays the client's, whose later writes name it.
TIME_NAMED_SESSIONS_BEFORE = 8
RENAME_TIME_NAMED_SESSIONS = """
MATCH (s:Session) WHERE s.id =~ 'session-[0-9]{14}-[0-9a-f]{6}' AND s.started_at IS NOT NULL
WITH s, [d IN range(-2, 2) | s.started_at + duration({seconds: d})] AS near
WHERE any(c IN near WHERE substring(s.id, 8, 14) = toString(c.year)
  + right('0' + toString(c.month), 2) + right('0' + toString(c.day), 2)
  + right('0' + toString(c.hour), 2) + right('0' + toString(c.minute), 2)
  + right('0' + toString(c.second), 2))
WITH s, s.id AS old, 'session-' + substring(replace(randomUUID(), '-', ''), 0, 16) AS new
SET s.id = new
WITH old, new
CALL (old, new) {
  MATCH (e:JournalEntry {session_id: old})
  SET e.session_id = new
}
"""

# Before schema 9 a link's or a merge's journal ids were an unkeyed hash of the pair
# (``je-<sha256("link", a, b)>-<seq>``) and a split's ``je-split-<hash>-<seq>``: a reader whose
# rules hide an entry's ``op`` computed them, or read "split". They are re-keyed as the code keys
# them now (cairn/schema/keys.py), so linking or merging the same pair again is still recognised
# as done; a split's key only marks that one split applied, so any keyed value serves. (Ids
# of dossiers a split made, ``dos-split-<hash>-<n>``, stay: a dossier id is a caller's handle.)
# An archive's was ``je-<sha256("archive", dossier, time)>-0`` until the keyed ids (its entry's
# time and dossier told it), now a random key: re-keyed too, by its key and the secret.
UNKEYED_BEFORE = 9
CURATION_UNITS = """
MATCH (j:JournalEntry) WHERE j.op IN ['linked', 'merged', 'split', 'archived'] AND j.work_key IS NOT NULL
OPTIONAL MATCH (j)-[:ABOUT]->(d:Dossier) WHERE j.op = 'archived'
RETURN DISTINCT j.work_key AS key, j.op AS op, j.details AS details, d.id AS dossier, j.timestamp AS at
"""
# By the id's index (``je-<key>-<seq>``); ``work_key`` has none, and a scan of every entry per
# unit is quadratic in a large journal.
REKEY_UNITS = """
UNWIND $keys AS k
MATCH (j:JournalEntry) WHERE j.id STARTS WITH 'je-' + k.old + '-' AND j.work_key = k.old
SET j.id = 'je-' + k.new + '-' + toString(j.seq), j.work_key = k.new
"""


def _rekeyed(secret: str, unit: Record) -> str | None:
    """The keyed key of a curation unit (a ``CURATION_UNITS`` row); None when it is keyed already."""
    key, op, details = str(unit["key"]), str(unit["op"]), unit["details"]
    if op == "split":
        return keyed_with(secret, "split", key) if key.startswith("split-") else None
    if op == "archived":
        at = unit["at"].to_native().isoformat() if unit["at"] is not None else ""
        return (
            keyed_with(secret, "archive", key)
            if unkeyed("archive", str(unit["dossier"]), at) == key
            else None
        )
    said = json.loads(details or "{}")
    parts = (
        ("link", *said.get("dossiers", ()))
        if op == "linked"
        else ("merge", said.get("source", ""), said.get("target", ""))
    )
    return keyed_with(secret, *parts) if unkeyed(*parts) == key else None


def rekey_curation(driver: Driver) -> int:
    """Re-key the journal ids of links, merges and splits written before schema 9; return how
    many units were re-keyed."""
    taken, _, _ = driver.execute_query(TAKE_SECRET, lock=LOCK_ID, fresh=secrets.token_hex(32))
    secret = str(taken[0]["secret"])
    records, _, _ = driver.execute_query(CURATION_UNITS)
    keys = [{"old": r["key"], "new": new} for r in records if (new := _rekeyed(secret, r)) is not None]
    if keys:
        driver.execute_query(REKEY_UNITS, keys=keys)
    return len(keys)


SHOW_CONSTRAINTS = "SHOW CONSTRAINTS YIELD name RETURN name"
SHOW_INDEXES = "SHOW INDEXES YIELD name RETURN name"
RECORD_VERSION = "MERGE (m:CairnSchema {id: 'schema'}) SET m.version = $version"
READ_VERSION = "MATCH (m:CairnSchema {id: 'schema'}) RETURN m.version AS version"
AWAIT_INDEXES = "CALL db.awaitIndexes(300)"

# Correspondence search reads the Section index's neighbours as candidates and re-scores them
# exactly (docs/design.md §Correspondence, "Search at index speed"); with full floats it finds
# them (recall@10 1.000 for both roles at 100k sections, 0.993 quantized: bench/correspondence_search.py).
SECTION_INDEX = vector_index_name("Section")
SECTION_INDEX_CONFIG: dict[str, object] = {
    "vector.quantization.enabled": False,
    "vector.hnsw.m": 16,
    "vector.hnsw.ef_construction": 100,
}


def _read_index(name: str) -> str:
    return (
        f"SHOW VECTOR INDEXES YIELD name, options WHERE name = '{name}' RETURN options.indexConfig AS config"
    )


def _create_index(label: str, name: str) -> str:
    return f"""
CREATE VECTOR INDEX {name} IF NOT EXISTS FOR (n:{label}) ON n.embedding
OPTIONS {{indexConfig: {{
  `vector.dimensions`: {EMBEDDING_DIMENSIONS},
  `vector.similarity_function`: 'cosine',
  `vector.quantization.enabled`: false,
  `vector.hnsw.m`: {SECTION_INDEX_CONFIG["vector.hnsw.m"]},
  `vector.hnsw.ef_construction`: {SECTION_INDEX_CONFIG["vector.hnsw.ef_construction"]}
}}}}
"""


READ_SECTION_INDEX = _read_index(SECTION_INDEX)
DROP_SECTION_INDEX = f"DROP INDEX {SECTION_INDEX} IF EXISTS"
CREATE_SECTION_INDEX = _create_index("Section", SECTION_INDEX)
# Fact search takes the Fact index's own scores as the dense list's cosines without reading the
# candidates' vectors again (docs/design.md §Dossier queries): with full floats the index score is
# the exact cosine; quantized, it was not, and every candidate's vector was read to re-score it.
FACT_INDEX = vector_index_name("Fact")
READ_FACT_INDEX = _read_index(FACT_INDEX)
DROP_FACT_INDEX = f"DROP INDEX {FACT_INDEX} IF EXISTS"
CREATE_FACT_INDEX = _create_index("Fact", FACT_INDEX)
# The full-float vector indexes (SECTION_INDEX_CONFIG): name, read its config, drop, create. Each
# is created before neomodel installs the labels, which would create the default (quantized) one.
FULL_FLOAT_INDEXES = (
    (SECTION_INDEX, READ_SECTION_INDEX, DROP_SECTION_INDEX, CREATE_SECTION_INDEX),
    (FACT_INDEX, READ_FACT_INDEX, DROP_FACT_INDEX, CREATE_FACT_INDEX),
)


def _schema_names(driver: Driver) -> set[str]:
    names: set[str] = set()
    for query in (SHOW_CONSTRAINTS, SHOW_INDEXES):
        records, _, _ = driver.execute_query(query)
        names.update(str(r["name"]) for r in records)
    return names


def migrate(driver: Driver) -> list[str]:
    """Install every missing constraint and index; return the names that were created. Sections
    of a database older than SECTION_TEXT_VERSION are marked for re-embedding, and sessions named
    after their time (older than TIME_NAMED_SESSIONS_BEFORE) renamed, and the journal ids of
    links, merges and splits (older than UNKEYED_BEFORE) keyed."""
    previous = schema_version(driver)
    before = _schema_names(driver)
    for name, read, drop, create in FULL_FLOAT_INDEXES:
        if _index_outdated(driver, read):
            driver.execute_query(drop)
            before.discard(name)
        driver.execute_query(create)
    neomodel_db.set_connection(driver=driver)
    sink = io.StringIO()
    for cls in (*NODE_CLASSES, *MACHINERY_CLASSES):
        neomodel_db.install_labels(cls, quiet=True, stdout=sink)
    if previous is not None and previous < SECTION_TEXT_VERSION:
        driver.execute_query(MARK_SECTIONS_STALE)
    if previous is not None and previous < TIME_NAMED_SESSIONS_BEFORE:
        driver.execute_query(RENAME_TIME_NAMED_SESSIONS)
    if previous is not None and previous < UNKEYED_BEFORE:
        rekey_curation(driver)
    driver.execute_query(RECORD_VERSION, version=SCHEMA_VERSION)
    driver.execute_query(AWAIT_INDEXES)
    return sorted(_schema_names(driver) - before)


def _index_outdated(driver: Driver, read: str) -> bool:
    """Whether a full-float vector index exists with other settings than SECTION_INDEX_CONFIG (a
    database from before schema 4, or 5 for the Fact index): it is then rebuilt, re-reading every node."""
    records, _, _ = driver.execute_query(read)
    if not records:
        return False
    config = dict(records[0]["config"] or {})
    return any(config.get(key) != value for key, value in SECTION_INDEX_CONFIG.items())


def sections_to_reembed(driver: Driver) -> int:
    """How many sections are marked as embedded by no model (``MARK_SECTIONS_STALE``)."""
    records, _, _ = driver.execute_query(COUNT_UNEMBEDDED_SECTIONS)
    return int(records[0]["n"])


def schema_version(driver: Driver) -> int | None:
    records, _, _ = driver.execute_query(READ_VERSION)
    return int(records[0]["version"]) if records else None


def probe_schema_version(driver: Driver) -> int | None:
    """``schema_version`` for the service's readiness probe: one auto-commit read, never retried,
    since a probe must answer now, not after the driver's managed-transaction retries
    (CAIRN_NEO4J_RETRY_S) against a server that is down."""
    with driver.session() as session:
        record = session.run(READ_VERSION).single()
    return int(record["version"]) if record else None
