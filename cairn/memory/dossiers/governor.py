"""The dossier governor (note 000 Phase 3): route a fact packet into a dossier, whole or not at all.

``process_fact_packet`` embeds the packet's facts in one batch, then runs ONE write
transaction that: takes the routing lock (see ``lock``), checks whether this packet was
applied before (its idempotency key), votes with every fact in one round trip (see
``voting``), applies the append-or-create rule (optionally an LLM adjudicator's verdict),
drops near-duplicates of facts already in the target dossier, writes the dossier and its
facts, recomputes the extractive summary and journals every change. A failure anywhere
rolls all of it back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from neo4j import Driver, ManagedTransaction
from numpy.typing import NDArray

from cairn.memory.dossiers.adjudicator import Adjudicator
from cairn.memory.dossiers.journal import Entry, applied_to, write_entries
from cairn.memory.dossiers.lock import RoutingLock, ensure_lock_schema
from cairn.memory.dossiers.models import FactPacket, InputError, Problem, parse_packet
from cairn.memory.dossiers.summary import extractive_summary
from cairn.memory.dossiers.voting import Candidate, Decision, decide, run_vote, tally
from cairn.runtime.embedder import DIMENSIONS, Embedder, get_embedder

DEDUP_COSINE = 0.92  # at or above this a fact restates one already in the dossier
EMBED_CHUNK = 256  # facts embedded per batch when ingesting many packets

TARGET_FACTS = """
MATCH (d:Dossier {id: $id})
OPTIONAL MATCH (d)-[:HAS_FACT]->(f:Fact)
WITH d, f ORDER BY f.added_at, f.id
RETURN d.summary AS summary,
       collect(CASE WHEN f IS NULL THEN null ELSE {id: f.id, text: f.text, embedding: f.embedding} END)
         AS facts
"""

WRITE_DOSSIER_AND_FACTS = """
MERGE (d:Entity:Dossier {id: $dossier_id})
ON CREATE SET d += $create_props, d.created_at = datetime($now)
SET d.summary = $summary, d.last_updated = datetime($now)
WITH d
OPTIONAL MATCH (b:Block {block_id: $block_id})
WITH d, b
UNWIND $facts AS row
MERGE (f:Entity:Fact {id: row.id})
ON CREATE SET f.created_at = datetime($now)
SET f += row.props, f.added_at = datetime($now), f.observed_at = datetime($observed_at)
MERGE (d)-[:HAS_FACT]->(f)
FOREACH (_ IN CASE WHEN b IS NULL THEN [] ELSE [1] END | MERGE (f)-[:FROM_BLOCK]->(b))
"""


@dataclass(frozen=True)
class SkippedFact:
    text: str
    duplicate_of: str
    similarity: float


@dataclass(frozen=True)
class RoutingResult:
    dossier_id: str
    action: Literal["created", "appended", "already_applied"]
    packet_key: str
    added: tuple[str, ...] = ()
    skipped: tuple[SkippedFact, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    decision: Decision | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "dossier_id": self.dossier_id,
            "action": self.action,
            "packet_key": self.packet_key,
            "added": list(self.added),
            "skipped": [
                {"text": s.text, "duplicate_of": s.duplicate_of, "similarity": round(s.similarity, 4)}
                for s in self.skipped
            ],
            "candidates": [c.as_json() for c in self.candidates],
            "decision": None if self.decision is None else self.decision.as_json(),
        }


@dataclass
class _Target:
    dossier_id: str
    created: bool
    summary: str = ""
    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    vectors: list[NDArray[np.float32]] = field(default_factory=list)


@dataclass(frozen=True)
class _Preset:
    """An adjudicator's verdict reached before the lock, and the vote it was based on."""

    candidate_ids: tuple[str, ...]
    decision: Decision


def fact_id(key: str, index: int) -> str:
    return f"fact-{key}-{index}"


def dossier_id_for(key: str) -> str:
    return f"dos-{key}"


def _as_packet(packet: FactPacket | Mapping[str, Any]) -> FactPacket:
    return packet if isinstance(packet, FactPacket) else parse_packet(dict(packet))


def _checked_vectors(packet: FactPacket, vectors: NDArray[np.float32]) -> NDArray[np.float32]:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.shape != (len(packet.facts), DIMENSIONS) or not np.isfinite(arr).all():
        raise InputError(
            "fact packet",
            [
                Problem(
                    "facts", f"expected {len(packet.facts)} finite {DIMENSIONS}-d vectors, got {arr.shape}"
                )
            ],
        )
    return arr


def _read_vote(tx: ManagedTransaction, vectors: NDArray[np.float32], packet: FactPacket) -> list[Candidate]:
    hits, titles = run_vote(tx, vectors, packet.access)
    return tally(hits, titles)


def preview_route(
    driver: Driver, packet: FactPacket | Mapping[str, Any], embedder: Embedder | None = None
) -> tuple[list[Candidate], Decision]:
    """Where the packet would go now (read-only): the vote and the rule's decision."""
    packet = _as_packet(packet)
    vectors = (embedder or get_embedder()).embed([f.text for f in packet.facts])
    with driver.session() as session:
        candidates = session.execute_read(_read_vote, vectors, packet)
    return candidates, decide(candidates, len(packet.facts))


