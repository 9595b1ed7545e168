"""The embedded Neo4j process: data survives stop/start, status, and the Browser.

Only for the embedded server (skipped when NEO4J_URI points elsewhere). Every test leaves
the server running, since the session fixture owns stopping it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from neo4j import Driver

from cairn.runtime import neo4j_server
from cairn.runtime.database import sync_driver
from cairn.runtime.settings import Settings
from cairn.schema.migrate import SCHEMA_VERSION, migrate, schema_version

pytestmark = pytest.mark.restarts

MARKER_LABEL = "CairnLifecycleMarker"  # not an Entity: wipe() leaves it alone


@pytest.fixture(autouse=True)
def embedded_only(settings: Settings) -> None:
    if not settings.embedded:
        pytest.skip("NEO4J_URI is set: the external server is not ours to stop or start")


@pytest.fixture
def running_afterwards(driver: Driver, settings: Settings) -> Iterator[Driver]:
    """Whatever happens in the test, the server is up again when it ends."""
    yield driver
    if not neo4j_server.status(settings).running:
        neo4j_server.start(settings)


def test_stop_and_start_keep_the_data_and_the_schema(running_afterwards: Driver, settings: Settings) -> None:
    """One restart for both: the data written before it and the schema are there after it."""
    driver = running_afterwards
    marker = f"lifecycle-{uuid.uuid4()}"
    driver.execute_query(f"CREATE (:{MARKER_LABEL} {{id: $id, note: 'survives restart'}})", id=marker)
    try:
        assert neo4j_server.stop(settings) is True
        assert neo4j_server.status(settings).running is False
        assert neo4j_server.stop(settings) is False  # nothing left to stop

        st = neo4j_server.start(settings)
        assert st.running

        with sync_driver(settings) as fresh:
            records, _, _ = fresh.execute_query(
                f"MATCH (m:{MARKER_LABEL} {{id: $id}}) RETURN m.note AS note", id=marker
            )
            assert schema_version(fresh) == SCHEMA_VERSION
            assert migrate(fresh) == []
        assert [r["note"] for r in records] == ["survives restart"]

        # The session driver's pooled connections died with the old process; it reconnects.
        records, _, _ = driver.execute_query(
            f"MATCH (m:{MARKER_LABEL} {{id: $id}}) RETURN count(m) AS c", id=marker
        )
        assert records[0]["c"] == 1
        records, _, _ = driver.execute_query("MATCH (n:Entity) RETURN count(n) AS c")
        assert records[0]["c"] >= 0
    finally:
        if not neo4j_server.status(settings).running:
            neo4j_server.start(settings)
        driver.execute_query(f"MATCH (m:{MARKER_LABEL} {{id: $id}}) DELETE m", id=marker)


def test_status_reports_running_5_26(driver: Driver, settings: Settings) -> None:
    st = neo4j_server.status(settings)
    assert st.running is True
    assert st.pid is not None and st.pid > 0
    assert st.version is not None and st.version.startswith("5.26"), st.version
    assert st.bolt_uri == f"bolt://127.0.0.1:{settings.bolt_port}"
    assert st.http_url == f"http://127.0.0.1:{settings.http_port}/browser/"
    assert st.home == settings.neo4j_home


def test_browser_answers(driver: Driver, settings: Settings) -> None:
    response = httpx.get(f"http://127.0.0.1:{settings.http_port}/browser/", timeout=30)
    assert response.status_code == 200
    assert "text/html" in response.headers.get("content-type", "")
    assert "neo4j" in response.text.lower()


def test_session_driver_still_works_at_the_end(driver: Driver) -> None:
    records, _, _ = driver.execute_query("RETURN 1 AS one")
    assert records[0]["one"] == 1
