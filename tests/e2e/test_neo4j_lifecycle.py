"""The embedded Neo4j process: status and the Browser. That data and the schema survive a
stop and a start is checked on the restart the outage test of tests/e2e/test_service_lifecycle.py
makes anyway (one restart for both: each costs a server start).

Only for the embedded server (skipped when NEO4J_URI points elsewhere). Every test leaves
the server running, since the session fixture owns stopping it.
"""

from __future__ import annotations

import httpx
import pytest
from neo4j import Driver

from cairn.runtime import database, neo4j_server
from cairn.runtime.settings import Settings

pytestmark = pytest.mark.restarts


@pytest.fixture(autouse=True)
def embedded_only(settings: Settings) -> None:
    if not settings.embedded:
        pytest.skip("NEO4J_URI is set: the external server is not ours to stop or start")


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


def test_http_serves_the_browser_and_its_discovery_only(driver: Driver, settings: Settings) -> None:
    """No Cypher over HTTP: the transactional and Query API endpoints are not mounted; the
    discovery document the Browser reads still names the Bolt address."""
    base = f"http://127.0.0.1:{settings.http_port}"
    discovery = httpx.get(f"{base}/", headers={"Accept": "application/json"}, timeout=30)
    assert discovery.status_code == 200
    assert discovery.json()["bolt_direct"] == f"bolt://127.0.0.1:{settings.bolt_port}"
    auth = ("neo4j", database.password(settings))
    for path, body in (
        ("/db/neo4j/tx/commit", {"statements": [{"statement": "RETURN 1"}]}),
        ("/db/neo4j/query/v2", {"statement": "RETURN 1"}),
    ):
        response = httpx.post(f"{base}{path}", json=body, auth=auth, timeout=30)
        assert response.status_code == 404, (path, response.status_code, response.text[:200])


def test_session_driver_still_works_at_the_end(driver: Driver) -> None:
    records, _, _ = driver.execute_query("RETURN 1 AS one")
    assert records[0]["one"] == 1
