"""The dossier governor (docs/design.md §Routing): route a fact packet into a dossier, whole or not at all.

``process_fact_packet`` embeds the packet's facts in one batch, then runs ONE write
transaction of two statements (three round trips with its BEGIN and COMMIT,
tests/e2e/test_write_round_trips.py):

1. take the routing lock (see ``lock``) and, under it, check whether this packet was applied
   before (its idempotency key ``packet.key``), whether any id it would take is hidden from its
   writer, and vote with every fact (see ``voting``): one statement (``_claim``), sent with the
   BEGIN; then apply the append-or-create rule (or an adjudicator's verdict) in Python;
2. write the dossier and the facts that are not near-duplicates (cosine >= 0.92) of a fact
   already in it or earlier in the packet, store its centroid sum (advanced in Python from
   the one the vote read) and re-choose its extractive summary (see ``summary``) from its
   pool of central facts inside Neo4j, so no stored vector is read back; and, in the same
   statement (``WRITE_ROUTES``), journal every change (created / fact_skipped /
   summary_updated / fact_added).

``ingest_packets`` applies up to ``PACKETS_PER_TRANSACTION`` packets in one transaction with the
same steps, batched: one statement for the lock, their keys and one vote for all of them, one
write and journal for all of them (``_apply_group``).

A failure anywhere rolls all of it back: the dossier and its facts appear whole or not at all.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

import numpy as np
from neo4j import Driver, ManagedTransaction
from numpy.typing import NDArray

from cairn.graph import dossiers as cypher
from cairn.memory.dossiers.adjudicator import Adjudicator
from cairn.memory.dossiers.dedup import DEDUP_COSINE, same_fact
from cairn.memory.dossiers.journal import Entry, entry_id, unit_rows
from cairn.memory.dossiers.models import Access, FactPacket, InputError, Problem, parse_packet
from cairn.memory.dossiers.summary import SUMMARY_PARAMS
from cairn.memory.dossiers.voting import (
    TOP_K_PER_FACT,
    VOTE_THRESHOLD,
    Candidate,
    Decision,
    DossierState,
    Hit,
    Route,
    Vote,
    decide,
    plan_routes,
    run_vote,
    run_votes,
    tally,
    vote_params,
    votes_from,
)
from cairn.policy.scope import Scope
from cairn.policy.writes import TAKEN_ID, hidden_ids, kept_on_update
from cairn.runtime.database import Vector, write
from cairn.runtime.embedder import DIMENSIONS, Embedder, get_embedder
from cairn.schema.keys import LOCK_ID, keyed_with

# Facts per ingest_packets transaction (one embedding call each), counted back from the end of the
# call: the last takes at most TAIL_FACTS, each one before it at most twice the next one's, up to
# MAX_FACTS; so once the model has embedded the last texts little is left to route (a transaction's
# routing overlaps the embedding of the smaller ones after it). The first takes at most HEAD_FACTS,
# so routing starts early (docs/design.md §Dossier queries, "Transactions").
HEAD_FACTS = 64
TAIL_FACTS = 8
MAX_FACTS = 256
EMBED_AHEAD = 512  # facts embedded ahead of the transaction being routed (whole transactions)
PACKETS_PER_TRANSACTION = 64  # at most this many packets share a transaction
# What a packet stores between nodes of its domain: dossier to fact, fact to block, journal to dossier.
PACKET_EDGES = ("HAS_FACT", "FROM_BLOCK", "ABOUT")
# What appending facts refreshes on a stored dossier besides its (internal) centroid and pool.
KEPT_ON_APPEND = ("last_updated", "summary")


@dataclass(frozen=True)
class SkippedFact:
    text: str
    duplicate_of: str  # the stored fact it restates, which now carries its turn and block ids
    similarity: float
    dossier_id: str = ""  # the dossier holding that fact


@dataclass(frozen=True)
class Placement:
    """One route of a packet: which dossier, created or appended to, and the facts it received."""

    dossier_id: str
    action: Literal["created", "appended"]
    added: tuple[str, ...]
    decision: Decision

    def as_json(self) -> dict[str, Any]:
        return {
            "dossier_id": self.dossier_id,
            "action": self.action,
            "added": list(self.added),
            "decision": self.decision.as_json(),
        }


@dataclass(frozen=True)
class RoutingResult:
    """Where a packet went. A packet on several topics may go to several dossiers
    (``placements``); ``dossier_id``/``action``/``decision`` describe the one that received most
    of its facts, ``added`` lists every fact written."""

    dossier_id: str
    action: Literal["created", "appended", "already_applied"]
    packet_key: str
    added: tuple[str, ...] = ()
    skipped: tuple[SkippedFact, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    decision: Decision | None = None
    placements: tuple[Placement, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "dossier_id": self.dossier_id,
            "action": self.action,
            "packet_key": self.packet_key,
            "added": list(self.added),
            "skipped": [
                {
                    "text": s.text,
                    "duplicate_of": s.duplicate_of,
                    "similarity": round(s.similarity, 4),
                    "dossier_id": s.dossier_id,
                }
                for s in self.skipped
            ],
            "candidates": [c.as_json() for c in self.candidates],
            "decision": None if self.decision is None else self.decision.as_json(),
            "placements": [p.as_json() for p in self.placements],
        }


@dataclass(frozen=True)
class _Preset:
    """An adjudicator's verdict reached before the lock, and the vote it was based on."""

    candidate_ids: tuple[str, ...]
    decision: Decision


