"""The gardener and the context assembler: note 000 Phase 2 / Phase 5 / Phase 6 and note 001.

Classification (Python 3.9 / no-eval / Box A / dark mode), block metadata round trip,
group-by-block hydration, gardening a block end to end (tags stored once, narrative facts
routed, turns deleted, facts and provenance kept), the two-block vegetarian scenario and
the migration over unprocessed blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from neo4j import Driver

from cairn.memory.dossiers.blocks import get_block_metadata, ingest_block, ingest_blocks, save_block_metadata
from cairn.memory.dossiers.context import Chunk, hydrate_chunks_with_metadata, hydrate_dossiers, section_tags
from cairn.memory.dossiers.gardener import (
    BlockNotFound,
    garden_all,
    garden_block,
    group_facts,
)
from cairn.memory.dossiers.models import FactItem, InputError
from cairn.memory.dossiers.retriever import get_dossier, get_dossier_history
from cairn.memory.dossiers.tagging import classify_facts, tag_for
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder

NOTE_FACTS = [
    {"value": "I am using Python 3.9", "turn_id": "turn_001"},
    {"value": "Never use eval() in this code", "turn_id": "turn_002"},
    {"value": "For this test, call the server Box A", "turn_id": "turn_003"},
    {"value": "User prefers dark mode", "turn_id": "turn_004"},
]

CODING_BLOCK: dict[str, Any] = {
    "block_id": "block_001",
    "timestamp": "2025-12-17T10:00:00Z",
    "turns": [
        {"turn_id": "turn_001", "user": "I am using Python 3.9.", "assistant": "Noted."},
        {"turn_id": "turn_002", "user": "Never use eval() in this code.", "assistant": "No eval()."},
        {"turn_id": "turn_003", "user": "For this test, call the server Box A.", "assistant": "Box A."},
        {"turn_id": "turn_004", "user": "I prefer dark mode.", "assistant": "Dark mode it is."},
        {"turn_id": "turn_005", "user": "Box A times out.", "assistant": "Raise the timeout."},
    ],
    "facts": NOTE_FACTS,
}


def count(driver: Driver, label: str) -> int:
    records, _, _ = driver.execute_query(f"MATCH (n:{label}) RETURN count(n) AS n")
    return int(records[0]["n"])


def facts(raw: list[dict[str, Any]]) -> list[FactItem]:
    return [FactItem.model_validate(f) for f in raw]


# --- note 000 Phase 2 checkpoint: classification, metadata, hydration --------------------------


def test_tagging_classification_of_the_note_facts() -> None:
    classification = classify_facts(facts(NOTE_FACTS))
    assert "env: python-3.9" in classification.global_tags
    assert any(r["rule"] == "no-eval" for r in classification.section_rules)
    assert any(r["tag"] == "alias: server=Box A" for r in classification.section_rules)
    assert [f.text for f in classification.dossier_facts] == ["User prefers dark mode"]
    no_eval = next(r for r in classification.section_rules if r["rule"] == "no-eval")
    assert (no_eval["start_turn"], no_eval["end_turn"]) == (2, 4)


@pytest.mark.parametrize(
    ("text", "tag", "is_global"),
    [
        ("We are working on the Legacy System", "context: legacy-system", True),
        ("We are on Windows", "os: windows", True),
        ("Always check permissions first", "constraint: check-permissions", True),
        ("Do not commit secrets to git", "constraint: no-commit-secrets", False),
        ("Tartarus v3 is now deprecated", "status: deprecated", False),
        ("Let's call the server 'Box A'", "alias: server=Box A", False),
        ("The API was renamed to NewAPI", "alias: API=NewAPI", False),
    ],
)
def test_each_heuristic_fires(text: str, tag: str, is_global: bool) -> None:
    found = tag_for(text)
    assert found is not None
    assert (found.tag, found.is_global) == (tag, is_global)


@pytest.mark.parametrize(
    "text",
    [
        "User prefers dark mode",
        "User avoids meat",
        "User avoids eggs and dairy",
        "The billing reconciliation job runs at 02:00 UTC",
        "User runs for 30 minutes",
        "User is on version 2 of the plan",
    ],
)
def test_narrative_facts_are_not_tags(text: str) -> None:
    assert tag_for(text) is None


def test_a_redefinition_ends_the_earlier_range() -> None:
    c = classify_facts(
        facts(
            [
                {"value": "Call the server Box A", "turn_index": 2},
                {"value": "Call the server Box B", "turn_index": 6},
            ]
        ),
        last_turn=9,
    )
    ranges = [(r["rule"], r["start_turn"], r["end_turn"]) for r in c.section_rules]
    assert ranges == [("server=Box A", 2, 5), ("server=Box B", 6, 9)]


def test_block_metadata_round_trip(empty_db: Driver) -> None:
    rules = [{"start_turn": 2, "end_turn": 5, "rule": "no-eval"}]
    save_block_metadata(empty_db, "block_001", ["env: python-3.9"], rules)
    metadata = get_block_metadata(empty_db, Scope.system(), "block_001")
    assert metadata is not None
    assert metadata.global_tags == ["env: python-3.9"]
    assert metadata.section_rules == rules


def test_grouped_hydration_writes_tags_once_per_block(empty_db: Driver) -> None:
    save_block_metadata(
        empty_db, "block_001", ["env: python-3.9"], [{"start_turn": 2, "end_turn": 5, "rule": "no-eval"}]
    )
    chunks = [
        {"block_id": "block_001", "text": "Chunk 1", "turn_id": "turn_003"},
        {"block_id": "block_001", "text": "Chunk 2", "turn_id": "turn_004"},
    ]
    context = hydrate_chunks_with_metadata(empty_db, Scope.system(), chunks)
    assert context.count("Active Rules") == 1
    assert context.count("Chunk") == 2
    assert context.count("[no-eval]") == 2


def test_section_tags_only_on_turns_in_range(empty_db: Driver) -> None:
    save_block_metadata(
        empty_db, "b1", ["os: linux"], [{"start_turn": 3, "end_turn": 4, "tag": "alias: x=y"}]
    )
    save_block_metadata(empty_db, "b2", ["env: node-18"], [])
    chunks = [
        Chunk("b1", "early", 1),
        Chunk("b2", "other", 2),
        Chunk("b1", "inside", 3),
        Chunk("b1", "late", 5),
    ]
    lines = hydrate_chunks_with_metadata(empty_db, Scope.system(), chunks).splitlines()
    assert "  early" in lines and "  [alias: x=y] inside" in lines and "  late" in lines
    assert lines.count("Active Rules: os: linux") == 1 and lines.count("Active Rules: env: node-18") == 1
    # chunks are grouped under their block even when they arrive interleaved
    inside = lines.index("  [alias: x=y] inside")
    assert lines.index("### Context Block: b1") < inside < lines.index("### Context Block: b2")


@settings(max_examples=100)
@given(
    turn=st.integers(0, 20),
    rules=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)).map(sorted), max_size=5),
)
def test_section_tags_property(turn: int, rules: list[list[int]]) -> None:
    as_rules = [{"start_turn": a, "end_turn": b, "tag": f"t{i}"} for i, (a, b) in enumerate(rules)]
    assert section_tags(turn, as_rules) == [f"t{i}" for i, (a, b) in enumerate(rules) if a <= turn <= b]


def test_hidden_blocks_lend_no_tags(empty_db: Driver, settings: Any) -> None:
    from cairn.policy.profiles import PolicyRegistry

    save_block_metadata(empty_db, "b1", ["env: python-3.9"], [])
    empty_db.execute_query("MATCH (b:Block {block_id: 'b1'}) SET b.roles_allowed = ['director']")
    staff = Scope.from_profile(PolicyRegistry.load(settings.policy_file).roles["staff"])
    text = hydrate_chunks_with_metadata(empty_db, staff, [Chunk("b1", "a chunk", 1)])
    assert "python" not in text
    assert get_block_metadata(empty_db, staff, "b1") is None


# --- gardening -------------------------------------------------------------------------------


def test_garden_block_tags_routes_and_deletes_turns(empty_db: Driver, embedder: Embedder) -> None:
    ingest_block(empty_db, CODING_BLOCK)
    assert count(empty_db, "Turn") == 5
    report = garden_block(empty_db, "block_001", embedder=embedder)
    assert report.global_tags == ["env: python-3.9"]
    assert {r["rule"] for r in report.section_rules} == {"no-eval", "server=Box A"}
    assert report.turns_deleted == 5
    assert count(empty_db, "Turn") == 0

    meta = get_block_metadata(empty_db, Scope.system(), "block_001")
    assert meta is not None
    assert meta.global_tags == ["env: python-3.9"]
    assert meta.processed_at is not None
    assert meta.turns == 0
    assert meta.facts == 4  # three tag facts and the dark-mode fact stay, linked to the block

    [routed] = report.routed
    dossier = get_dossier(empty_db, Scope.system(), routed.dossier_id)
    assert dossier is not None
    assert [f["text"] for f in dossier.facts] == ["User prefers dark mode"]
    assert dossier.facts[0]["turn_index"] == 4
    assert [e["op"] for e in dossier.history] == ["created"]

    # the facts' turns fall inside the block's section rules: hydration shows them once per block
    text = hydrate_dossiers(empty_db, Scope.system(), [dossier])
    assert text.count("Active Rules: env: python-3.9") == 1
    assert "[constraint: no-eval] [alias: server=Box A] User prefers dark mode" in text

    again = garden_block(empty_db, "block_001", embedder=embedder)
    assert again.already_processed
    assert count(empty_db, "Dossier") == 1


def test_semantic_grouping_is_deterministic(embedder: Embedder) -> None:
    texts = [
        "User is strictly vegetarian",
        "User prefers dark mode",
        "User avoids meat",
        "User uses a high-contrast theme in the editor",
    ]
    vectors = embedder.embed(texts)
    groups = group_facts(texts, vectors)
    assert [g.indexes for g in groups] == [(0, 2), (1, 3)]
    assert groups[0].label == "Vegetarian"
    assert group_facts(texts, np.array(vectors)) == groups


def test_two_block_vegetarian_scenario(empty_db: Driver, embedder: Embedder) -> None:
    """note 000 Phase 5 E2E: facts arriving in separate blocks build one dossier."""
    ingest_block(
        empty_db,
        {
            "block_id": "block_001",
            "turns": [{"turn_id": "turn_001", "user": "I am strictly vegetarian", "assistant": "Noted."}],
            "facts": [{"value": "User is strictly vegetarian", "turn_id": "turn_001"}],
        },
    )
    garden_block(empty_db, "block_001", embedder=embedder)
    records, _, _ = empty_db.execute_query("MATCH (d:Dossier) RETURN d.id AS id, d.title AS title")
    assert len(records) == 1
    dossier_id = records[0]["id"]
    assert "vegetarian" in records[0]["title"].lower()

    ingest_block(
        empty_db,
        {
            "block_id": "block_002",
            "turns": [{"turn_id": "turn_002", "user": "I also avoid eggs and dairy", "assistant": "Vegan?"}],
            "facts": [{"value": "User avoids eggs and dairy", "turn_id": "turn_002"}],
        },
    )
    garden_block(empty_db, "block_002", embedder=embedder)
    assert count(empty_db, "Dossier") == 1
    dossier = get_dossier(empty_db, Scope.system(), dossier_id)
    assert dossier is not None
    texts = [f["text"].lower() for f in dossier.facts]
    assert len(texts) >= 2
    assert any("vegetarian" in t for t in texts)
    assert any("eggs" in t or "dairy" in t for t in texts)
    history = get_dossier_history(empty_db, Scope.system(), dossier_id)
    assert history[0]["op"] == "created"
    assert history[-1]["op"] == "fact_added"
    assert count(empty_db, "Turn") == 0


def test_migration_gardens_every_unprocessed_block(empty_db: Driver, embedder: Embedder) -> None:
    ingest_blocks(
        empty_db,
        [
            CODING_BLOCK,
            {"block_id": "block_002", "facts": ["User is strictly vegetarian", "User avoids meat"]},
            {"block_id": "block_003", "facts": ["User avoids eggs and dairy"]},
        ],
    )
    seen: list[tuple[str, int, int]] = []
    report = garden_all(empty_db, embedder=embedder, progress=lambda b, n, t: seen.append((b, n, t)))
    assert sorted(report.gardened) == ["block_001", "block_002", "block_003"]
    assert not report.failed
    assert [n for _, n, _ in seen] == [1, 2, 3]
    assert report.dossiers == 2
    assert sorted(r["facts"] for r in report.fact_distribution) == [1, 3]
    ops = {(r["op"], r["n"]) for r in report.provenance}
    assert ("created", 1) in ops and ("fact_added", 1) in ops
    assert report.facts_total == report.facts_embedded == 4
    assert garden_all(empty_db, embedder=embedder).gardened == []


def test_bad_blocks_are_refused_and_nothing_is_written(empty_db: Driver) -> None:
    with pytest.raises(InputError) as info:
        ingest_blocks(empty_db, [CODING_BLOCK, {"turns": [], "facts": ["x"]}])
    assert any("block_id" in p.where for p in info.value.problems)
    with pytest.raises(InputError):
        ingest_block(empty_db, {"block_id": "b1", "facts": [7]})
    with pytest.raises(InputError):
        ingest_block(
            empty_db,
            {"block_id": "b1", "turns": [{"user": "hi"}], "facts": [{"value": "x", "turn_id": "nope"}]},
        )
    with pytest.raises(InputError):
        ingest_block(empty_db, {"block_id": "has space"})
    assert count(empty_db, "Entity") == 0


def test_a_gardened_block_cannot_be_ingested_again(empty_db: Driver, embedder: Embedder) -> None:
    ingest_block(empty_db, {"block_id": "b1", "turns": [{"user": "hi"}], "facts": ["User likes tea"]})
    garden_block(empty_db, "b1", embedder=embedder)
    with pytest.raises(InputError) as info:
        ingest_block(empty_db, {"block_id": "b1", "turns": [{"user": "hi again"}]})
    assert "already gardened" in str(info.value)
    assert count(empty_db, "Turn") == 0


def test_unknown_block_is_reported(empty_db: Driver, embedder: Embedder) -> None:
    with pytest.raises(BlockNotFound):
        garden_block(empty_db, "nope", embedder=embedder)
