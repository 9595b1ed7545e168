"""Another account on the machine reads what the policy withholds (red-team pass, 2026-11-26).

Found on the machine running ``cairn serve --demo`` (umask 022): the Neo4j password file was
0600, but the store next to it was not: ``data/databases/neo4j/*`` (every node's text, in plain
bytes), the transaction logs and ``neo4j.conf`` were 0644 under 0755 folders, so any local
account read the corporate decisions with ``strings``, without the password or a passport. The
trace folders (each ask's evidence, and the audit meta with the withheld ids) and the
correspondence collision log (titles of sections of every access) were world-readable too.
Now the Neo4j home, each trace folder and the collision log's folder are created 0700
(docs/design.md §HTTP hardening); the data under them keeps its own modes.
"""

from __future__ import annotations

import gzip
import stat
from pathlib import Path

import pytest
from neo4j import Driver

from cairn.ingest.correspondence.sync import sync_bytes
from cairn.memory import trace as trace_store
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime import database, neo4j_server
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.traces_common import secrets, serve, victim_asks

PRIVATE = 0o700


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_neo4j_home_is_this_users_only(driver: Driver, settings: Settings) -> None:
    if not settings.embedded:
        pytest.skip("an external Neo4j keeps its own files")
    home = settings.neo4j_home
    home.chmod(0o755)  # as a data directory made before the fix, or under umask 022
    neo4j_server.prepare_home(settings)  # every start runs it (the server keeps running)
    assert mode(home) == PRIVATE
    assert mode(home / database.PASSWORD_FILE) == 0o600
    assert driver.execute_query("RETURN 1 AS one")[0][0]["one"] == 1


def test_a_trace_is_this_users_only(
    acme: Driver, settings: Settings, registry: PolicyRegistry, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("traces-at-rest")
    with serve(settings, root) as client:
        victim_asks(client, headers_for(registry, "exec"))
    stored = list(root.rglob(trace_store.TRACE_FILE))
    assert stored, "the ask left no trace to check"
    loot = secrets(acme)
    for trace in stored:
        assert any(s in gzip.decompress(trace.read_bytes()).decode() for s in loot)  # what is at stake
        assert mode(trace.parent) == PRIVATE and mode(trace.parent.parent) == PRIVATE, trace


def test_the_collision_log_is_this_users_only(driver: Driver, tmp_path: Path) -> None:
    text = (
        "# Board\n\n*Access: domain=acme/correspondence; sensitivity=high; namespaces=confidential; "
        "roles=director,exec*\n\n---\n\n## I — Falcon price\n\n*Dana · 2026-01-05*\n\nHidden.\n\n---\n\n"
        "## I — Falcon price again\n\n*Dana · 2026-01-06*\n\nHidden too.\n"
    )
    log = tmp_path / "correspondence" / "collisions.jsonl"
    try:
        sync_bytes(driver, text.encode(), "board-at-rest", collision_log=log)
        assert "Falcon price again" in log.read_text()  # a hidden section's title, logged
        assert mode(log.parent) == PRIVATE
    finally:
        driver.execute_query("MATCH (s:Section {source: 'board-at-rest'}) DETACH DELETE s")