def find_candidate_dossiers(
    driver: Driver, facts: Sequence[str], top_k: int = 5, embedder: Embedder | None = None
) -> list[Candidate]:
    """Note 000's ``_find_candidate_dossiers``: the vote for these facts, best first (default access)."""
    packet = parse_packet({"cluster_label": "candidates", "facts": list(facts), "source_block_id": "-"})
    candidates, _ = preview_route(driver, packet, embedder)
    return candidates[:top_k]


def process_fact_packet(
    driver: Driver,
    packet: FactPacket | Mapping[str, Any],
    *,
    embedder: Embedder | None = None,
    adjudicator: Adjudicator | None = None,
    vectors: NDArray[np.float32] | None = None,
) -> RoutingResult:
    """Route one packet; return where it went. Raises ``InputError`` (nothing written) on bad input.

    ``vectors`` lets a batch caller pass embeddings it computed for many packets at once.
    With an ``adjudicator`` the vote is also run before the lock, so that a slow LLM call
    never holds the lock; its verdict is used only if the vote under the lock agrees with it
    (same candidates), otherwise the rule decides on the fresh vote.
    """
    packet = _as_packet(packet)
    model = embedder or get_embedder()
    if vectors is None:
        vectors = model.embed([f.text for f in packet.facts])
    vectors = _checked_vectors(packet, vectors)
    ensure_lock_schema(driver)
    preset: _Preset | None = None
    if adjudicator is not None:
        with driver.session() as session:
            candidates = session.execute_read(_read_vote, vectors, packet)
        verdict = adjudicator.decide(packet, candidates, decide(candidates, len(packet.facts)))
        preset = _Preset(tuple(c.dossier_id for c in candidates), verdict)
    with driver.session() as session:
        return session.execute_write(_apply, packet, vectors, model.name, preset)


def _decide_under_lock(candidates: list[Candidate], n_facts: int, preset: _Preset | None) -> Decision:
    rule = decide(candidates, n_facts)
    if preset is None:
        return rule
    if preset.candidate_ids == tuple(c.dossier_id for c in candidates):
        return preset.decision
    return Decision(
        rule.action,
        rule.target,
        f"{rule.reason} (adjudication set aside: the candidates changed before the lock was taken)",
    )


def _load_target(tx: ManagedTransaction, dossier_id: str) -> _Target:
    record = tx.run(TARGET_FACTS, id=dossier_id).single(strict=True)
    target = _Target(dossier_id, created=False, summary=record["summary"] or "")
    for f in record["facts"]:
        target.ids.append(f["id"])
        target.texts.append(f["text"])
        target.vectors.append(np.asarray(f["embedding"], dtype=np.float32))
    return target


def _dedup(
    packet: FactPacket, vectors: NDArray[np.float32], key: str, target: _Target
) -> tuple[list[int], list[SkippedFact]]:
    """Indexes of the packet facts to store, and the near-duplicates left out.

    A fact is a duplicate when its cosine to a fact already in the dossier, or to an earlier
    fact of the same packet, is at least ``DEDUP_COSINE``.
    """
    known_ids = list(target.ids)
    known = list(target.vectors)
    kept: list[int] = []
    skipped: list[SkippedFact] = []
    for i, vec in enumerate(vectors):
        if known:
            sims = np.stack(known) @ vec
            j = int(np.argmax(sims))
            if float(sims[j]) >= DEDUP_COSINE:
                skipped.append(SkippedFact(packet.facts[i].text, known_ids[j], float(sims[j])))
                continue
        kept.append(i)
        known_ids.append(fact_id(key, i))
        known.append(vec)
    return kept, skipped


def _fact_rows(
    packet: FactPacket, vectors: NDArray[np.float32], key: str, kept: list[int], model: str
) -> list[dict[str, Any]]:
    rows = []
    for i in kept:
        f = packet.facts[i]
        rows.append(
            {
                "id": fact_id(key, i),
                "props": {
                    "text": f.text,
                    "fact_type": f.fact_type or "narrative",
                    "confidence": f.confidence,
                    "source_block_id": packet.source_block_id,
                    "source_turn_id": f.turn_id,
                    "turn_index": f.resolved_turn_index,
                    "embedding": [float(x) for x in vectors[i]],
                    "embedding_model": model,
                    "packet_key": key,
                    **packet.access.props(),
                },
            }
        )
    return rows