def fact_id(key: str, index: int) -> str:
    return f"fact-{key}-{index:03d}"  # zero-padded: ids sort in packet order


def dossier_id_for(key: str) -> str:
    return f"dos-{key}"


def stored_as(key: str, packet: FactPacket) -> FactPacket:
    """The packet under the key its facts, dossier and journal entries are named by: its client's
    ``packet_id``, else its content hash keyed with the database's secret ``key`` (``lock.secret``).
    An unkeyed hash named them by their content, so a reader whose rules hide one field of it (a
    fact's text, its packet's timestamp) could confirm a guess of that field from the ids."""
    if packet.packet_id:
        return packet
    return packet.model_copy(update={"packet_id": keyed_with(key, "packet", packet.key)})


def _markers(sent: FactPacket, stored: FactPacket) -> list[str]:
    """The first journal entry ids a packet applied before is recognised by: its stored key's
    and, sent without a ``packet_id``, its unkeyed content hash's, which named it before schema 9
    (``cairn db migrate`` cannot tell that hash from a client's own id, so it keeps it)."""
    return [entry_id(stored.key, 0), *([] if sent.packet_id else [entry_id(sent.key, 0)])]


def _applied_to(tx: ManagedTransaction, groups: list[list[str]]) -> list[str | None]:
    """Per group of ``_markers``, the dossier its packet went to when it was applied before."""
    found = {
        str(r["marker"]): str(r["applied_to"])
        for r in tx.run(cypher.PACKETS_APPLIED, markers=[m for g in groups for m in g])
    }
    return [next((found[m] for m in g if m in found), None) for g in groups]


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
    vote = run_vote(tx, vectors, packet.access, states=False)  # the tally reads no dossier state
    return tally(vote.hits, vote.titles)


def preview_route(
    driver: Driver, packet: FactPacket | Mapping[str, Any], embedder: Embedder | None = None
) -> tuple[list[Candidate], Decision]:
    """The vote for the packet now (read-only) and the packet rule's decision on it
    (docs/design.md §Routing)."""
    packet = _as_packet(packet)
    vectors = (embedder or get_embedder()).embed([f.text for f in packet.facts])
    with driver.session() as session:
        candidates = session.execute_read(read_vote, vectors, packet)
    return candidates, decide(candidates, len(packet.facts))


def find_candidate_dossiers(
    driver: Driver, facts: Sequence[str], top_k: int = 5, embedder: Embedder | None = None
) -> list[Candidate]:
    """The candidate dossiers for these facts: their vote, best first (default access)."""
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
    With an ``adjudicator`` the packet is judged whole (one dossier), and the vote is also run
    before the lock, so that a slow LLM call never holds the lock; its verdict is used only if
    the vote under the lock agrees with it (same candidates), otherwise the rule decides.
    """
    packet = _as_packet(packet)
    packet.access.check_writer(writer, "fact packet", edges=PACKET_EDGES, routes=True)
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
    result = write(driver, _apply_one, packet, vectors, model.name, preset, writer)
    return _shown_to(result, writer, packet.access.domain)


def _shown_to(result: RoutingResult, writer: Scope | None, domain: str) -> RoutingResult:
    """``result`` as ``writer`` may read it: its candidates (dossiers of the packet's access, so
    of ``domain``) without their titles where its rules hide a dossier's title there."""
    if writer is None or not kept_on_update(writer, "Dossier", [domain], ("title",)):
        return result
    return replace(result, candidates=tuple(replace(c, title=None) for c in result.candidates))


