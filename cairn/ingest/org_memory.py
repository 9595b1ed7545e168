"""Write a validated org-memory fixture set: vertices → transitions → alias overlays.

Every write is an UNWIND over a batch, one managed transaction per batch (retried by
the driver on transient errors). MERGE on ``id`` with ``SET +=`` makes a second run a
no-op, and a run killed mid-way is completed by running it again.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neo4j import Driver, ManagedTransaction

from cairn.ingest.fixtures import (
    FixtureError,
    FixtureSet,
    Problem,
    check_references,
    parse_fixture_dir,
    parse_payload,
)
from cairn.ingest.records import DecisionRecord, EventRecord, iso_utc
from cairn.runtime.embedder import Embedder, get_embedder

BATCH_SIZE = 500

FIND_LABELS = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, [l IN labels(n) WHERE l <> 'Entity'][0] AS label
"""

STORED_EMBEDDINGS = """
UNWIND $ids AS id
MATCH (n:Entity {id: id})
RETURN n.id AS id, n.embedding_model AS model, n.embedding_text_sha AS sha
"""

STORED_CAUSAL = "MATCH (a:Entity)-[:CAUSAL_PRECEDES]->(b:Entity) RETURN a.id AS a, b.id AS b"

UPSERT_DECISIONS = """
UNWIND $rows AS row
MERGE (n:Entity:Decision {id: row.id})
ON CREATE SET n.created_at = datetime()
SET n += row.props, n.timestamp = datetime(row.timestamp)
"""

UPSERT_EVENTS = """
UNWIND $rows AS row
MERGE (n:Entity:Event {id: row.id})
ON CREATE SET n.created_at = datetime()
SET n += row.props, n.timestamp = datetime(row.timestamp)
"""

UPSERT_CAUSAL = """
UNWIND $rows AS row
MATCH (a:Entity {id: row.from_id})
MATCH (b:Entity {id: row.to_id})
MERGE (a)-[r:CAUSAL_PRECEDES]->(b)
SET r += row.props, r.timestamp = CASE WHEN row.timestamp IS NULL THEN null
                                       ELSE datetime(row.timestamp) END
"""

UPSERT_ALIASES = """
UNWIND $rows AS row
MATCH (d:Decision {id: row.decision_id})
MATCH (e:Event {id: row.event_id})
MERGE (d)-[r:ALIAS_OF]->(e)
SET r += row.props
"""

Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class IngestReport:
    decisions: int
    events: int
    causal_edges: int
    aliases: int


def _access(r: Any) -> dict[str, Any]:
    return {
        "domain": r.domain,
        "sensitivity": r.sensitivity,
        "namespaces": list(r.namespaces),
        "roles_allowed": list(r.roles_allowed),
        "x_extra": json.dumps(r.x_extra, sort_keys=True),
        "tags": list(r.tags),
        "importance": r.importance,
    }


def decision_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "id": d.id,
            "timestamp": iso_utc(d.timestamp),
            "props": {
                **_access(d),
                "option": d.option,
                "rationale": d.rationale,
                "decision_maker": d.decision_maker,
            },
        }
        for d in fs.decisions
    ]


def event_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "id": e.id,
            "timestamp": iso_utc(e.timestamp),
            "props": {
                **_access(e),
                "summary": e.summary,
                "description": e.description,
                "snippet": e.snippet,
                "alias_of_decision": e.alias_of_decision,
            },
        }
        for e in fs.events
    ]


def causal_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "from_id": e.from_id,
            "to_id": e.to_id,
            "timestamp": e.timestamp,
            "props": {
                "id": e.id,
                "relation": e.relation,
                "relations": list(e.relations),
                "reason": e.reason,
                "domain": e.domain,
                "x_extra": json.dumps(e.x_extra, sort_keys=True),
            },
        }
        for e in fs.causal_edges()
    ]


def alias_rows(fs: FixtureSet) -> list[dict[str, Any]]:
    return [
        {
            "decision_id": a.decision_id,
            "event_id": a.event_id,
            "props": {
                "id": a.id,
                "scope": a.scope,
                "domain_from": a.domain_from,
                "domain_to": a.domain_to,
                "x_extra": json.dumps(a.x_extra, sort_keys=True),
            },
        }
        for a in fs.aliases
    ]


def _referenced_ids(fs: FixtureSet) -> set[str]:
    refs: set[str] = set()
    for d in fs.decisions:
        refs.update(d.supported_by, d.based_on, d.led_to)
    for e in fs.events:
        refs.update(e.led_to)
        if e.alias_of_decision:
            refs.add(e.alias_of_decision)
    for t in fs.transitions:
        refs.update((t.from_id, t.to_id))
    for a in fs.aliases:
        refs.update((a.decision_id, a.event_id))
    return refs


