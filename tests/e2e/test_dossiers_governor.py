"""The dossier governor against the real Neo4j and the real embedding model.

Note 000's Phase 1 and Phase 3 checkpoints (create, append, the vague-fact vote, history),
plus what the issue adds: one transaction per packet, duplicates skipped and journalled,
bad packets refused with nothing written, 8 concurrent packets on one topic making one
dossier, access-separated routing and the optional adjudicator.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from neo4j import Driver
from neo4j.exceptions import ConstraintError

from cairn.graph import dossiers as cypher
from cairn.memory.dossiers import governor
from cairn.memory.dossiers.adjudicator import LLMAdjudicator, parse_adjudication
from cairn.memory.dossiers.governor import (
    DEDUP_COSINE,
    find_candidate_dossiers,
    ingest_packets,
    preview_route,
    process_fact_packet,
)
from cairn.memory.dossiers.journal import entry_id
from cairn.memory.dossiers.models import FactPacket, InputError, parse_packet
from cairn.memory.dossiers.retriever import get_dossier_history
from cairn.memory.dossiers.summary import summary_of
from cairn.memory.dossiers.voting import (
    Candidate,
    Decision,
    Hit,
    Vote,
    decide,
    run_vote,
    run_votes,
    tally,
    vote_params,
)
from cairn.policy.scope import Scope
from cairn.runtime.embedder import BATCH_SIZE, PASS, Embedder
from cairn.runtime.llm import LLMClient
from cairn.runtime.settings import Settings
from cairn.schema.keys import LOCK_ID
from tests.llm_server import StubLLMServer

RESTRICTED = {
    "domain": "acme/assistant",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec", "writer"],
}


def packet(label: str, facts: Sequence[Any], block: str = "block_001", **extra: Any) -> dict[str, Any]:
    return {"cluster_label": label, "facts": list(facts), "source_block_id": block, **extra}


def count(driver: Driver, label: str) -> int:
    records, _, _ = driver.execute_query(f"MATCH (n:{label}) RETURN count(n) AS n")
    return int(records[0]["n"])


def facts_of(driver: Driver, dossier_id: str) -> list[str]:
    records, _, _ = driver.execute_query(
        "MATCH (:Dossier {id: $id})-[:HAS_FACT]->(f:Fact) RETURN f.text AS text ORDER BY f.added_at, f.id",
        id=dossier_id,
    )
    return [r["text"] for r in records]


VEGETARIAN = packet("Vegetarian Diet", ["User is strictly vegetarian", "User avoids meat"])


# --- note 000 Phase 1 and Phase 3 checkpoints ----------------------------------------------------


def test_fact_search_finds_the_dossier_for_a_related_query(empty_db: Driver, embedder: Embedder) -> None:
    dossier_id = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    results = find_candidate_dossiers(empty_db, ["dietary preferences"], embedder=embedder)
    assert len(results) > 0
    assert results[0].dossier_id == dossier_id


def test_create_append_and_the_vague_fact_vote(empty_db: Driver, embedder: Embedder) -> None:
    first = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    assert first.action == "created"
    dossier_id = first.dossier_id

    second = process_fact_packet(
        empty_db,
        packet("Vegetarian Diet", ["User prefers plant-based proteins"], "block_002"),
        embedder=embedder,
    )
    assert second.action == "appended"
    assert second.dossier_id == dossier_id

    vague = ["It is healthy", "User avoids all animal products", "Plant-based diet has benefits"]
    third = process_fact_packet(
        empty_db, packet("Dietary Preferences", vague, "block_003"), embedder=embedder
    )
    assert third.dossier_id == dossier_id
    assert third.candidates[0].dossier_id == dossier_id
    assert third.candidates[0].hits >= 2

    candidates = find_candidate_dossiers(empty_db, vague, top_k=5, embedder=embedder)
    assert candidates[0].dossier_id == dossier_id
    assert candidates[0].hits >= 2

    history = get_dossier_history(empty_db, Scope.system(), dossier_id)
    assert len(history) >= 2
    ops = [e["op"] for e in history]
    assert ops[0] == "created"
    assert ops[-1] == "fact_added"
    assert "summary_updated" in ops
    assert count(empty_db, "Dossier") == 1
    assert len(facts_of(empty_db, dossier_id)) == 6


def test_unrelated_packet_creates_its_own_dossier(empty_db: Driver, embedder: Embedder) -> None:
    veg = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    ui = process_fact_packet(
        empty_db,
        packet("Dark Mode", ["User prefers dark mode", "User uses a large monitor"]),
        embedder=embedder,
    )
    assert ui.action == "created"
    assert ui.dossier_id != veg
    assert ui.decision is not None and ui.decision.action == "create"


def test_a_minority_of_matching_facts_does_not_pull_the_packet_along(
    empty_db: Driver, embedder: Embedder
) -> None:
    # Changed with issue 16: a mixed packet is clustered and each cluster routed, so the one
    # diet fact joins the diet dossier and the two unrelated facts make a dossier of their own
    # (before, the whole packet was created apart because only 1 of 3 facts voted).
    veg = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    mixed = packet("Mixed", ["User eats no meat", "User prefers dark mode", "User works remotely"], "b9")
    result = process_fact_packet(empty_db, mixed, embedder=embedder)
    where = {p.dossier_id: p for p in result.placements}
    assert set(where) - {veg}, result.placements
    assert where[veg].action == "appended"
    assert facts_of(empty_db, veg)[-1] == "User eats no meat"
    (other,) = [p for p in result.placements if p.dossier_id != veg]
    assert other.action == "created"
    assert len(other.added) == 2
    assert (result.action, result.dossier_id) == ("created", other.dossier_id)  # most facts


def test_summary_is_extractive_and_deterministic(empty_db: Driver, embedder: Embedder) -> None:
    dossier_id = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    more = [
        "User prefers plant-based proteins",
        "User avoids eggs and dairy",
        "User cooks lentil curry weekly",
    ]
    process_fact_packet(empty_db, packet("Veg", more, "block_002"), embedder=embedder)
    records, _, _ = empty_db.execute_query("MATCH (d:Dossier {id: $id}) RETURN d.summary AS s", id=dossier_id)
    summary = records[0]["s"]
    sentences = [s.strip() + "." for s in summary.split(".") if s.strip()]
    stored = facts_of(empty_db, dossier_id)
    assert len(sentences) == 3
    assert all(s.rstrip(".") in stored for s in sentences)
    # the summary chosen inside Neo4j is the one the numpy twin chooses from the stored facts
    rows, _, _ = empty_db.execute_query(
        "MATCH (:Dossier {id: $id})-[:HAS_FACT]->(f) RETURN f.text AS text, f.embedding AS embedding "
        "ORDER BY f.added_at, f.id",
        id=dossier_id,
    )
    assert summary_of([r.data() for r in rows]) == summary


def stored_vectors(driver: Driver, dossier_id: str) -> tuple[list[float] | None, list[list[float]]]:
    """The dossier's stored centroid sum and its facts' vectors."""
    records, _, _ = driver.execute_query(
        "MATCH (d:Dossier {id: $id})-[:HAS_FACT]->(f:Fact) "
        "RETURN d.centroid_sum AS centroid, collect(f.embedding) AS vectors",
        id=dossier_id,
    )
    return records[0]["centroid"], records[0]["vectors"]


def test_a_dossier_without_a_stored_centroid_is_summed_from_its_facts(
    empty_db: Driver, embedder: Embedder
) -> None:
    """A dossier written before centroid sums were kept: the vote sums its fact vectors
    (docs/design.md §Dossier queries); an append then stores the sum of all, advanced in Python."""
    dossier_id = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    centroid, vectors = stored_vectors(empty_db, dossier_id)
    assert centroid == pytest.approx(np.sum(vectors, axis=0).tolist(), abs=1e-9)
    empty_db.execute_query("MATCH (d:Dossier {id: $id}) REMOVE d.centroid_sum", id=dossier_id)
    more = parse_packet(packet("Vegetarian Diet", ["User prefers plant-based proteins"], "block_002"))
    query = embedder.embed([f.text for f in more.facts])
    with empty_db.session() as session:
        vote = session.execute_read(run_vote, query, more.access)
    summed = vote.dossiers[dossier_id].centroid_sum
    assert summed is not None and summed.tolist() == pytest.approx(np.sum(vectors, axis=0).tolist(), abs=1e-9)
    assert process_fact_packet(empty_db, more, embedder=embedder).dossier_id == dossier_id
    centroid, vectors = stored_vectors(empty_db, dossier_id)
    assert len(vectors) == 3
    assert centroid == pytest.approx(np.sum(vectors, axis=0).tolist(), abs=1e-9)


def test_one_vote_for_several_packets_ships_each_dossier_once(empty_db: Driver, embedder: Embedder) -> None:
    """The packets of an ingest transaction reach the same dossiers: their one vote returns a
    dossier's centroid sum once, not once per packet (docs/design.md §Dossier queries), and each
    packet's vote is the one it gets alone."""
    dossier_id = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    texts = ["User prefers plant-based proteins", "User avoids all animal products"]
    packets = [parse_packet(packet("Diet", [t], f"block_{n:03d}")) for n, t in enumerate(texts)]
    batch = [(embedder.embed([f.text for f in p.facts]), p.access) for p in packets]
    with empty_db.session() as session:
        rows = session.execute_read(lambda tx: list(tx.run(cypher.VOTE_FOR_DOSSIERS, vote_params(batch))))
        together = session.execute_read(run_votes, batch)
        alone = [session.execute_read(run_vote, vectors, access) for vectors, access in batch]
    assert [r["dossier_id"] for r in rows] == [dossier_id]

    def shape(vote: Vote) -> Any:
        states = {
            d: (s.size, None if s.centroid_sum is None else s.centroid_sum.tolist())
            for d, s in vote.dossiers.items()
        }
        return vote.hits, vote.titles, states

    assert [shape(v) for v in together] == [shape(v) for v in alone]
    assert all(v.dossiers[dossier_id].size == 2 and v.hits for v in together)


