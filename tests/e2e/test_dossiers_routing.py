"""Issue 16's routing and deduplication, against the real Neo4j and the real embedding model.

A mixed packet lands in one dossier per topic; a large dossier that every fact has a neighbour
in does not absorb a cluster it does not fit; facts differing in a name, a date or a number
are kept apart even at cosine >= 0.92, while a restated fact is folded into the stored one
with every turn and block id kept; the gardener splits an incoherent dossier and journals it;
ingesting twice leaves the graph byte-for-byte as it was.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from neo4j import Driver

from cairn.memory.dossiers.dedup import DEDUP_COSINE, details, same_fact
from cairn.memory.dossiers.gardener import SPLIT_COHERENCE, coherence, split_incoherent_dossiers
from cairn.memory.dossiers.governor import ingest_packets, process_fact_packet
from cairn.memory.dossiers.models import parse_packet
from cairn.memory.dossiers.retriever import get_dossier_history
from cairn.memory.dossiers.voting import decide
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.schema.checksum import graph_checksum


def packet(label: str, facts: list[Any], block: str = "block_001", **extra: Any) -> dict[str, Any]:
    return {"cluster_label": label, "facts": facts, "source_block_id": block, **extra}


def dossier_facts(driver: Driver) -> dict[str, list[str]]:
    records, _, _ = driver.execute_query(
        "MATCH (d:Dossier {status: 'active'})-[:HAS_FACT]->(f:Fact) "
        "WITH d, f ORDER BY f.added_at, f.id RETURN d.id AS id, collect(f.text) AS texts"
    )
    return {r["id"]: r["texts"] for r in records}


# --- what counts as the same fact ---------------------------------------------------------------

DIFFERENT_DETAIL = [
    ("Sam plans a painting session with Evan", "Evan plans a painting session with Sam"),  # who plans
    ("Melanie went camping last week", "Melanie went camping last year"),
    ("Melanie went camping in June 2023", "Melanie went camping in July 2023"),
    ("Jon has 2 dogs", "Jon has 3 dogs"),
    ("Jon has two dogs", "Jon has three dogs"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT_DETAIL)
def test_close_facts_with_a_different_name_date_or_number_are_not_the_same(
    embedder: Embedder, a: str, b: str
) -> None:
    va, vb = embedder.embed([a, b])
    cosine = float(va @ vb)
    assert cosine >= DEDUP_COSINE  # cosine alone would have called them duplicates
    assert details(a) != details(b)
    assert not same_fact(a, b, cosine)


def test_restatements_and_same_text_are_the_same(embedder: Embedder) -> None:
    a, b = "User is strictly vegetarian", "The user is strictly vegetarian"
    va, vb = embedder.embed([a, b])
    assert same_fact(a, b, float(va @ vb))
    assert same_fact("Jon lost his job at Door Dash.", "Jon  lost his job at Door Dash.", 0.0)
    assert details("I went to Paris on 3 May with Anna") == ("paris", "3", "may", "anna")


def test_facts_differing_in_a_name_date_or_number_are_all_kept(empty_db: Driver, embedder: Embedder) -> None:
    first = process_fact_packet(
        empty_db, packet("One", [a for a, _ in DIFFERENT_DETAIL], "b1"), embedder=embedder
    )
    second = process_fact_packet(
        empty_db, packet("Two", [b for _, b in DIFFERENT_DETAIL], "b2"), embedder=embedder
    )
    assert first.skipped == () and second.skipped == ()
    stored = sorted(t for texts in dossier_facts(empty_db).values() for t in texts)
    assert stored == sorted(t for pair in DIFFERENT_DETAIL for t in pair)


def test_the_same_fact_from_two_turns_keeps_both_turn_ids(empty_db: Driver, embedder: Embedder) -> None:
    text = "Caroline is researching adoption agencies"
    first = process_fact_packet(
        empty_db, packet("Adoption", [{"text": text, "turn_id": "D1:3"}], "conv-s1"), embedder=embedder
    )
    second = process_fact_packet(
        empty_db,
        packet(
            "Adoption",
            [
                {"text": text, "turn_id": "D4:5"},
                {"text": "Melanie went camping in June 2023", "turn_id": "D4:9"},
                {"text": "Melanie went camping in June 2023", "turn_id": "D4:11"},
            ],
            "conv-s4",
        ),
        embedder=embedder,
    )
    (survivor,) = first.added
    assert [(s.text, s.duplicate_of) for s in second.skipped] == [
        (text, survivor),
        ("Melanie went camping in June 2023", second.added[0]),
    ]
    records, _, _ = empty_db.execute_query(
        "MATCH (f:Fact) RETURN f.text AS text, f.source_turn_ids AS turns, f.source_block_ids AS blocks, "
        "f.source_turn_id AS turn ORDER BY f.id"
    )
    rows = {r["text"]: r.data() for r in records}
    assert len(records) == 2
    assert rows[text]["turns"] == ["D1:3", "D4:5"]  # its own first
    assert rows[text]["blocks"] == ["conv-s1", "conv-s4"]
    assert rows[text]["turn"] == "D1:3"
    camping = rows["Melanie went camping in June 2023"]
    assert (camping["turns"], camping["blocks"]) == (["D4:9", "D4:11"], ["conv-s4"])
    skips = [
        e
        for e in get_dossier_history(empty_db, Scope.system(), first.dossier_id)
        if e["op"] == "fact_skipped"
    ]
    assert [(e["details"]["duplicate_of"], e["details"]["source_turn_id"]) for e in skips] == [
        (survivor, "D4:5")
    ]
    assert skips[0]["details"]["source_block_id"] == "conv-s4"


# --- routing ------------------------------------------------------------------------------------

VEGETARIAN = ["User is strictly vegetarian", "User avoids meat"]
RUNNING = ["User runs three times a week", "User trains for a half marathon"]


def test_a_mixed_topic_packet_lands_in_one_dossier_per_topic(empty_db: Driver, embedder: Embedder) -> None:
    veg = process_fact_packet(empty_db, packet("Diet", VEGETARIAN, "b1"), embedder=embedder).dossier_id
    run = process_fact_packet(empty_db, packet("Running", RUNNING, "b2"), embedder=embedder).dossier_id
    mixed = process_fact_packet(
        empty_db,
        packet("Week", ["User avoids eggs and dairy", "User runs a 10k race every spring"], "b3"),
        embedder=embedder,
    )
    assert {p.dossier_id: p.action for p in mixed.placements} == {veg: "appended", run: "appended"}
    stored = dossier_facts(empty_db)
    assert stored[veg][-1] == "User avoids eggs and dairy"
    assert stored[run][-1] == "User runs a 10k race every spring"
    history = get_dossier_history(empty_db, Scope.system(), run)
    assert [e["op"] for e in history][-1] == "fact_added"


def test_a_topic_coherent_packet_lands_in_one_dossier(empty_db: Driver, embedder: Embedder) -> None:
    result = process_fact_packet(
        empty_db,
        packet("Diet", [*VEGETARIAN, "User follows a vegetarian diet", "User never eats beef or pork"]),
        embedder=embedder,
    )
    assert [p.action for p in result.placements] == ["created"]
    assert len(result.added) == 4


# One story each about a person, as a snowballed dossier held them: every later fact about
# Caroline has neighbours in it through her name alone.
CAROLINE_MIXED = [
    "Caroline went to an LGBTQ support group meeting",
    "Caroline wants to become a counselor",
    "Caroline painted a sunset over the lake",
    "Caroline's grandmother gave her a necklace from Sweden",
    "Caroline is researching adoption agencies",
    "Caroline gave a talk at her old school",
    "Caroline plays the guitar at open mic nights",
    "Caroline went hiking with her friends in the mountains",
    "Caroline reads books about identity",
    "Caroline volunteers at a youth shelter",
]
CAROLINE_PUPPY = ["Caroline adopted a puppy named Max", "Caroline walks her puppy Max every morning"]


def test_a_large_dossier_does_not_absorb_an_unrelated_cluster(empty_db: Driver, embedder: Embedder) -> None:
    big = process_fact_packet(empty_db, packet("Caroline", CAROLINE_MIXED, "b1"), embedder=embedder)
    assert [p.action for p in big.placements] == ["created"]
    result = process_fact_packet(empty_db, packet("Puppy", CAROLINE_PUPPY, "b2"), embedder=embedder)
    # every fact of the packet voted for the big dossier: note 000's rule would have appended
    assert result.candidates[0].dossier_id == big.dossier_id
    assert decide(list(result.candidates), len(CAROLINE_PUPPY)).action == "append"
    assert [p.action for p in result.placements] == ["created"]
    assert result.dossier_id != big.dossier_id
    assert len(dossier_facts(empty_db)[big.dossier_id]) == len(CAROLINE_MIXED)


# --- the gardener's split -----------------------------------------------------------------------

COOKING = [
    "User bakes sourdough bread every weekend",
    "User cooks lentil curry on Mondays",
    "User makes fresh pasta by hand",
    "User roasts vegetables for dinner",
    "User bakes cinnamon rolls for breakfast",
]
CLOUD = [
    "The billing service runs on Kubernetes",
    "The cloud cost report is sent every month",
    "The staging cluster scales down at night",
    "The database backups are stored in object storage",
    "The deployment pipeline runs integration tests",
]


def test_the_gardener_splits_an_incoherent_dossier_and_journals_it(
    empty_db: Driver, embedder: Embedder
) -> None:
    # A first packet with no dossier to join makes one dossier of all its clusters: two topics.
    mixed = process_fact_packet(empty_db, packet("Notes", [*COOKING, *CLOUD], "b1"), embedder=embedder)
    assert [p.action for p in mixed.placements] == ["created"]
    assert coherence(embedder.embed([*COOKING, *CLOUD])) < SPLIT_COHERENCE
    (split,) = split_incoherent_dossiers(empty_db)
    assert split.source == mixed.dossier_id
    stored = dossier_facts(empty_db)
    assert sorted(map(sorted, stored.values())) == sorted([sorted(COOKING), sorted(CLOUD)])
    (part,) = [did for did in stored if did != mixed.dossier_id]
    for did in stored:
        entries = [e for e in get_dossier_history(empty_db, Scope.system(), did) if e["op"] == "split"]
        assert len(entries) == 1
        assert entries[0]["details"]["part"] == part
        assert sorted(entries[0]["details"]["fact_ids"]) == sorted(split.parts[1][1])
    records, _, _ = empty_db.execute_query(
        "MATCH (d:Dossier) RETURN d.id AS id, d.summary AS summary, "
        "d.domain AS domain, d.roles_allowed AS roles"
    )
    for r in records:
        sentences = [s.strip() for s in r["summary"].split(".") if s.strip()]
        assert sentences and all(s in stored[r["id"]] for s in sentences)
        assert (r["domain"], r["roles"]) == (
            "acme/assistant",
            sorted(["staff", "manager", "director", "exec", "writer"]),
        )
    assert split_incoherent_dossiers(empty_db) == []  # both parts cohere now


# --- idempotent ingest --------------------------------------------------------------------------


def test_ingesting_the_same_packets_twice_changes_nothing(empty_db: Driver, embedder: Embedder) -> None:
    raw = [
        packet("Diet", [{"text": t, "turn_id": f"D1:{n}"} for n, t in enumerate(VEGETARIAN)], "s1"),
        packet("Mixed", [{"text": "User avoids eggs and dairy", "turn_id": "D2:1"}, *RUNNING], "s2"),
        packet("Again", [{"text": VEGETARIAN[0], "turn_id": "D3:4"}, *COOKING[:2]], "s3"),
    ]
    packets = [parse_packet(p) for p in raw]
    first = ingest_packets(empty_db, packets, embedder=embedder)
    before = graph_checksum(empty_db)
    again = ingest_packets(empty_db, packets, embedder=embedder)
    assert [r.action for r in again] == ["already_applied"] * len(packets)
    assert graph_checksum(empty_db) == before
    assert {r.dossier_id for r in again} <= {p.dossier_id for r in first for p in r.placements}
    journal, _, _ = empty_db.execute_query(
        "MATCH (j:JournalEntry {op: 'fact_skipped'}) RETURN j.details AS d"
    )
    assert [json.loads(r["d"])["source_turn_id"] for r in journal] == ["D3:4"]
