"""A merge's or a link's journal ids cannot be computed from the dossier ids (a review finding).

A merge or a link journalled its entry as ``je-<key>-<seq>``, ``key`` an unkeyed sha256 of
("link", first, second) or ("merge", source, target), also stored as ``work_key``. A reader whose
rules hide an entry's ``op`` computed that hash for any pair and so recognised, by its id, a link
or a merge in a history; and ``linkDossiers`` answered ``alreadyDone`` to a writer that cannot
read ``op``, telling it the pair was linked. Now the key is an HMAC with a secret the database
keeps (``cairn.memory.dossiers.lock.keyed_lock``), and a writer whose rules hide a journal
entry's ``op`` may neither link nor merge (refused as for a hidden dossier field, writing nothing).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import Driver

from cairn.memory.dossiers.curation import link_dossiers, merge_dossiers
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from cairn.schema.keys import unkeyed
from cairn.schema.migrate import RECORD_VERSION, REKEY_UNITS, SCHEMA_VERSION, migrate
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_unreadable_dossier_fields import (
    CREATE,
    HIDDEN_SUMMARY,
    OLD_TIME,
    served,
    unit,
)
from tests.e2e.adversarial.test_unwalkable_dossier_writes import ACCESS
from tests.e2e.conftest import gql, wipe

DOSSIERS = ("zz-a", "zz-b", "zz-c")
HISTORY = """query($id: ID!) { dossier(id: $id) {
  history { id op timestamp previousValue newValue excerpt rationale details } } }"""
LINK = "mutation($a: ID!, $b: ID!) { linkDossiers(a: $a, b: $b) { op dossierIds alreadyDone } }"
MERGE = "mutation($s: ID!, $t: ID!) { mergeDossiers(sourceId: $s, targetId: $t) { op alreadyDone } }"
ENTRIES = "MATCH (j:JournalEntry) RETURN j.id AS id, properties(j) AS props"
LINKED = "MATCH (j:JournalEntry {op: 'linked'}) RETURN count(j) AS n"


@pytest.fixture
def store(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    rows = [
        {"id": d, "status": "active", "merged_into": None, "vector": unit(n)} for n, d in enumerate(DOSSIERS)
    ]
    driver.execute_query(CREATE, rows=rows, summary=HIDDEN_SUMMARY, old=OLD_TIME, access=ACCESS)
    yield driver
    wipe(driver)


def op_blind(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["JournalEntry"] - {"op"})}]
    return demo_roles_with(tmp_path_factory, "writer", {"JournalEntry": rule})


def test_no_entry_id_is_the_pairs_hash(
    store: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    link_dossiers(store, "zz-b", "zz-a")
    merge_dossiers(store, "zz-c", "zz-b")
    guessable = [unkeyed("link", "zz-a", "zz-b"), unkeyed("merge", "zz-c", "zz-b")]
    stored = store.execute_query(ENTRIES).records
    assert {r["props"]["op"] for r in stored} >= {"linked", "merged"}  # the premise: both journalled
    for record in stored:
        assert not any(g in str(record.data()) for g in guessable), record
    client, headers = served(settings, op_blind(tmp_path_factory))
    with client:
        histories = [gql(client, HISTORY, headers, id=d) for d in ("zz-a", "zz-b")]
    assert all(h["data"]["dossier"]["history"] for h in histories), histories
    assert all(e["op"] is None for h in histories for e in h["data"]["dossier"]["history"]), histories
    assert not any(g in str(histories) for g in guessable), histories


@pytest.mark.parametrize(
    ("query", "variables"),
    [(LINK, {"a": "zz-a", "b": "zz-b"}), (MERGE, {"s": "zz-c", "t": "zz-b"})],
    ids=["link", "merge"],
)
def test_an_op_blind_writer_may_not_link_or_merge(
    store: Driver,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    query: str,
    variables: dict[str, str],
) -> None:
    """Refused alike whether or not the pair was linked or merged before; nothing is written."""
    client, headers = served(settings, op_blind(tmp_path_factory))
    with client:
        before = graph_checksum(store)
        fresh = gql(client, query, headers, **variables)
        assert graph_checksum(store) == before
        link_dossiers(store, "zz-a", "zz-b")
        merge_dossiers(store, "zz-c", "zz-b")
        before = graph_checksum(store)
        again = gql(client, query, headers, **variables)
        assert graph_checksum(store) == before
    for body in (fresh, again):
        assert body.get("data") is None, body
        assert body["errors"][0]["extensions"]["code"] == "DOSSIER_CONFLICT", body
        assert "op" in body["errors"][0]["message"], body
    assert fresh["errors"] == again["errors"]


def test_linking_a_pair_twice_is_one_entry(
    store: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    client, headers = served(settings, demo_roles_with(tmp_path_factory, "writer", {}))
    with client:
        first = gql(client, LINK, headers, a="zz-a", b="zz-b")["data"]["linkDossiers"]
        second = gql(client, LINK, headers, a="zz-b", b="zz-a")["data"]["linkDossiers"]
    assert (first["alreadyDone"], second["alreadyDone"]) == (False, True)
    assert store.execute_query(LINKED).records[0]["n"] == 1


OLD_SPLIT = "split-0123456789abcdef0123"
SPLIT_ENTRY = """
MATCH (d:Dossier {id: 'zz-a'})
CREATE (j:Entity:JournalEntry {id: 'je-' + $key + '-0', op: 'split', seq: 0, work_key: $key})-[:ABOUT]->(d)
SET j += $access
"""
UNITS = "MATCH (j:JournalEntry) RETURN j.op AS op, j.id AS id, j.work_key AS key ORDER BY op"


def test_migrate_keys_the_ids_written_before(store: Driver) -> None:
    """A store of schema 8 (link, merge and split ids an unkeyed hash) is re-keyed by ``migrate``
    (red-team pass 15): none of those ids stays, and the same link or merge again is still done."""
    link_dossiers(store, "zz-b", "zz-a")
    merge_dossiers(store, "zz-c", "zz-b")
    old = {"linked": unkeyed("link", "zz-a", "zz-b"), "merged": unkeyed("merge", "zz-c", "zz-b")}
    keyed = {r["op"]: r["key"] for r in store.execute_query(UNITS).records}
    store.execute_query(REKEY_UNITS, keys=[{"old": keyed[op], "new": old[op]} for op in old])
    store.execute_query(SPLIT_ENTRY, key=OLD_SPLIT, access=ACCESS)
    store.execute_query(RECORD_VERSION, version=8)
    try:
        assert {r["key"] for r in store.execute_query(UNITS).records} >= {*old.values(), OLD_SPLIT}
        migrate(store)
    finally:
        store.execute_query(RECORD_VERSION, version=SCHEMA_VERSION)
    units = store.execute_query(UNITS).records
    assert {r["op"] for r in units} >= {"linked", "merged", "split"}
    for unit_ in units:
        assert unit_["id"] == f"je-{unit_['key']}-" + unit_["id"].rsplit("-", 1)[1], unit_
        assert unit_["key"] not in {*old.values(), OLD_SPLIT} and "split" not in unit_["id"], unit_
    assert link_dossiers(store, "zz-a", "zz-b").already_done
    assert merge_dossiers(store, "zz-c", "zz-b").already_done


OLD_ARCHIVED_AT = "2024-05-01T09:30:00.123456+00:00"  # as the archive's datetime.now(UTC).isoformat()
ARCHIVE_ENTRY = """
MATCH (d:Dossier {id: 'zz-a'})
CREATE (j:Entity:JournalEntry {id: 'je-' + $key + '-0', op: 'archived', seq: 0, work_key: $key,
  previous_value: 'active', new_value: 'archived', details: '{}'})-[:ABOUT]->(d)
SET j += $access, j.timestamp = datetime($at), j.created_at = datetime($at)
"""


def test_migrate_keys_an_archives_id_written_before(store: Driver) -> None:
    """Before the keyed ids an archive's entry was ``je-<sha256("archive", dossier, time)>-0``: a
    reader shown the entry's time but not its ``op`` computed it and so read "archived" (and
    the dossier's status). ``migrate`` re-keys it, once (review 15)."""
    old = unkeyed("archive", "zz-a", OLD_ARCHIVED_AT)
    store.execute_query(ARCHIVE_ENTRY, key=old, at=OLD_ARCHIVED_AT, access=ACCESS)
    store.execute_query(RECORD_VERSION, version=8)
    try:
        migrate(store)
        (first,) = [r for r in store.execute_query(UNITS).records if r["op"] == "archived"]
        store.execute_query(RECORD_VERSION, version=8)
        migrate(store)  # killed before it recorded the version, and run again
    finally:
        store.execute_query(RECORD_VERSION, version=SCHEMA_VERSION)
    (again,) = [r for r in store.execute_query(UNITS).records if r["op"] == "archived"]
    assert old not in str(first.data()) and first["id"] == f"je-{first['key']}-0", first
    assert again.data() == first.data()
