"""A fact packet's transaction in few round trips, whatever it holds (issue 15: packet p50 under
mixed load, where every round trip waits for a core). One packet, from a writer: its BEGIN with
the statement that takes the routing lock, checks its key (applied before? ids hidden from the
writer?) and votes; the one statement that writes its routes, the provenance of the stored facts
it restates and its journal; the COMMIT. A transaction of many packets (``ingest_packets``) takes
as many. And an ingest's RUN lines name its vectors, never
spell out their floats (the driver builds every RUN's debug line, debug on or not)."""

from __future__ import annotations

import logging
import re

import pytest
from neo4j import Driver

from cairn.memory.dossiers.governor import ingest_packets, process_fact_packet
from cairn.memory.dossiers.models import parse_packet
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.runtime.embedder import Embedder
from tests.e2e.round_trips import Flushes

# BEGIN + lock/key/vote, routes + restated provenance + journal, COMMIT (eight before: BEGIN,
# lock, applied, hidden ids, vote, routes, journal, COMMIT; then four, with the journal alone and
# a fifth for a restated fact's provenance).
PACKET_TRIPS = 3


def _packet(n: int, **extra: object) -> dict[str, object]:
    return {
        "cluster_label": "Running",
        "facts": [f"User ran a {n} km race in spring", f"User trains for race {n} three times a week"],
        "source_block_id": f"block-rt-{n}",
        **extra,
    }


@pytest.fixture
def writer(registry: PolicyRegistry) -> Scope:
    return Scope.from_profile(registry.roles["writer"])


def test_a_writers_packet_is_three_round_trips(empty_db: Driver, writer: Scope, embedder: Embedder) -> None:
    first = process_fact_packet(empty_db, _packet(1, packet_id="rt-1"), embedder=embedder, writer=writer)
    assert first.action == "created"
    for n, sent in enumerate([_packet(2, packet_id="rt-2"), _packet(3)], start=2):
        vectors = embedder.embed([str(f) for f in sent["facts"]])  # type: ignore[union-attr]
        with Flushes() as counted:
            result = process_fact_packet(empty_db, sent, embedder=embedder, vectors=vectors, writer=writer)
        assert result.action == "appended", n
        assert counted.trips == PACKET_TRIPS, n
    with Flushes() as counted:  # sent again: found applied by the same first statement
        again = process_fact_packet(empty_db, _packet(2, packet_id="rt-2"), embedder=embedder, writer=writer)
    assert again.action == "already_applied"
    assert counted.trips <= PACKET_TRIPS
    # Each packet's journal is numbered from 0 without gaps, ``je-<key>-<seq>``, however many
    # summary changes the write left out (the statement numbers them).
    units, _, _ = empty_db.execute_query(
        "MATCH (j:JournalEntry) RETURN j.work_key AS key, collect([j.seq, j.id, j.op]) AS entries"
    )
    assert len(units) == 3
    for unit in units:
        entries = sorted(unit["entries"])
        assert [(s, i) for s, i, _ in entries] == [(s, f"je-{unit['key']}-{s}") for s in range(len(entries))]
        assert all(op is not None for _, _, op in entries)


def test_an_operators_packet_is_three_round_trips(empty_db: Driver, embedder: Embedder) -> None:
    process_fact_packet(empty_db, _packet(1), embedder=embedder)
    sent = _packet(2)
    vectors = embedder.embed([str(f) for f in sent["facts"]])  # type: ignore[union-attr]
    with Flushes() as counted:
        assert process_fact_packet(empty_db, sent, embedder=embedder, vectors=vectors).action == "appended"
    assert counted.trips == PACKET_TRIPS


def test_a_packet_restating_stored_facts_is_as_many_round_trips(empty_db: Driver, embedder: Embedder) -> None:
    process_fact_packet(empty_db, _packet(1, packet_id="rt-first"), embedder=embedder)
    sent = _packet(1, packet_id="rt-again")  # the same facts: both restate stored ones
    vectors = embedder.embed([str(f) for f in sent["facts"]])  # type: ignore[union-attr]
    with Flushes() as counted:
        result = process_fact_packet(empty_db, sent, embedder=embedder, vectors=vectors)
    assert result.added == () and len(result.skipped) == 2
    assert counted.trips == PACKET_TRIPS
    records, _, _ = empty_db.execute_query(
        "MATCH (j:JournalEntry {work_key: 'rt-again'}) RETURN j.op AS op, j.seq AS seq ORDER BY seq"
    )
    assert [(r["op"], r["seq"]) for r in records] == [("fact_skipped", 0), ("fact_skipped", 1)]


def test_a_transaction_of_many_packets_is_as_many_round_trips(empty_db: Driver, embedder: Embedder) -> None:
    packets = [parse_packet(_packet(n, packet_id=f"rt-many-{n}")) for n in range(12)]
    embedder.embed([f.text for p in packets for f in p.facts])  # remembered: the count is the graph's
    with Flushes() as counted:
        results = ingest_packets(empty_db, packets, embedder=embedder)
    assert len(results) == 12 and {r.action for r in results} <= {"created", "appended"}
    assert counted.trips == PACKET_TRIPS  # 24 facts: one transaction


FLOATS = re.compile(r"(?:-?\d\.\d+(?:e-?\d+)?, ){20}")


def test_an_ingests_run_lines_do_not_spell_out_its_vectors(
    empty_db: Driver, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="neo4j")
    process_fact_packet(empty_db, _packet(1), embedder=embedder)
    ingest_packets(empty_db, [parse_packet(_packet(n)) for n in range(2, 5)], embedder=embedder)
    runs = [r.getMessage() for r in caplog.records if "C: RUN" in r.getMessage()]
    assert sum("<vector of 384 floats>" in line for line in runs) >= 4  # votes and writes, both ways
    assert [line[:80] for line in runs if FLOATS.search(line)] == []
