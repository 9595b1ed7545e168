"""The dossier governor (note 000 Phase 3): route a fact packet into a dossier, whole or not at all.

``process_fact_packet`` embeds the packet's facts in one batch, then runs ONE write
transaction of four statements:

1. take the routing lock (see ``lock``) and check whether this packet was applied before
   (its idempotency key ``packet.key``);
2. vote with every fact in one round trip (see ``voting``) and apply the append-or-create
   rule (or an adjudicator's verdict);
3. write the dossier and the facts that are not near-duplicates (cosine >= 0.92) of a fact
   already in it or earlier in the packet, advance its centroid and re-choose its
   extractive summary (see ``summary``) — computed inside Neo4j, so no stored vector is
   read back;
4. journal every change (created / fact_skipped / summary_updated / fact_added).

A failure anywhere rolls all of it back: the dossier and its facts appear whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from neo4j import Driver, ManagedTransaction
from numpy.typing import NDArray

from cairn.memory.dossiers.adjudicator import Adjudicator
from cairn.memory.dossiers.journal import Entry, entry_id, write_entries
from cairn.memory.dossiers.lock import take_lock
from cairn.memory.dossiers.models import FactPacket, InputError, Problem, parse_packet
from cairn.memory.dossiers.summary import CENTRAL_FACTS, CENTROID_FROM_FACTS, SUMMARY_TEXT
from cairn.memory.dossiers.voting import (
    Candidate,
    Decision,
    decide,
    index_score,
    plain_cosine,
    run_vote,
    tally,
)
from cairn.policy.scope import Scope
from cairn.runtime.embedder import DIMENSIONS, Embedder, get_embedder

DEDUP_COSINE = 0.92  # at or above this a fact restates one already in the dossier
EMBED_CHUNK = 256  # facts embedded per batch when ingesting many packets

# The packet's facts into their dossier, in one statement and without reading any vector
# back: each fact is first compared (exact cosine) with the facts already in the dossier and
# left out if it restates one; the rest are written; the running centroid is advanced by the
# written facts (computed from the stored facts once, for a dossier that has none yet); and
# the summary is re-chosen around it. Returns what was kept, what was a duplicate of what, and
# the summary before and after.
WRITE_PACKET = f"""
MERGE (d:Entity:Dossier {{id: $dossier_id}})
ON CREATE SET d += $create_props, d.created_at = datetime($now), d.last_updated = datetime($now),
              d.summary = ''
WITH d, d.summary AS previous
OPTIONAL CALL (d) {{
  WITH d WHERE d.centroid_sum IS NULL
  {CENTROID_FROM_FACTS}
}}
WITH d, previous, coalesce(d.centroid_sum, centroid_sum) AS base
CALL (d) {{
  UNWIND $facts AS row
  OPTIONAL CALL (d, row) {{
    MATCH (d)-[:HAS_FACT]->(old:Fact)
    WHERE old.embedding IS NOT NULL
    WITH old, vector.similarity.cosine(old.embedding, row.props.embedding) AS score
    ORDER BY score DESC, old.id
    LIMIT 1
    RETURN old.id AS dup_id, score AS dup_score
  }}
  RETURN collect({{id: row.id, dup_id: dup_id, dup_score: dup_score}}) AS nearest
}}
WITH d, previous, base,
     [n IN nearest WHERE n.dup_score >= $dedup_score] AS duplicates,
     [n IN nearest WHERE n.dup_score IS NULL OR n.dup_score < $dedup_score | n.id] AS keep
WITH d, previous, base, duplicates, keep, [row IN $facts WHERE row.id IN keep] AS rows
OPTIONAL MATCH (b:Block {{block_id: $block_id}})
CALL (d, b, rows) {{
  UNWIND rows AS row
  MERGE (f:Entity:Fact {{id: row.id}})
  ON CREATE SET f.created_at = datetime($now)
  SET f += row.props, f.added_at = datetime($now), f.observed_at = datetime($observed_at)
  MERGE (d)-[:HAS_FACT]->(f)
  FOREACH (_ IN CASE WHEN b IS NULL THEN [] ELSE [1] END | MERGE (f)-[:FROM_BLOCK]->(b))
}}
WITH d, previous, duplicates, keep, [row IN rows | row.props.embedding] AS added, base
SET d.centroid_sum = reduce(acc = coalesce(base, [x IN added[0] | 0.0]), e IN added |
                              [i IN range(0, size(e) - 1) | acc[i] + e[i]]),
    d.last_updated = CASE WHEN size(keep) > 0 THEN datetime($now) ELSE d.last_updated END
WITH d, previous, duplicates, keep
CALL (d) {{
  {CENTRAL_FACTS}
}}
WITH d, previous, duplicates, keep, {SUMMARY_TEXT} AS summary
SET d.summary = summary
RETURN previous, summary, keep, duplicates
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


@dataclass(frozen=True)
class _Target:
    dossier_id: str
    created: bool


@dataclass(frozen=True)
class _Preset:
    """An adjudicator's verdict reached before the lock, and the vote it was based on."""

    candidate_ids: tuple[str, ...]
    decision: Decision


def fact_id(key: str, index: int) -> str:
    return f"fact-{key}-{index:03d}"  # zero-padded: ids sort in packet order


def dossier_id_for(key: str) -> str:
    return f"dos-{key}"