def test_the_packet_rules_vote_ships_no_dossier_state(empty_db: Driver, embedder: Embedder) -> None:
    """A vote read for the packet rule only (a preview, an adjudicator's view) is the same vote
    without the dossiers' centroid sums and sizes, which its tally does not read (VOTE_TALLY)."""
    dossier_id = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    more = parse_packet(packet("Diet", ["User prefers plant-based proteins", "User avoids meat"], "b2"))
    query = embedder.embed([f.text for f in more.facts])
    with empty_db.session() as session:
        rows = session.execute_read(
            lambda tx: list(tx.run(cypher.VOTE_TALLY, vote_params([(query, more.access)])))
        )
        full = session.execute_read(run_vote, query, more.access)
        lean = session.execute_read(run_vote, query, more.access, states=False)
    assert [r["dossier_id"] for r in rows] == [dossier_id]
    assert all("centroid" not in r.keys() and "size" not in r.keys() for r in rows)  # noqa: SIM118
    assert full.dossiers and not lean.dossiers
    assert (lean.hits, lean.titles) == (full.hits, full.titles)
    candidates, decision = preview_route(empty_db, more, embedder)
    assert candidates == tally(full.hits, full.titles)
    assert decision.target == dossier_id


# --- one transaction per packet, idempotency, duplicates -----------------------------------------


