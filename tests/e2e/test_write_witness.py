"""The "writes nothing" witness of the refusal tests (tests/e2e/commits.py): it
moves with every committed change, from any session or driver, and with nothing else."""

from __future__ import annotations

import pytest
from neo4j import Driver

from cairn.runtime.database import sync_driver
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.commits import last_commit

PROBE = "MATCH (n:WitnessProbe) DETACH DELETE n"


def test_a_read_a_write_of_nothing_and_a_rollback_leave_it(empty_db: Driver) -> None:
    # A label or property name seen for the first time commits on its own, even in a transaction
    # that rolls back: made here first, so the rollback below is one of a write alone.
    empty_db.execute_query("CREATE (:WitnessProbe {seen: true})")
    empty_db.execute_query(PROBE)
    before = last_commit(empty_db)
    empty_db.execute_query("MATCH (n) RETURN count(n)")
    empty_db.execute_query("MATCH (n:WitnessProbe) SET n.seen = true")  # matches nothing
    with empty_db.session() as session, pytest.raises(RuntimeError), session.begin_transaction() as tx:
        tx.run("CREATE (:WitnessProbe)").consume()
        raise RuntimeError("rolled back")
    assert last_commit(empty_db) == before
    assert not empty_db.execute_query("MATCH (n:WitnessProbe) RETURN n")[0]


def test_a_write_from_another_driver_moves_it(empty_db: Driver, settings: Settings) -> None:
    before = last_commit(empty_db)
    other = sync_driver(settings)
    try:
        other.execute_query("CREATE (:WitnessProbe)")
    finally:
        other.close()
    assert last_commit(empty_db) != before
    empty_db.execute_query(PROBE)


def test_a_write_undone_by_another_moves_it_where_the_checksum_does_not(empty_db: Driver) -> None:
    before, checksum = last_commit(empty_db), graph_checksum(empty_db)
    empty_db.execute_query("CREATE (:WitnessProbe)")
    empty_db.execute_query(PROBE)
    assert graph_checksum(empty_db) == checksum
    assert last_commit(empty_db) != before
