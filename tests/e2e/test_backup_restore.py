"""Backup → wipe → restore of the embedded Neo4j gives back the same graph, checksum for checksum."""

from __future__ import annotations

from pathlib import Path

import pytest
from neo4j import Driver

from cairn.ingest.org_memory import ingest_fixture_dir
from cairn.runtime import neo4j_server
from cairn.runtime.backup import backup, restore
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import ACME, wipe

pytestmark = pytest.mark.restarts


def test_backup_wipe_restore_round_trip(driver: Driver, settings: Settings, tmp_path: Path) -> None:
    if not settings.embedded:
        pytest.skip("backup/restore commands manage the embedded server only")
    wipe(driver)
    ingest_fixture_dir(driver, ACME)
    before = graph_checksum(driver)

    dump = backup(settings, tmp_path / "bk")
    assert dump.exists() and dump.stat().st_size > 0
    assert neo4j_server.status(settings).running  # restarted after the dump

    with sync_driver(settings) as fresh:
        wipe(fresh)
        assert graph_checksum(fresh) != before

    restore(settings, tmp_path / "bk")
    with sync_driver(settings) as fresh:
        assert graph_checksum(fresh) == before
        count = fresh.execute_query("MATCH (n:Entity) RETURN count(n) AS c")[0][0]["c"]
    assert count == 67


def test_restore_without_a_dump_is_refused(settings: Settings, tmp_path: Path) -> None:
    if not settings.embedded:
        pytest.skip("embedded only")
    with pytest.raises(neo4j_server.Neo4jProcessError, match=r"no neo4j\.dump"):
        restore(settings, tmp_path)
