"""A session the journal opened before schema 8 no longer tells its time by its id (leak).

The factor journal named a session it opened after its first entry's time
(``session-20310709131415-a1b2c3``), and a session's id shows wherever the session does: in
``journal``'s ``sessionId``, ``node``, walks, the assessment's "where were we". A role whose rules
hide the entries' time read it off the id. The journal names sessions at random now, and
``migrate`` renames the ones a database of an older schema holds (``RENAME_TIME_NAMED_SESSIONS``),
with every entry's copy of the id.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from neo4j import Driver

from cairn.ingest.factors import load_demo_factors
from cairn.memory.factors.journal import update_factor
from cairn.policy.scope import Scope
from cairn.runtime.settings import Settings
from cairn.schema.migrate import RECORD_VERSION, SCHEMA_VERSION, migrate
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.adversarial.test_masked_factor_fields import ENTRY_EXTRA, READS, _all_but, answers
from tests.e2e.conftest import gql, passport, wipe

WHEN = datetime(2031, 7, 9, 13, 14, 15, tzinfo=UTC)
OLD_ID = f"session-{WHEN:%Y%m%d%H%M%S}-a1b2c3"  # as the journal named it before schema 8
CLIENT_ID = "session-20240101120000-abcdef"  # chosen by a client, not the journal's stamp
TIME_NAMED = re.compile(r"session-\d{14}-")
SESSION_OF = """
MATCH (e:JournalEntry {id: $id})-[:PART_OF]->(s:Session)
RETURN s.id AS session, e.session_id AS copy, s.title AS title
"""
NODE = "query($id: ID!) { node(id: $id) { id fields masked } }"


@pytest.fixture
def old_database(driver: Driver) -> Iterator[str]:
    """The demo's factors and an update the journal filed under a time-named session, in a
    database recorded at the schema before the rename; yields the entry's id."""
    wipe(driver)
    load_demo_factors(driver)
    entry = update_factor(
        driver,
        Scope.system(),
        "data_governance",
        50,
        rationale="set",
        confidence=0.5,
        timestamp=WHEN,
        session_id=OLD_ID,
    )
    update_factor(  # a client's own id in that form, for another moment: the client's to keep
        driver,
        Scope.system(),
        "data_governance",
        51,
        rationale="set",
        confidence=0.5,
        timestamp=WHEN,
        session_id=CLIENT_ID,
    )
    driver.execute_query(RECORD_VERSION, version=7)  # the last schema that named sessions so
    yield entry.id
    driver.execute_query(RECORD_VERSION, version=SCHEMA_VERSION)
    wipe(driver)


def test_migrate_renames_sessions_named_after_their_time(
    driver: Driver, old_database: str, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    migrate(driver)
    records, _, _ = driver.execute_query(SESSION_OF, id=old_database)
    renamed = records[0].data()
    assert renamed["session"] == renamed["copy"] and renamed["title"] == "ad-hoc update", renamed
    assert not TIME_NAMED.match(renamed["session"]), renamed
    # Time-named ids only: a renamed one ('session-' and 16 random hex digits) may begin '2' too.
    records, _, _ = driver.execute_query("MATCH (s:Session) WHERE s.id =~ 'session-[0-9]{14}-.*' RETURN s.id")
    assert [r["s.id"] for r in records] == [CLIENT_ID], records
    # A role that may not see the entries' times reads nothing of this one anywhere.
    hidden = {
        "JournalEntry": [{"domains": ["*"], "fields": _all_but("JournalEntry", {"timestamp"}, ENTRY_EXTRA)}],
        "Factor": [{"domains": ["*"], "fields": _all_but("Factor", {"last_updated"})}],
    }
    with served_with(settings, tmp_path_factory, "staff", hidden) as probe:
        staff = answers(probe, "staff", READS)
        client, registry = probe
        for node_id in (old_database, renamed["session"]):
            staff[node_id] = gql(client, NODE, passport(registry, "staff"), id=node_id)
    text = json.dumps(staff)
    assert renamed["session"] in text  # the session is shown, under its new name
    for copy in ("20310709", "2031-07-09"):
        assert copy not in text, copy
    migrate(driver)  # once upgraded, the session keeps its name
    records, _, _ = driver.execute_query(SESSION_OF, id=old_database)
    assert records[0]["session"] == renamed["session"]
