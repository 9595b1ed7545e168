"""The LoCoMo bench's ingest path on the irregularities of the public file, against the real Neo4j.

bench/locomo.py ingests each conversation's observations as one packet per session and speaker
(``bench.locomo_data.packets_of``) and scores the dia_ids of the facts the search returns. A
small conversation written here (no data copied) with a zero-padded observation id, ids in a list
out of order, a session dated in another form and one with no readable date must arrive with
every source turn, in the form the evidence is read in, and the session's date as ``observed_at``.
"""

from __future__ import annotations

from typing import Any

from neo4j import Driver

from bench.locomo_data import Quirks, dia_ids, packets_of, questions_of
from cairn.memory.dossiers.facts import FactRetriever
from cairn.memory.dossiers.governor import ingest_packets
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings

STORED = """
MATCH (f:Fact)
RETURN f.text AS text, f.source_turn_ids AS turns, toString(f.observed_at) AS observed_at
"""


def conversation() -> dict[str, Any]:
    def session(n: int) -> list[dict[str, Any]]:
        return [
            {"speaker": ("James", "John")[t % 2], "dia_id": f"D{n}:{t}", "text": "..."} for t in range(1, 13)
        ]

    return {
        "sample_id": "conv-y",
        "conversation": {
            "speaker_a": "James",
            "speaker_b": "John",
            "session_1_date_time": "1:56 pm on 8 May 2023",  # no comma
            "session_1": session(1),
            "session_2_date_time": "sometime in June",  # unreadable: ingested undated
            "session_2": session(2),
        },
        "observation": {
            "session_1_observation": {
                "James": [["James adopted a beagle named Max.", "D1:03"]],
                "John": [["John is training for a marathon in October.", ["D1:10", "D1:9"]]],
            },
            "session_2_observation": {
                "James": [["James took Max to the vet for a limp.", "D2:5"]],
                "John": [["John ran 30 kilometres on Sunday.", "D2:6"]],
            },
        },
        "qa": [
            {
                "question": "What is the name of James's dog?",
                "answer": "Max",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What is John training for?",
                "answer": "a marathon",
                "evidence": ["D:1:10"],
                "category": 4,
            },
        ],
    }


def test_quirky_conversation_is_ingested_with_its_turns_and_dates(
    empty_db: Driver, embedder: Embedder, settings: Settings
) -> None:
    quirks = Quirks()
    conv = conversation()
    packets, facts = packets_of(conv, quirks)
    questions = questions_of(conv, quirks)
    ingest_packets(empty_db, packets, embedder=embedder)

    records, _, _ = empty_db.execute_query(STORED)
    stored = {r["text"]: (r["turns"], r["observed_at"]) for r in records}
    assert stored == {
        "James adopted a beagle named Max.": (["D1:3"], "2023-05-08T13:56:00Z"),
        "John is training for a marathon in October.": (["D1:9; D1:10"], "2023-05-08T13:56:00Z"),
        "James took Max to the vet for a limp.": (["D2:5"], None),
        "John ran 30 kilometres on Sunday.": (["D2:6"], None),
    }
    assert quirks.counts["sessions_undated"] == 1
    assert quirks.counts["facts_normalised"] == 1 and quirks.counts["evidence_normalised"] == 1
    assert len(facts) == 4

    # every question's evidence is met by the first fact the search returns, read as the bench reads it
    scope = Scope.from_profile(PolicyRegistry.load(settings.policy_file).roles["staff"])
    retriever = FactRetriever(empty_db, embedder)
    for q in questions:
        hits = retriever.search(scope, q.text, top_k=5).hits
        assert q.evidence <= dia_ids(hits[0].fact.get("source_turn_ids") or []), q.text