def test_a_packet_that_fails_mid_way_leaves_nothing(empty_db: Driver, embedder: Embedder) -> None:
    doomed = parse_packet(
        packet("Vegetarian Diet", ["User is strictly vegetarian", "User avoids meat"], packet_id="doomed")
    )
    # An existing node holding the id the packet's first journal entry will take: the dossier
    # and both facts are written first, then the journal write fails on the uniqueness constraint.
    empty_db.execute_query(
        "CREATE (:Entity:Block {id: $id, block_id: 'clash', domain: 'acme/assistant', sensitivity: 'low'})",
        id=entry_id(doomed.key, 0),
    )
    with pytest.raises(ConstraintError):
        process_fact_packet(empty_db, doomed, embedder=embedder)
    assert count(empty_db, "Dossier") == 0
    assert count(empty_db, "Fact") == 0
    assert count(empty_db, "JournalEntry") == 0


def test_the_same_packet_twice_is_applied_once(empty_db: Driver, embedder: Embedder) -> None:
    first = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    again = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    assert again.action == "already_applied"
    assert again.dossier_id == first.dossier_id
    assert count(empty_db, "Fact") == 2
    assert count(empty_db, "JournalEntry") == 1


def test_near_duplicate_facts_are_skipped_and_journalled(empty_db: Driver, embedder: Embedder) -> None:
    dossier_id = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder).dossier_id
    result = process_fact_packet(
        empty_db,
        packet(
            "Vegetarian Diet", ["The user is strictly vegetarian", "User avoids eggs and dairy"], "block_002"
        ),
        embedder=embedder,
    )
    assert result.dossier_id == dossier_id
    assert [s.text for s in result.skipped] == ["The user is strictly vegetarian"]
    assert result.skipped[0].similarity >= DEDUP_COSINE
    assert len(result.added) == 1
    assert facts_of(empty_db, dossier_id).count("The user is strictly vegetarian") == 0
    skips = [
        e for e in get_dossier_history(empty_db, Scope.system(), dossier_id) if e["op"] == "fact_skipped"
    ]
    assert len(skips) == 1
    assert skips[0]["excerpt"] == "The user is strictly vegetarian"
    assert skips[0]["details"]["duplicate_of"] == result.skipped[0].duplicate_of