def _as_packet(packet: FactPacket | Mapping[str, Any]) -> FactPacket:
    return packet if isinstance(packet, FactPacket) else parse_packet(packet)


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


def read_vote(tx: ManagedTransaction, vectors: NDArray[np.float32], packet: FactPacket) -> list[Candidate]:
    hits, titles = run_vote(tx, vectors, packet.access)
    return tally(hits, titles)


def preview_route(
    driver: Driver, packet: FactPacket | Mapping[str, Any], embedder: Embedder | None = None
) -> tuple[list[Candidate], Decision]:
    """Where the packet would go now (read-only): the vote and the rule's decision."""
    packet = _as_packet(packet)
    vectors = (embedder or get_embedder()).embed([f.text for f in packet.facts])
    with driver.session() as session:
        candidates = session.execute_read(read_vote, vectors, packet)
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
    writer: Scope | None = None,
) -> RoutingResult:
    """Route one packet; return where it went. Raises ``InputError`` (nothing written) on bad input.

    ``writer`` is the scope of a caller writing on its own behalf (GraphQL): the packet's access
    fields must lie within it (``AccessRefused`` otherwise); operators (the CLI) pass none.
    ``vectors`` lets a batch caller pass embeddings it computed for many packets at once.
    With an ``adjudicator`` the vote is also run before the lock, so that a slow LLM call
    never holds the lock; its verdict is used only if the vote under the lock agrees with it
    (same candidates), otherwise the rule decides on the fresh vote.
    """
    packet = _as_packet(packet)
    packet.access.check_writer(writer, "fact packet")
    model = embedder or get_embedder()
    if vectors is None:
        vectors = model.embed([f.text for f in packet.facts])
    vectors = _checked_vectors(packet, vectors)
    preset: _Preset | None = None
    if adjudicator is not None:
        with driver.session() as session:
            candidates = session.execute_read(read_vote, vectors, packet)
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


def _dedup_in_packet(packet: FactPacket, vectors: NDArray[np.float32]) -> tuple[list[int], dict[int, int]]:
    """Facts of the packet that restate an earlier fact of the same packet: index -> earlier index."""
    kept: list[int] = []
    repeats: dict[int, int] = {}
    for i, vec in enumerate(vectors):
        sims = [(float(vectors[j] @ vec), j) for j in kept]
        best = max(sims, default=(-1.0, -1))
        if best[0] >= DEDUP_COSINE:
            repeats[i] = best[1]
        else:
            kept.append(i)
    return kept, repeats


def _skipped(
    packet: FactPacket,
    vectors: NDArray[np.float32],
    key: str,
    repeats: dict[int, int],
    duplicates: list[dict[str, Any]],
) -> list[SkippedFact]:
    """Every left-out fact with the stored fact it restates, in packet order.

    A fact repeating an earlier packet fact that was itself a duplicate of a stored fact
    points at that stored fact, so ``duplicate_of`` always names a fact that exists.
    """
    index_of = {fact_id(key, i): i for i in range(len(packet.facts))}
    stored = {d["id"]: (str(d["dup_id"]), plain_cosine(float(d["dup_score"]))) for d in duplicates}
    out: dict[int, SkippedFact] = {}
    for d in duplicates:
        i = index_of[d["id"]]
        out[i] = SkippedFact(packet.facts[i].text, *stored[d["id"]])
    for i, j in repeats.items():
        same = float(vectors[i] @ vectors[j])
        target = stored.get(fact_id(key, j), (fact_id(key, j), same))[0]
        out[i] = SkippedFact(packet.facts[i].text, target, same)
    return [out[i] for i in sorted(out)]


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
    summary: tuple[str, str],
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
    previous, current = summary
    if not target.created and kept:
        if current != previous:
            entries.append(
                Entry(
                    "summary_updated",
                    about,
                    previous_value=previous,
                    new_value=current,
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
    key = packet.key
    applied_to = take_lock(tx, entry_id(key, 0))
    if applied_to is not None:
        return RoutingResult(applied_to, "already_applied", key)
    hits, titles = run_vote(tx, vectors, packet.access)
    candidates = tally(hits, titles)
    decision = _decide_under_lock(candidates, len(packet.facts), preset)
    if decision.action == "append" and decision.target is not None:
        target = _Target(decision.target, created=False)
    else:
        target = _Target(dossier_id_for(key), created=True)
    candidate_facts, repeats = _dedup_in_packet(packet, vectors)
    now = datetime.now(UTC).isoformat()
    record = tx.run(
        WRITE_PACKET,
        dossier_id=target.dossier_id,
        create_props={"title": packet.cluster_label, "status": "active", **packet.access.props()},
        dedup_score=index_score(DEDUP_COSINE),
        now=now,
        observed_at=packet.observed_at,
        block_id=packet.source_block_id,
        facts=_fact_rows(packet, vectors, key, candidate_facts, model),
    ).single(strict=True)
    kept_ids = set(record["keep"])
    kept = [i for i in candidate_facts if fact_id(key, i) in kept_ids]
    skipped = _skipped(packet, vectors, key, repeats, record["duplicates"])
    summary = (record["previous"] or "", record["summary"])
    entries = _entries(packet, key, target, decision, candidates, kept, skipped, summary)
    write_entries(tx, key, entries, packet.access, now)
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