def _decide_under_lock(candidates: list[Candidate], n_facts: int, preset: _Preset) -> Decision:
    if preset.candidate_ids == tuple(c.dossier_id for c in candidates):
        return preset.decision
    rule = decide(candidates, n_facts)
    return Decision(
        rule.action,
        rule.target,
        f"{rule.reason} (adjudication set aside: the candidates changed before the lock was taken)",
    )


@dataclass(frozen=True)
class _Duplicate:
    of: str  # a stored fact id, or the id an earlier fact of this packet will get
    similarity: float
    dossier_id: str | None  # None: the earlier packet fact's dossier, known once routed
    earlier: int | None = None  # that earlier packet fact


def _duplicates(
    packet: FactPacket, key: str, vectors: NDArray[np.float32], vote: Vote
) -> dict[int, _Duplicate]:
    """Facts that restate a stored fact (through the vote's nearest hits) or an earlier fact of
    the packet, by ``dedup.same_fact``: packet index -> what it restates."""
    texts = [f.text for f in packet.facts]
    nearest: dict[int, list[Hit]] = {}
    for h in vote.hits:
        if h.text is not None:
            nearest.setdefault(h.fact_index, []).append(h)
    out: dict[int, _Duplicate] = {}
    for i, text in enumerate(texts):
        stored = [h for h in nearest.get(i, []) if same_fact(h.text or "", text, h.score)]
        if stored:
            best = max(stored, key=lambda h: (h.score, h.fact_id))
            out[i] = _Duplicate(best.fact_id, best.score, best.dossier_id)
            continue
        earlier = [
            (float(vectors[i] @ vectors[j]), j)
            for j in range(i)
            if same_fact(texts[j], text, float(vectors[i] @ vectors[j]))
        ]
        if earlier:
            sim, j = max(earlier)
            first = out.get(j)  # an earlier fact that is itself a duplicate points on
            out[i] = (
                _Duplicate(fact_id(key, j), sim, None, j)
                if first is None
                else _Duplicate(first.of, sim, first.dossier_id, first.earlier)
            )
    return out