def test_duplicates_within_one_packet_are_stored_once(empty_db: Driver, embedder: Embedder) -> None:
    result = process_fact_packet(
        empty_db,
        packet("Veg", ["User is vegetarian", "User is a vegetarian", "User avoids meat"]),
        embedder=embedder,
    )
    assert result.action == "created"
    assert len(result.added) == 2
    assert [s.text for s in result.skipped] == ["User is a vegetarian"]


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (packet("Veg", []), "facts"),
        ({"cluster_label": "Veg", "facts": ["User is vegetarian"]}, "source_block_id"),
        (packet("Veg", ["User is vegetarian"], block=""), "source_block_id"),
        (packet("Veg", ["User is vegetarian", 42]), "facts"),
        (packet("Veg", ["User is vegetarian", None]), "facts"),
        (packet("Veg", [{"text": 3}]), "facts[0].text"),
        (packet("Veg", ["   "]), "facts[0].text"),
        (packet("", ["User is vegetarian"]), "cluster_label"),
        (packet("Veg", ["x"], access={"sensitivity": "secret"}), "access.sensitivity"),
        (packet("Veg", ["x"], surprise=1), "surprise"),
        (["not", "an", "object"], ""),
    ],
)
def test_bad_packets_are_refused_and_nothing_is_written(
    empty_db: Driver, embedder: Embedder, raw: Any, where: str
) -> None:
    with pytest.raises(InputError) as info:
        process_fact_packet(empty_db, raw, embedder=embedder)
    assert any(p.where == where for p in info.value.problems), info.value.problems
    assert count(empty_db, "Entity") == 0


def test_a_bad_packet_in_a_batch_is_named_by_position(empty_db: Driver) -> None:
    good = VEGETARIAN
    with pytest.raises(InputError) as info:
        [parse_packet(p, f"line {i}: ") for i, p in enumerate([good, packet("x", [1])], start=1)]
    assert info.value.problems[0].where == "line 2: facts"


# --- concurrency and access ----------------------------------------------------------------------

SAME_TOPIC = [
    ["User is strictly vegetarian", "User avoids meat"],
    ["User is a vegetarian", "User does not eat meat"],
    ["User eats no meat", "User follows a vegetarian diet"],
    ["User never eats meat or fish", "User is vegetarian"],
    ["User prefers vegetarian food", "User avoids meat products"],
    ["User has been vegetarian for years", "User refuses to eat meat"],
    ["User keeps a vegetarian diet", "User avoids beef and pork"],
    ["User only eats vegetarian meals", "User skips meat dishes"],
]


