"""The embedded Neo4j's HTTP port answers no other origin (red-team pass 12, 2026-11-27).

Found against the running ``cairn serve --demo``: Neo4j answered every HTTP request, the
discovery document at / and the Browser at /browser/ alike, with
``Access-Control-Allow-Origin: *`` (its ``dbms.security.http_access_control_allow_origin``
default), so any page open in this machine's browser could read the Neo4j version and the Bolt
address from it. Now the header names the Browser's own origin, which a page of another origin
does not match: the browser withholds the answer from it (cairn/runtime/neo4j_server.py).
"""

from __future__ import annotations

import httpx
import pytest
from neo4j import Driver

from cairn.runtime.settings import Settings

ORIGINS = ["https://evil.example", "http://localhost:8000", "http://127.0.0.1:8000", "null"]


@pytest.mark.parametrize("path", ["/", "/browser/"])
def test_no_other_origin_may_read_neo4j_http(path: str, driver: Driver, settings: Settings) -> None:
    own = f"http://127.0.0.1:{settings.http_port}"
    for origin in ORIGINS:
        response = httpx.get(
            f"{own}{path}", headers={"Origin": origin, "Accept": "application/json"}, timeout=30
        )
        assert response.status_code == 200, (path, response.status_code)
        allowed = response.headers.get("access-control-allow-origin")
        assert allowed in (None, own), (path, origin, allowed)
    preflight = httpx.options(
        f"{own}{path}",
        headers={"Origin": ORIGINS[0], "Access-Control-Request-Method": "POST"},
        timeout=30,
    )
    assert preflight.headers.get("access-control-allow-origin") in (None, own)