def _fact_rows(
    packet: FactPacket,
    vectors: NDArray[np.float32],
    key: str,
    indexes: Sequence[int],
    model: str,
    echoes: Mapping[int, list[int]],
) -> list[dict[str, Any]]:
    """The facts of one route; ``echoes`` lists, per fact, the later packet facts restating it."""
    rows = []
    for i in indexes:
        f = packet.facts[i]
        turns = [
            t for t in dict.fromkeys([f.turn_id, *(packet.facts[j].turn_id for j in echoes.get(i, []))]) if t
        ]
        rows.append(
            {
                "id": fact_id(key, i),
                "props": {
                    "text": f.text,
                    "fact_type": f.fact_type or "narrative",
                    "confidence": f.confidence,
                    "source_block_id": packet.source_block_id,
                    "source_turn_id": f.turn_id,
                    "source_block_ids": [packet.source_block_id],
                    "source_turn_ids": turns,
                    "turn_index": f.resolved_turn_index,
                    "embedding": Vector(vectors[i].tolist()),
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
    placements: list[Placement],
    skipped: Mapping[int, SkippedFact],
    candidates: list[Candidate],
) -> list[Entry]:
    """The journal of one packet, in order: created | skips | per appended route, its summary
    change (if the write changes the summary: ``Entry.summary_of``) and facts added. Every entry
    is ABOUT the dossier it changed."""
    votes = [c.as_json() for c in candidates[:5]]
    index_of = {fact_id(key, i): i for i in range(len(packet.facts))}
    entries: list[Entry] = [
        Entry(
            "created",
            (p.dossier_id,),
            new_value=packet.cluster_label,
            rationale=p.decision.reason,
            details={
                "packet_key": key,
                "source_block_id": packet.source_block_id,
                "fact_ids": list(p.added),
                "decision": p.decision.as_json(),
                "votes": votes,
            },
        )
        for p in placements
        if p.action == "created"
    ]
    for i, s in skipped.items():
        fact = packet.facts[i]
        entries.append(
            Entry(
                "fact_skipped",
                (s.dossier_id,),
                excerpt=s.text,
                rationale=f"restates a stored fact (cosine {s.similarity:.3f} >= {DEDUP_COSINE}, same "
                "names, numbers and dates); its turn and block ids were added to that fact",
                details={
                    "packet_key": key,
                    "duplicate_of": s.duplicate_of,
                    "similarity": round(s.similarity, 4),
                    "source_turn_id": fact.turn_id,
                    "source_block_id": packet.source_block_id,
                },
            )
        )
    for p in placements:
        if p.action != "appended" or not p.added:
            continue
        entries.append(
            Entry(
                "summary_updated",
                (p.dossier_id,),
                rationale=f"{len(p.added)} fact(s) appended",
                details={"packet_key": key},
                summary_of=p.dossier_id,
            )
        )
        entries += [
            Entry(
                "fact_added",
                (p.dossier_id,),
                new_value=packet.facts[index_of[fid]].text,
                rationale=p.decision.reason,
                confidence=packet.facts[index_of[fid]].confidence,
                details={
                    "packet_key": key,
                    "fact_id": fid,
                    "source_block_id": packet.source_block_id,
                    "decision": p.decision.as_json(),
                    "votes": votes,
                },
            )
            for fid in p.added
        ]
    return entries


def _apply_one(
    tx: ManagedTransaction,
    packet: FactPacket,
    vectors: NDArray[np.float32],
    model: str,
    preset: _Preset | None,
    writer: Scope | None,
) -> RoutingResult:
    """The whole packet in one transaction (re-run from the top by the driver on a transient error)."""
    claim = _claim(tx, [packet], [vectors], {0}, writer)
    packet, applied_to = claim.packets[0], claim.applied[0]
    if claim.hidden:
        # A key (given or hashed) whose packet, dossier or facts the writer cannot read is taken,
        # and said to be so in the words used for any hidden id, never where it went
        # (docs/design.md §Policy module).
        raise InputError("fact packet", [Problem("packet_id", f"the packet key {TAKEN_ID}")])
    if applied_to is not None:
        return RoutingResult(applied_to, "already_applied", packet.key)
    vote = claim.votes[0]
    planned = _plan(packet, vectors, model, preset, vote)
    _write(tx, [planned], writer)
    return _result(planned)


# The database's secret as this process last read it (``lock.secret``): a guess that lets a
# packet's first statement check ids derived from it (``_claim``); every claim returns the real
# one, and a wrong guess only costs the statements it saved.
_secret_seen: list[str] = []


@dataclass(frozen=True)
class _Claim:
    """What a transaction's first statement found under the routing lock, per packet: the packet
    under its stored key, the dossier it went to when applied before, its vote (the packets voted
    for); and the writer's claimed ids that are hidden from it."""

    packets: list[FactPacket]
    applied: list[str | None]
    votes: dict[int, Vote]
    hidden: frozenset[str]


def _claimed_ids(packet: FactPacket, writer: Scope | None) -> list[str] | None:
    """The ids a writer's packet (under its stored key) would take: its first journal entry, the
    dossier it would create and its facts; None for an operator or a scope that reads everything."""
    if writer is None or writer.unrestricted:
        return None
    facts = [fact_id(packet.key, i) for i in range(len(packet.facts))]
    return [entry_id(packet.key, 0), dossier_id_for(packet.key), *facts]


def _claim(
    tx: ManagedTransaction,
    sent: list[FactPacket],
    vectors: list[NDArray[np.float32]],
    voting: set[int],
    writer: Scope | None,
) -> _Claim:
    """Take the routing lock, and under it find which packets were applied before, which ids the
    writer's packet claims are hidden from it, and the vote of the packets in ``voting`` that are
    neither: one statement (``CLAIM_PACKETS``), whose BEGIN travels with it (``database.write``).

    The packets' stored keys depend on the database's secret only for a packet sent without a
    ``packet_id``; for such packets the ids are derived from the secret last seen, and if the
    statement returns another (the first packet of the process, a restored database) they are
    checked again, statement by statement, with the secret it returned. Only one packet at a time
    carries a writer (``process_fact_packet``)."""
    guess = _secret_seen[-1] if _secret_seen else None
    keyed = any(not p.packet_id for p in sent)
    packets = [stored_as(guess or "", p) for p in sent]
    markers = [_markers(s, p) for s, p in zip(sent, packets, strict=True)]
    params = vote_params([(v, p.access) for v, p in zip(vectors, packets, strict=True)])
    params["queries"] = [q for q in params["queries"] if q["p"] in voting]
    claimed = _claimed_ids(packets[0], writer) if writer is not None else None
    record = tx.run(
        cypher.CLAIM_PACKETS,
        {
            **(writer or Scope.system()).cypher_params(),
            **params,
            "lock": LOCK_ID,
            "fresh": secrets.token_hex(32),
            "markers": [
                {"p": n, "k": k, "id": m} for n, group in enumerate(markers) for k, m in enumerate(group)
            ],
            "claimed": claimed,
        },
    ).single(strict=True)
    key = str(record["secret"])
    if key != guess:
        _secret_seen.append(key)
        del _secret_seen[:-1]
    if keyed and key != guess:  # the ids checked were not the packets' own: check them again
        packets = [stored_as(key, p) for p in sent]
        applied = _applied_to(tx, [_markers(s, p) for s, p in zip(sent, packets, strict=True)])
        own = _claimed_ids(packets[0], writer)
        hidden: frozenset[str] = frozenset()
        if own is not None and writer is not None:
            hidden = hidden_ids(tx, writer, [*own, *(a for a in applied[:1] if a)])
        todo = [n for n in sorted(voting) if applied[n] is None] if not hidden else []
        votes = run_votes(tx, [(vectors[n], packets[n].access) for n in todo])
        return _Claim(packets, applied, dict(zip(todo, votes, strict=True)), hidden)
    found = {int(a["p"]): str(a["applied_to"]) for a in record["applied"]}
    applied = [found.get(n) for n in range(len(sent))]
    all_votes = votes_from(record["dossiers"], len(sent))
    hidden = frozenset(str(h) for h in record["hidden"])
    voted = {n: all_votes[n] for n in voting if applied[n] is None and not hidden}
    return _Claim(packets, applied, voted, hidden)


class _Pending:
    """Facts written earlier in the same transaction, which the vector index does not see yet
    (index updates apply at commit): the vote of a later packet adds their hits exactly."""

    def __init__(self) -> None:
        self.vectors: list[NDArray[np.float32]] = []
        self.facts: list[tuple[str, str, str]] = []  # fact id, dossier id, text
        self.states: dict[str, DossierState] = {}
        self.titles: dict[str, str] = {}
        self.access: dict[str, Access] = {}

    def add(self, vote: Vote, vectors: NDArray[np.float32], access: Access) -> Vote:
        if not self.facts:
            return vote
        # Only facts of the packet's own access are ranked, before the top-k cut: a fact of another
        # access (one the writer may not read) never takes a slot (as in VOTE_FOR_DOSSIERS).
        same = np.array([self.access[did] == access for _, did, _ in self.facts])
        if not same.any():
            return vote
        sims = np.where(same, vectors @ np.stack(self.vectors).T, -np.inf)
        hits = list(vote.hits)
        for i, row in enumerate(sims):
            for j in np.argsort(-row, kind="stable")[:TOP_K_PER_FACT]:
                fid, did, text = self.facts[j]
                score = float(row[j])
                if score >= VOTE_THRESHOLD and same[j]:
                    hits.append(Hit(i, did, fid, score, text if score >= DEDUP_COSINE else None))
        by_fact: dict[int, list[Hit]] = {}
        for h in sorted(hits, key=lambda h: (h.fact_index, -h.score, h.fact_id)):
            by_fact.setdefault(h.fact_index, []).append(h)
        kept = [h for found in by_fact.values() for h in found[:TOP_K_PER_FACT]]
        mine = {did for did, a in self.access.items() if a == access}
        return Vote(
            kept,
            {**vote.titles, **{d: self.titles[d] for d in mine}},
            {**vote.dossiers, **{d: self.states[d] for d in mine}},
        )

    def record(
        self,
        packet: FactPacket,
        vectors: NDArray[np.float32],
        vote: Vote,
        placements: list[Placement],
        sums: dict[str, NDArray[np.float64]],
    ) -> None:
        """The packet's facts, and the state its dossiers are left in (``vote``: as it found them)."""
        index_of = {fact_id(packet.key, i): i for i in range(len(packet.facts))}
        for p in placements:
            for fid in p.added:
                self.vectors.append(vectors[index_of[fid]])
                self.facts.append((fid, p.dossier_id, packet.facts[index_of[fid]].text))
            before = vote.dossiers.get(p.dossier_id)
            self.states[p.dossier_id] = DossierState(
                sums[p.dossier_id], len(p.added) + (before.size if before else 0)
            )
            self.titles.setdefault(p.dossier_id, packet.cluster_label)
            self.access[p.dossier_id] = packet.access


@dataclass
class _Planned:
    """A packet routed in Python, before its write: its ``WRITE_ROUTES`` rows, and what its
    journal entries and result are made of."""

    packet: FactPacket
    write: dict[str, Any] | None  # one ``$packets`` row of ``WRITE_ROUTES`` (None: nothing to write)
    restated: list[dict[str, Any]]  # ``WRITE_ROUTES``'s ``$restated`` rows
    placements: list[Placement]
    skipped: dict[int, SkippedFact]
    candidates: list[Candidate]
    now: str


def _plan(
    packet: FactPacket,
    vectors: NDArray[np.float32],
    model: str,
    preset: _Preset | None,
    vote: Vote,
    pending: _Pending | None = None,
) -> _Planned:
    """Route one packet in Python from its vote (a group's earlier packets added from ``pending``,
    which then records this one's writes for the packets after it); nothing is written here."""
    key = packet.key
    if pending is not None:
        vote = pending.add(vote, vectors, packet.access)
    candidates = tally(vote.hits, vote.titles)
    duplicates = _duplicates(packet, key, vectors, vote)
    fresh = [i for i in range(len(packet.facts)) if i not in duplicates]
    if preset is None:
        routes = plan_routes(vectors, vote, fresh)
    else:
        routes = (
            [Route(tuple(fresh), _decide_under_lock(candidates, len(packet.facts), preset))] if fresh else []
        )
    echoes: dict[int, list[int]] = {}
    for i, d in sorted(duplicates.items()):
        if d.earlier is not None:
            echoes.setdefault(d.earlier, []).append(i)
    placements: list[Placement] = []
    route_rows: list[dict[str, Any]] = []
    sums: dict[str, NDArray[np.float64]] = {}
    dossier_of: dict[int, str] = {}
    for route in routes:
        target = route.decision.target if route.decision.action == "append" else None
        did = target or dossier_id_for(key)
        total = np.asarray(vectors[list(route.indexes)], dtype=np.float64).sum(axis=0)
        state = vote.dossiers.get(did)
        if state is not None and state.centroid_sum is not None:
            total = total + state.centroid_sum
        dossier_of.update((i, did) for i in route.indexes)
        placements.append(
            Placement(
                did,
                "appended" if target else "created",
                tuple(fact_id(key, i) for i in route.indexes),
                route.decision,
            )
        )
        sums[did] = total
        route_rows.append(
            {
                "dossier_id": did,
                "appended": target is not None,
                "centroid_sum": Vector(total.tolist()),
                "facts": _fact_rows(packet, vectors, key, route.indexes, model, echoes),
            }
        )
    skipped = {
        i: SkippedFact(
            packet.facts[i].text,
            d.of,
            d.similarity,
            dossier_of[d.earlier] if d.earlier is not None else d.dossier_id or "",
        )
        for i, d in sorted(duplicates.items())
    }
    now = datetime.now(UTC).isoformat()
    write = None
    if route_rows:
        write = {
            "routes": route_rows,
            "create_props": {"title": packet.cluster_label, "status": "active", **packet.access.props()},
            "now": now,
            "observed_at": packet.observed_at,
            "block_id": packet.source_block_id,
        }
    restated: dict[str, list[str]] = {}  # stored fact -> the turn ids restating it, in packet order
    for i, d in sorted(duplicates.items()):
        if d.earlier is None:
            restated.setdefault(d.of, []).extend([t for t in [packet.facts[i].turn_id] if t])
    rows = [
        {"id": fid, "turns": turns, "blocks": [packet.source_block_id]} for fid, turns in restated.items()
    ]
    if pending is not None:
        pending.record(packet, vectors, vote, placements, sums)
    return _Planned(packet, write, rows, placements, skipped, candidates, now)


def _write(tx: ManagedTransaction, planned: Sequence[_Planned], writer: Scope | None) -> None:
    """Every planned packet's routes, the restated duplicates' provenance and every packet's
    journal, in packet order, in one ``WRITE_ROUTES`` (the transaction's last statement before
    its COMMIT)."""
    if not planned:
        return
    journal = []
    for n, p in enumerate(planned):
        key = p.packet.key
        rows = unit_rows(key, _entries(p.packet, key, p.placements, p.skipped, p.candidates), p.packet.access)
        # The ids the statement gives the entries it keeps, in order (it may leave some out).
        ids = [entry_id(key, seq) for seq in range(len(rows))]
        journal.append({"p": n, "ids": ids, "now": p.now, "entries": rows})
    params: dict[str, Any] = {
        **(writer or Scope.system()).cypher_params(),  # the block is linked only if the writer reads it
        **SUMMARY_PARAMS,
        "packets": [
            {**p.write, "n": n, "routes": _kept_routes(p, writer)}
            for n, p in enumerate(planned)
            if p.write is not None
        ],
        "restated": [row for p in planned for row in p.restated],
        "journal": journal,
    }
    tx.run(cypher.WRITE_ROUTES, params).consume()


def _kept_routes(planned: _Planned, writer: Scope | None) -> list[dict[str, Any]]:
    """The packet's routes, each with ``keep``: the fields of a stored dossier it appends to that
    the writer may not read (``last_updated``, ``summary``), which the write leaves as stored
    (``cairn.policy.writes.kept_on_update``); a dossier the packet creates is its own."""
    assert planned.write is not None
    kept: list[str] = []
    if writer is not None:
        kept = sorted(kept_on_update(writer, "Dossier", [planned.packet.access.domain], KEPT_ON_APPEND))
    return [{**r, "keep": kept if r["appended"] else []} for r in planned.write["routes"]]


def _result(planned: _Planned) -> RoutingResult:
    placements, skipped = planned.placements, planned.skipped
    main = max(placements, key=lambda p: len(p.added), default=None)
    return RoutingResult(
        dossier_id=main.dossier_id if main else next(iter(skipped.values())).dossier_id,
        action=main.action if main else "appended",
        packet_key=planned.packet.key,
        added=tuple(fid for p in placements for fid in p.added),
        skipped=tuple(skipped.values()),
        candidates=tuple(planned.candidates),
        decision=main.decision if main else None,
        placements=tuple(placements),
    )


def _first_of_keys(packets: Sequence[FactPacket]) -> dict[str, int]:
    """Each key's first packet, by the packets' keys as they are (sent: a content hash is told
    apart from a client's ``packet_id``; stored: both are the stored key). Packets of one key as
    sent share their stored key, so the first of a stored key is the first of its key as sent."""
    first: dict[str, int] = {}
    for n, p in enumerate(packets):
        first.setdefault(p.key if p.packet_id else f"content {p.key}", n)
    return first


def _apply_group(
    tx: ManagedTransaction, packets: list[FactPacket], vectors: list[NDArray[np.float32]], model: str
) -> list[RoutingResult]:
    """Several packets in one transaction, in order, each under its own idempotency key.

    Two statements for the group, whatever its size: the lock, which packets were applied before
    and one vote for all the others, in one (``_claim``; the vector index shows only committed
    facts, so each packet's vote is the same at the start of the group as it would be later in
    it; the group's own writes are added exactly by ``_Pending``), then every packet's routes
    (packet after packet), the restated duplicates' provenance and every journal entry, in one
    ``WRITE_ROUTES``.
    """
    claim = _claim(tx, packets, vectors, set(_first_of_keys(packets).values()), None)
    packets, applied, votes = claim.packets, claim.applied, claim.votes
    # Only the first packet of each key is written, and the keys that decide are the stored ones,
    # known once the statement returned the secret: a packet sent with another's stored key as
    # its ``packet_id`` is that packet's re-send (voted for, as its key as sent differs; not written).
    stored_first = _first_of_keys(packets)
    todo = [n for n in sorted(votes) if stored_first[packets[n].key] == n]
    pending = _Pending()
    planned = {n: _plan(packets[n], vectors[n], model, None, votes[n], pending) for n in todo}
    _write(tx, list(planned.values()), None)
    results: list[RoutingResult] = []
    done: dict[str, str] = {}
    for n, p in enumerate(packets):
        where = applied[n] or done.get(p.key)
        if where is not None:
            results.append(RoutingResult(where, "already_applied", p.key))
            continue
        result = _result(planned[n])
        done[p.key] = result.dossier_id
        results.append(result)
    return results


def _route_group(
    driver: Driver, packets: list[FactPacket], vectors: list[NDArray[np.float32]], model: Embedder
) -> list[RoutingResult]:
    """One transaction for the group; if it fails, each packet alone (so only a bad one fails)."""
    checked = [_checked_vectors(p, v) for p, v in zip(packets, vectors, strict=True)]
    try:
        return write(driver, _apply_group, packets, checked, model.name)
    except Exception:  # retried packet by packet: the one at fault raises there, alone
        if len(packets) == 1:
            raise
    return [
        process_fact_packet(driver, p, embedder=model, vectors=v)
        for p, v in zip(packets, checked, strict=True)
    ]


Progress = Callable[[int], None]


def _take(packets: Sequence[FactPacket], budget: int) -> int:
    """How many of ``packets``, in order, fit ``budget`` facts (at least one: a packet with more
    facts than the budget makes a transaction of its own)."""
    n = size = 0
    for p in packets:
        if n and size + len(p.facts) > budget:
            break
        n += 1
        size += len(p.facts)
    return n


def embed_chunks(packets: Sequence[FactPacket]) -> list[list[FactPacket]]:
    """The packets in order, cut into the transactions ``ingest_packets`` embeds and routes one at
    a time: all in one when they hold at most ``HEAD_FACTS`` facts; else, from the end back, at
    most ``TAIL_FACTS`` facts, then twice the next one's each, up to ``MAX_FACTS``; what is left
    at the start, if it is at least twice ``HEAD_FACTS``, is cut to a first one of at most
    ``HEAD_FACTS`` and the rest. (bench/locomo_routing.py times raw embedding in these batches.)"""
    if sum(len(p.facts) for p in packets) <= HEAD_FACTS:  # one batch: nothing to overlap with
        return [list(packets)] if packets else []
    spans: list[list[FactPacket]] = []
    rest = list(packets)
    budget = TAIL_FACTS
    while rest:
        n = _take(rest[::-1], budget)
        spans.append(rest[len(rest) - n :])
        del rest[len(rest) - n :]
        budget = min(MAX_FACTS, budget * 2)
    spans.reverse()
    if spans and sum(len(p.facts) for p in spans[0]) >= 2 * HEAD_FACTS:
        n = _take(spans[0], HEAD_FACTS)
        spans[:1] = [spans[0][:n], spans[0][n:]]
    return spans


def ingest_packets(
    driver: Driver,
    packets: Sequence[FactPacket],
    *,
    embedder: Embedder | None = None,
    adjudicator: Adjudicator | None = None,
    progress: Progress | None = None,
) -> list[RoutingResult]:
    """Route many packets in order, embedding ahead while earlier ones are written.

    Embedding (the model thread, GIL released) runs up to ``EMBED_AHEAD`` facts ahead of
    routing (waiting on Neo4j), in the embedder's length-sorted passes of ``PASS`` texts, so
    throughput approaches that of embedding alone. Each transaction takes the packets of one
    ``embed_chunks`` span (the first at most ``HEAD_FACTS`` facts, so routing starts early; then
    up to ``MAX_FACTS``, so fewer commits; the last ones halving down to ``TAIL_FACTS``, so little
    is left to route once the model has finished: docs/design.md §Dossier queries), whose texts
    are embedded in one call, at most ``PACKETS_PER_TRANSACTION`` packets, one lock and one
    commit, each packet under its own idempotency key, so a kill leaves whole packets only and a
    re-run skips those applied; if the shared transaction fails, its packets are retried one
    transaction each. With an ``adjudicator`` every packet has its own transaction (its verdict
    is reached before the lock).
    """
    model = embedder or get_embedder()
    spans = embed_chunks(packets)

    def embed(span: list[FactPacket]) -> NDArray[np.float32]:
        # One call per transaction: the embedder sorts its texts by length into passes of
        # ``PASS`` (ONNX Runtime, one thread, leaving the other core to this thread's routing and
        # Neo4j's writes), so each pass pads to texts of about its own length (docs/design.md
        # §Dossier queries, "Embedding passes").
        return model.embed([f.text for p in span for f in p.facts])

    results: list[RoutingResult] = []
    if not spans:
        return results
    starts = list(itertools.accumulate((sum(len(p.facts) for p in span) for span in spans), initial=0))
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")
    embedded: dict[int, Future[NDArray[np.float32]]] = {}  # by transaction, until routed
    submitted = 0

    def submit_until(end: int) -> None:
        """Embed every transaction that starts before fact ``end``."""
        nonlocal submitted
        while submitted < len(spans) and starts[submitted] < end:
            embedded[submitted] = pool.submit(embed, spans[submitted])
            submitted += 1

    try:
        submit_until(EMBED_AHEAD)
        for t, group in enumerate(spans):
            matrix = embedded.pop(t).result()
            bounds = list(itertools.accumulate((len(p.facts) for p in group), initial=0))
            slices = [matrix[a:b] for a, b in itertools.pairwise(bounds)]
            submit_until(starts[t + 1] + EMBED_AHEAD)
            step = 1 if adjudicator is not None else PACKETS_PER_TRANSACTION
            for first in range(0, len(group), step):
                part, vecs = group[first : first + step], slices[first : first + step]
                if adjudicator is not None:
                    routed = [
                        process_fact_packet(
                            driver, part[0], embedder=model, adjudicator=adjudicator, vectors=vecs[0]
                        )
                    ]
                else:
                    routed = _route_group(driver, part, vecs, model)
                results += routed
                if progress is not None:
                    for p in part:
                        progress(len(p.facts))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return results