def test_eight_concurrent_packets_on_one_topic_make_one_dossier(empty_db: Driver, embedder: Embedder) -> None:
    packets = [parse_packet(packet("Vegetarian", f, f"block_c{i}")) for i, f in enumerate(SAME_TOPIC)]
    vectors = [embedder.embed([f.text for f in p.facts]) for p in packets]
    barrier = threading.Barrier(len(packets))
    results: list[Any] = [None] * len(packets)
    errors: list[BaseException] = []

    def route(i: int) -> None:
        try:
            barrier.wait()
            results[i] = process_fact_packet(empty_db, packets[i], embedder=embedder, vectors=vectors[i])
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=route, args=(i,)) for i in range(len(packets))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert count(empty_db, "Dossier") == 1
    assert len({r.dossier_id for r in results}) == 1
    assert sorted(r.action for r in results).count("created") == 1
    journal = get_dossier_history(empty_db, Scope.system(), results[0].dossier_id)
    assert [e["op"] for e in journal].count("created") == 1


def test_restricted_packets_never_join_a_public_dossier(empty_db: Driver, embedder: Embedder) -> None:
    public = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    secret = process_fact_packet(
        empty_db,
        packet(
            "Vegetarian Diet", ["User is strictly vegetarian", "User avoids meat"], "b2", access=RESTRICTED
        ),
        embedder=embedder,
    )
    assert secret.action == "created"
    assert secret.dossier_id != public.dossier_id
    records, _, _ = empty_db.execute_query(
        "MATCH (d:Dossier {id: $id})-[:HAS_FACT]->(f:Fact) "
        "RETURN collect(DISTINCT f.sensitivity) AS fs, d.sensitivity AS ds",
        id=secret.dossier_id,
    )
    assert records[0]["ds"] == "high"
    assert records[0]["fs"] == ["high"]
    journal_access, _, _ = empty_db.execute_query(
        "MATCH (j:JournalEntry)-[:ABOUT]->(:Dossier {id: $id}) RETURN collect(DISTINCT j.roles_allowed) AS r",
        id=secret.dossier_id,
    )
    assert journal_access[0]["r"] == [sorted(RESTRICTED["roles_allowed"])]


def test_archived_dossiers_receive_no_packets(empty_db: Driver, embedder: Embedder) -> None:
    first = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    empty_db.execute_query("MATCH (d:Dossier {id: $id}) SET d.status = 'archived'", id=first.dossier_id)
    result = process_fact_packet(
        empty_db, packet("Veg", ["User avoids eggs and dairy"], "b2"), embedder=embedder
    )
    assert result.action == "created"


def test_batch_ingest_routes_in_order(empty_db: Driver, embedder: Embedder) -> None:
    packets = [
        parse_packet(VEGETARIAN),
        parse_packet(packet("Veg", ["User prefers plant-based proteins"], "b2")),
        parse_packet(
            packet("Running", ["User runs three times a week", "User trains for a half marathon"], "b3")
        ),
    ]
    done: list[int] = []
    passes: list[int] = []
    embed = embedder.embed

    def recording(texts: Sequence[str], batch_size: int = PASS) -> Any:
        passes.append(batch_size)
        return embed(texts, batch_size)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(embedder, "embed", recording)
        results = ingest_packets(empty_db, packets, embedder=embedder, progress=done.append)
    assert [r.action for r in results] == ["created", "appended", "created"]
    assert sum(done) == 5
    assert count(empty_db, "Dossier") == 2
    # in one call, in the embedder's passes, smaller than a query batch, so each pads to texts of
    # about its own length (docs/design.md §Dossier queries, "Embedding passes")
    assert passes == [PASS] and PASS < BATCH_SIZE