def stored_labels(driver: Driver, ids: Iterable[str]) -> dict[str, str]:
    """Label of each given id already in the database (ids not stored are absent)."""
    records, _, _ = driver.execute_query(FIND_LABELS, ids=sorted(set(ids)))
    return {str(r["id"]): str(r["label"]) for r in records}


def stored_causal_edges(driver: Driver) -> list[tuple[str, str]]:
    """Every stored cause → effect pair (org scale: thousands), for the acyclicity check."""
    records, _, _ = driver.execute_query(STORED_CAUSAL)
    return [(str(r["a"]), str(r["b"])) for r in records]


def validate_against_store(driver: Driver, fs: FixtureSet) -> None:
    """Cross-checks that need the database: references to stored nodes, label clashes."""
    own = {d.id: "Decision" for d in fs.decisions} | {e.id: "Event" for e in fs.events}
    stored = stored_labels(driver, _referenced_ids(fs) | set(own))
    problems = [
        Problem(fs.origin[rid], rid, "id", f"already stored as a {stored[rid]}, not a {label}")
        for rid, label in own.items()
        if rid in stored and stored[rid] != label
    ]
    problems += check_references(
        fs, {k: v for k, v in stored.items() if k not in own}, stored_causal_edges(driver)
    )
    if problems:
        raise FixtureError(problems)


def _batches(rows: Sequence[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    for i in range(0, len(rows), BATCH_SIZE):
        yield list(rows[i : i + BATCH_SIZE])


def _write(
    driver: Driver, query: str, rows: Sequence[dict[str, Any]], stage: str, progress: Progress | None
) -> None:
    def work(tx: ManagedTransaction, batch: list[dict[str, Any]]) -> None:
        tx.run(query, rows=batch).consume()

    with driver.session() as session:
        for batch in _batches(rows):
            session.execute_write(work, batch)
            if progress:
                progress(stage, len(batch))


def decision_text(d: DecisionRecord) -> str:
    return f"{d.option}. {d.rationale}".strip()


def event_text(e: EventRecord) -> str:
    return f"{e.summary}. {e.description}".strip()


def _embed_rows(driver: Driver, rows: list[dict[str, Any]], texts: list[str], embedder: Embedder) -> None:
    """Attach embeddings in one batch per kind, only where the stored one is stale.

    A vector is reused when the node already holds one made by the same model from the same
    text (sha256 kept in ``embedding_text_sha``): re-running an ingest, or resuming one that
    was killed, costs a lookup instead of the model.
    """
    shas = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    records, _, _ = driver.execute_query(STORED_EMBEDDINGS, ids=[r["id"] for r in rows])
    stored = {r["id"]: (r["model"], r["sha"]) for r in records}
    stale = [i for i, row in enumerate(rows) if stored.get(row["id"]) != (embedder.name, shas[i])]
    for i, vector in zip(stale, embedder.embed([texts[i] for i in stale]), strict=True):
        rows[i]["props"]["embedding"] = [float(x) for x in vector]
        rows[i]["props"]["embedding_model"] = embedder.name
        rows[i]["props"]["embedding_text_sha"] = shas[i]


def write_fixture_set(
    driver: Driver, fs: FixtureSet, progress: Progress | None = None, embedder: Embedder | None = None
) -> IngestReport:
    """Write a set that passed validation, in the order vertices → transitions → aliases."""
    validate_against_store(driver, fs)
    decisions, events = decision_rows(fs), event_rows(fs)
    embedder = embedder or get_embedder()
    _embed_rows(driver, decisions, [decision_text(d) for d in fs.decisions], embedder)
    _embed_rows(driver, events, [event_text(e) for e in fs.events], embedder)
    causal, aliases = causal_rows(fs), alias_rows(fs)
    _write(driver, UPSERT_DECISIONS, decisions, "decisions", progress)
    _write(driver, UPSERT_EVENTS, events, "events", progress)
    _write(driver, UPSERT_CAUSAL, causal, "transitions", progress)
    _write(driver, UPSERT_ALIASES, aliases, "aliases", progress)
    return IngestReport(len(decisions), len(events), len(causal), len(aliases))


def ingest_payload(driver: Driver, payload: Any) -> IngestReport:
    """Validate and write records sent as one JSON object (the writer role's GraphQL upsert)."""
    fs, problems = parse_payload(payload)
    if problems:
        raise FixtureError(problems)
    return write_fixture_set(driver, fs)


def ingest_fixture_dir(driver: Driver, root: Path, progress: Progress | None = None) -> IngestReport:
    """Validate every file of ``root`` (raising FixtureError, nothing written) then write it."""
    fs, problems = parse_fixture_dir(root)
    if problems:
        raise FixtureError(problems)
    return write_fixture_set(driver, fs, progress)
