"""The embedded Neo4j's HTTP port answers no other origin (red-team pass 12, 2026-11-27).

Found against the running ``cairn serve --demo``: Neo4j answered every HTTP request, the
discovery document at / and the Browser at /browser/ alike, with
``Access-Control-Allow-Origin: *`` (its ``dbms.security.http_access_control_allow_origin``
default), so any page open in this machine's browser could read the Neo4j version and the Bolt
address from it. Now the header names the Browser's own origin, which a page of another origin
does not match: the browser withholds the answer from it (cairn/runtime/neo4j_server.py).

Bolt has no such header (red-team pass 14): its port takes a WebSocket from a page of any origin,
as the Browser needs, and the page could then fail a login for user ``neo4j`` three times, after
which Neo4j refused every login of that user for 5 s, Cairn's own new connections with the right
password included ("AuthenticationRateLimit"): a page open in this machine's browser could keep the
service from its database. Now failed logins lock nothing out
(``dbms.security.auth_max_failed_attempts=0``): the password is 48 random hex characters.
"""

from __future__ import annotations

import base64
import os
import socket
import time

import httpx
import pytest
from neo4j import Driver, GraphDatabase
from neo4j.exceptions import ClientError

from cairn.runtime.database import bolt_uri, password
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


def _websocket_status(port: int, origin: str) -> str:
    """The status line of a WebSocket upgrade on ``port`` asked from a page of ``origin``."""
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n".encode()
        )
        return s.recv(4096).decode(errors="replace").split("\r\n")[0]


def test_failed_logins_from_any_page_cannot_lock_cairn_out(driver: Driver, settings: Settings) -> None:
    # What a page of another origin reaches: Bolt over a WebSocket (Neo4j checks no Origin there).
    assert _websocket_status(settings.bolt_port, ORIGINS[0]).startswith("HTTP/1.1 101"), "premise"
    wrong = ("neo4j", "wrong")
    for _ in range(5):
        with GraphDatabase.driver(bolt_uri(settings), auth=wrong) as bad, pytest.raises(ClientError):
            bad.verify_connectivity()
    try:
        with GraphDatabase.driver(bolt_uri(settings), auth=("neo4j", password(settings))) as good:
            good.verify_connectivity()
    except ClientError as e:  # locked out: wait the lock out so the rest of the session can log in
        time.sleep(6)
        pytest.fail(f"Cairn's own login was refused after failed logins by another client: {e}")