def _entries(
    packet: FactPacket,
    key: str,
    target: _Target,
    decision: Decision,
    candidates: list[Candidate],
    kept: list[int],
    skipped: list[SkippedFact],
    summary: str,
) -> list[Entry]:
    """The journal of one packet, in order: created | skips | summary change | facts added."""
    about = (target.dossier_id,)
    votes = [c.as_json() for c in candidates[:5]]
    entries: list[Entry] = []
    if target.created:
        entries.append(
            Entry(
                "created",
                about,
                new_value=packet.cluster_label,
                rationale=decision.reason,
                details={
                    "packet_key": key,
                    "source_block_id": packet.source_block_id,
                    "fact_ids": [fact_id(key, i) for i in kept],
                    "decision": decision.as_json(),
                    "votes": votes,
                },
            )
        )
    entries += [
        Entry(
            "fact_skipped",
            about,
            excerpt=s.text,
            rationale=f"near-duplicate (cosine {s.similarity:.3f}) of a fact already stored",
            details={"packet_key": key, "duplicate_of": s.duplicate_of, "similarity": round(s.similarity, 4)},
        )
        for s in skipped
    ]
    if not target.created and kept:
        if summary != target.summary:
            entries.append(
                Entry(
                    "summary_updated",
                    about,
                    previous_value=target.summary,
                    new_value=summary,
                    rationale=f"{len(kept)} fact(s) appended",
                    details={"packet_key": key},
                )
            )
        entries += [
            Entry(
                "fact_added",
                about,
                new_value=packet.facts[i].text,
                rationale=decision.reason,
                confidence=packet.facts[i].confidence,
                details={
                    "packet_key": key,
                    "fact_id": fact_id(key, i),
                    "source_block_id": packet.source_block_id,
                    "decision": decision.as_json(),
                    "votes": votes,
                },
            )
            for i in kept
        ]
    return entries


def _apply(
    tx: ManagedTransaction,
    packet: FactPacket,
    vectors: NDArray[np.float32],
    model: str,
    preset: _Preset | None,
) -> RoutingResult:
    """The whole packet in one transaction (re-run from the top by the driver on a transient error)."""
    lock = RoutingLock(tx)
    key = packet.key
    done = applied_to(tx, key)
    if done is not None:
        return RoutingResult(done, "already_applied", key)
    hits, titles = run_vote(tx, vectors, packet.access, lock.recent)
    candidates = tally(hits, titles)
    decision = _decide_under_lock(candidates, len(packet.facts), preset)
    if decision.action == "append" and decision.target is not None:
        target = _load_target(tx, decision.target)
    else:
        target = _Target(dossier_id_for(key), created=True)
    kept, skipped = _dedup(packet, vectors, key, target)
    texts = target.texts + [packet.facts[i].text for i in kept]
    matrix = np.stack(target.vectors + [vectors[i] for i in kept]) if texts else vectors[:0]
    summary = extractive_summary(texts, matrix)
    now = datetime.now(UTC).isoformat()
    if kept:
        tx.run(
            WRITE_DOSSIER_AND_FACTS,
            dossier_id=target.dossier_id,
            create_props={"title": packet.cluster_label, "status": "active", **packet.access.props()},
            summary=summary,
            now=now,
            observed_at=packet.observed_at.isoformat(),
            block_id=packet.source_block_id,
            facts=_fact_rows(packet, vectors, key, kept, model),
        ).consume()
    entries = _entries(packet, key, target, decision, candidates, kept, skipped, summary)
    write_entries(tx, key, entries, packet.access, now)
    if target.created:
        lock.remember([target.dossier_id])
    return RoutingResult(
        dossier_id=target.dossier_id,
        action="created" if target.created else "appended",
        packet_key=key,
        added=tuple(fact_id(key, i) for i in kept),
        skipped=tuple(skipped),
        candidates=tuple(candidates),
        decision=decision,
    )


Progress = Callable[[int], None]


def ingest_packets(
    driver: Driver,
    packets: Sequence[FactPacket],
    *,
    embedder: Embedder | None = None,
    adjudicator: Adjudicator | None = None,
    progress: Progress | None = None,
) -> list[RoutingResult]:
    """Route many packets, one transaction each, embedding the next batch while this one is written.

    Embedding (torch, GIL released) and routing (waiting on Neo4j) overlap in two threads, so
    throughput approaches that of embedding alone. Packets are applied in order.
    """
    model = embedder or get_embedder()
    chunks: list[list[FactPacket]] = []
    size = 0
    for p in packets:
        if not chunks or size + len(p.facts) > EMBED_CHUNK:
            chunks.append([])
            size = 0
        chunks[-1].append(p)
        size += len(p.facts)

    def embed(chunk: list[FactPacket]) -> NDArray[np.float32]:
        return model.embed([f.text for p in chunk for f in p.facts])

    results: list[RoutingResult] = []
    if not chunks:
        return results
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed") as pool:
        pending: Future[NDArray[np.float32]] = pool.submit(embed, chunks[0])
        for n, chunk in enumerate(chunks):
            matrix = pending.result()
            if n + 1 < len(chunks):
                pending = pool.submit(embed, chunks[n + 1])
            offset = 0
            for p in chunk:
                vecs = matrix[offset : offset + len(p.facts)]
                offset += len(p.facts)
                results.append(
                    process_fact_packet(driver, p, embedder=model, adjudicator=adjudicator, vectors=vecs)
                )
                if progress is not None:
                    progress(len(p.facts))
    return results