def test_a_batch_skips_its_applied_packets_and_repeated_keys(empty_db: Driver, embedder: Embedder) -> None:
    """Several packets share an ingest transaction; each keeps its own idempotency key."""
    veg, run, tea = (
        parse_packet(VEGETARIAN),
        parse_packet(packet("Running", ["User runs three times a week"], "b2")),
        parse_packet(packet("Tea", ["User drinks green tea every morning"], "b3")),
    )
    first = ingest_packets(empty_db, [veg, run], embedder=embedder)
    again = ingest_packets(empty_db, [veg, tea, run, tea], embedder=embedder)
    assert [r.action for r in again] == ["already_applied", "created", "already_applied", "already_applied"]
    assert [again[0].dossier_id, again[2].dossier_id] == [first[0].dossier_id, first[1].dossier_id]
    assert again[3].dossier_id == again[1].dossier_id
    assert count(empty_db, "Fact") == 4
    assert count(empty_db, "Dossier") == 3


@pytest.mark.parametrize("remembered", ["the database's", "none"])
def test_a_batch_skips_a_packet_whose_id_is_another_packets_stored_key(
    empty_db: Driver, embedder: Embedder, remembered: str
) -> None:
    """Two packets of one batch stored under one key: one sent without a ``packet_id`` (stored
    under its content hash keyed with the database's secret, the key every result shows) and one
    sent with that key as its ``packet_id``. The second is the first's re-send: it is
    ``already_applied`` and writes nothing. Deciding which packets to route by the keys as sent
    (before the statement returned the secret) routed both: the second's facts overwrote the
    first's under the same ids, and the dossier's centroid sum counted both packets' vectors."""
    first = ingest_packets(empty_db, [parse_packet(VEGETARIAN)], embedder=embedder)[0]  # the secret
    unkeyed = parse_packet(packet("Running", ["User runs three times a week"], "b2"))
    stored_key = governor.stored_as(first_secret(empty_db), unkeyed).key
    keyed = parse_packet(packet("Tea", ["User drinks green tea every morning"], "b3", packet_id=stored_key))
    if remembered == "none":  # a new process: the ids are derived again once the secret is read
        governor._secret_seen.clear()
    results = ingest_packets(empty_db, [unkeyed, keyed], embedder=embedder)
    assert [r.action for r in results] == ["created", "already_applied"]
    assert results[0].packet_key == stored_key and results[1].dossier_id == results[0].dossier_id
    assert first.dossier_id != results[0].dossier_id
    assert facts_of(empty_db, results[0].dossier_id) == ["User runs three times a week"]
    records, _, _ = empty_db.execute_query(
        """MATCH (d:Dossier {id: $id})-[:HAS_FACT]->(f:Fact)
        RETURN d.centroid_sum AS stored, collect(f.embedding) AS vectors""",
        id=results[0].dossier_id,
    )
    stored, vectors = records[0]["stored"], records[0]["vectors"]
    assert np.allclose(stored, np.sum(vectors, axis=0), atol=1e-6)


def first_secret(driver: Driver) -> str:
    """The database's secret, as the routing lock node keeps it (``lock.secret``); the
    correspondence's lock is a CairnLock too, and no test's wipe deletes either."""
    records, _, _ = driver.execute_query(
        "MATCH (l:CairnLock {id: $lock}) RETURN l.secret AS secret", lock=LOCK_ID
    )
    return str(records[0]["secret"])


def test_a_failing_packet_in_a_batch_is_retried_alone_and_nothing_of_it_is_written(
    empty_db: Driver, embedder: Embedder
) -> None:
    """The shared transaction fails; the packets are retried one transaction each: those before the
    bad one are applied, the bad one raises with nothing of it written, and a re-run completes."""
    good = parse_packet({**VEGETARIAN, "packet_id": "good"})
    bad = parse_packet(packet("Running", ["User runs three times a week"], "b2", packet_id="bad"))
    later = parse_packet(packet("Tea", ["User drinks green tea every morning"], "b3"))
    clash = {"id": entry_id(bad.key, 0)}  # the bad packet's first journal entry id, taken by a block
    empty_db.execute_query(
        "CREATE (:Entity:Block {id: $id, block_id: 'clash', domain: 'acme/assistant', sensitivity: 'low'})",
        clash,
    )
    with pytest.raises(ConstraintError):
        ingest_packets(empty_db, [good, bad, later], embedder=embedder)
    records, _, _ = empty_db.execute_query(
        "MATCH (n:Entity) WHERE n.packet_key = $key OR n.work_key = $key OR n.id STARTS WITH 'dos-' + $key "
        "RETURN count(n) AS n",
        key=bad.key,
    )
    assert records[0]["n"] == 0
    assert facts_of(empty_db, f"dos-{good.key}") == [f.text for f in good.facts]
    assert count(empty_db, "Fact") == len(good.facts)
    empty_db.execute_query("MATCH (b:Block {block_id: 'clash'}) DELETE b")
    rerun = ingest_packets(empty_db, [good, bad, later], embedder=embedder)
    assert [r.action for r in rerun] == ["already_applied", "created", "created"]
    assert count(empty_db, "Fact") == 4


# --- the adjudicator ----------------------------------------------------------------------------


class _AlwaysCreate:
    """An adjudicator with a fixed opinion, to show a verdict overrides the rule and is journalled."""

    name = "always-create"

    def decide(self, packet: FactPacket, candidates: Sequence[Candidate], proposal: Decision) -> Decision:
        return Decision("create", None, "fixed opinion", decided_by=self.name)


def test_an_adjudicator_verdict_overrides_the_rule(empty_db: Driver, embedder: Embedder) -> None:
    process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    result = process_fact_packet(
        empty_db,
        packet("Veg", ["User avoids eggs and dairy"], "b2"),
        embedder=embedder,
        adjudicator=_AlwaysCreate(),
    )
    assert result.action == "created"
    history = get_dossier_history(empty_db, Scope.system(), result.dossier_id)
    assert history[0]["details"]["decision"]["decided_by"] == "always-create"


def test_llm_adjudicator_falls_back_to_the_rule(
    empty_db: Driver, embedder: Embedder, settings: Settings
) -> None:
    first = process_fact_packet(empty_db, VEGETARIAN, embedder=embedder)
    with StubLLMServer() as stub:
        llm = LLMAdjudicator(LLMClient(settings.model_copy(update={"llm_base_url": stub.url})))
        result = process_fact_packet(
            empty_db, packet("Veg", ["User avoids eggs and dairy"], "b2"), embedder=embedder, adjudicator=llm
        )
        assert len(stub.requests) == 1
        assert "User avoids eggs and dairy" in stub.requests[0]["messages"][-1]["content"]
    assert result.dossier_id == first.dossier_id
    assert result.decision is not None
    assert result.decision.decided_by == "rule"
    assert "no usable decision" in result.decision.reason
    with StubLLMServer(fail_with=503) as down:
        llm = LLMAdjudicator(LLMClient(settings.model_copy(update={"llm_base_url": down.url})))
        result = process_fact_packet(
            empty_db,
            packet("Veg", ["User prefers plant-based proteins"], "b3"),
            embedder=embedder,
            adjudicator=llm,
        )
    assert result.action == "appended"
    assert result.decision is not None and "503" in result.decision.reason


def test_adjudication_answers_are_parsed_strictly() -> None:
    cands = [Candidate("dos-a", "A", 2, 1.2, 2, 0.7)]
    proposal = decide(cands, 2)
    assert parse_adjudication('{"action": "create"}', cands, proposal).action == "create"
    chosen = parse_adjudication('Sure: {"action": "append", "target_dossier_id": "dos-a"}', cands, proposal)
    assert (chosen.action, chosen.target, chosen.decided_by) == ("append", "dos-a", "llm")
    stranger = parse_adjudication('{"action": "append", "target_dossier_id": "dos-zzz"}', cands, proposal)
    assert (stranger.target, stranger.decided_by) == ("dos-a", "rule")
    assert "not a candidate" in stranger.reason


# --- the vote and the rule (pure) ----------------------------------------------------------------

hit_lists = st.lists(
    st.builds(
        Hit,
        fact_index=st.integers(0, 4),
        dossier_id=st.sampled_from(["dos-a", "dos-b", "dos-c"]),
        fact_id=st.text("abcdef", min_size=1, max_size=3),
        score=st.floats(0.4, 1.0),
    ),
    max_size=30,
)


@settings(max_examples=150)
@given(hits=hit_lists, seed=st.randoms())
def test_tally_ranks_by_hits_then_score_sum_whatever_the_order(hits: list[Hit], seed: Any) -> None:
    ranked = tally(hits, {})
    shuffled = list(hits)
    seed.shuffle(shuffled)
    again = tally(shuffled, {})
    assert [c.dossier_id for c in ranked] == [c.dossier_id for c in again]
    keys = [(-c.hits, -round(c.score_sum, 6), c.dossier_id) for c in ranked]
    assert keys == sorted(keys)
    assert sum(c.hits for c in ranked) == len(hits)
    for c in ranked:
        assert c.supporters == len({h.fact_index for h in hits if h.dossier_id == c.dossier_id})


@settings(max_examples=150)
@given(hits=hit_lists, n_facts=st.integers(1, 5))
def test_rule_appends_exactly_on_a_strict_majority_of_facts(hits: list[Hit], n_facts: int) -> None:
    hits = [h for h in hits if h.fact_index < n_facts]
    candidates = tally(hits, {})
    decision = decide(candidates, n_facts)
    if candidates and candidates[0].supporters * 2 > n_facts:
        assert (decision.action, decision.target) == ("append", candidates[0].dossier_id)
    else:
        assert (decision.action, decision.target) == ("create", None)


DIET_PACKETS = [
    VEGETARIAN,
    packet("Veg", ["User prefers plant-based proteins"], "b2"),
    packet("Veg", ["User avoids eggs and dairy", "User cooks lentil soup on Sundays"], "b3"),
    packet("Veg", ["User is strictly vegetarian"], "b4"),  # restates a stored fact: skipped
    packet("Veg", ["User buys tofu every week", "User dislikes the smell of cooked meat"], "b5"),
    packet("Veg", ["User never eats meat", "User orders the vegetarian menu"], "b6"),
]


def _journal_chain(driver: Driver) -> None:
    """Each dossier's ``summary_updated`` entries, in the order they were written, form one chain:
    each entry's previous summary is the one the entry before it left (the first's, the summary
    its dossier was created with) and the last one's is the summary stored now; none records an
    unchanged summary. And each unit's entries are ``je-<key>-0..n-1``, without gaps."""
    records, _, _ = driver.execute_query(
        "MATCH (j:JournalEntry)-[:ABOUT]->(d:Dossier) "
        "RETURN d.id AS dossier, d.summary AS stored, j.work_key AS key, j.seq AS seq, j.id AS id, "
        "j.op AS op, j.previous_value AS previous, j.new_value AS new, j.timestamp AS at "
        "ORDER BY at, seq"
    )
    units: dict[str, list[tuple[int, str]]] = {}
    for r in records:
        units.setdefault(r["key"], []).append((r["seq"], r["id"]))
    for key, entries in units.items():
        assert sorted(entries) == [(s, f"je-{key}-{s}") for s in range(len(entries))], key
    by_dossier: dict[str, list[Any]] = {}
    for r in records:
        by_dossier.setdefault(r["dossier"], []).append(r)
    for rows in by_dossier.values():
        updates = [r for r in rows if r["op"] == "summary_updated"]
        for before, after in itertools.pairwise(updates):
            assert after["previous"] == before["new"]
        for u in updates:
            assert u["previous"] != u["new"]
        if updates:
            assert updates[-1]["new"] == rows[0]["stored"]


def test_a_packets_summary_entries_chain_to_the_stored_summary(empty_db: Driver, embedder: Embedder) -> None:
    for sent in DIET_PACKETS:
        process_fact_packet(empty_db, sent, embedder=embedder)
    assert count(empty_db, "JournalEntry {op: 'summary_updated'}") >= 1
    _journal_chain(empty_db)


def test_a_batchs_summary_entries_chain_to_the_stored_summary(empty_db: Driver, embedder: Embedder) -> None:
    ingest_packets(empty_db, [parse_packet(p) for p in DIET_PACKETS], embedder=embedder)
    assert count(empty_db, "JournalEntry {op: 'summary_updated'}") >= 1
    _journal_chain(empty_db)
