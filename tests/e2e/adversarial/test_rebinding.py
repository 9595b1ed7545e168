"""Finding 3, DNS rebinding: /dev/passport answers only a request whose Host, and Origin if
sent, is loopback.

Before the fix it answered any Host, so a page on evil.example that rebinds its name to
127.0.0.1 while the demo runs could mint exec passports from the visitor's browser. Each
refusal here is compared with a route that does not exist: same status, body and type, for
every role a page might ask for (staff, manager and external, and the director and exec
passports it is after).

Red-team pass 10 (2026-11-26): with a passport secret, ``/dev/passport/`` (a trailing slash) was
answered ``307`` to ``/dev/passport`` by Starlette's slash redirect, where a route that does not
exist answers 404: the route told itself apart. No route redirects a trailing slash now (``/ui``
still leads to ``/ui/``).
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.traces_common import ATTACKERS, HIDDEN_DECISION, VICTIMS, serve
from tests.e2e.conftest import gql

ROLES = (*ATTACKERS, *VICTIMS)
NODE = "query($id: ID!) { node(id: $id) { id fields } }"

FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:8000",
    "10.0.0.5",
    "10.0.0.5:8000",
    "192.168.1.20:8000",
    "0.0.0.0:8000",
    "[2001:db8::1]:8000",
    "localhost.evil.example",
    "127.0.0.1.nip.io:8000",
    "127.0.0.1@evil.example",
    "evil.example#@127.0.0.1",
    "127.0.0.1:8000/evil",
    "127.0.0.1 evil.example",
    "::1",  # an IPv6 address must be bracketed in Host
    "",
]
LOOPBACK_HOSTS = [
    "127.0.0.1:8000",
    "127.0.0.1",
    "127.8.9.10:8000",
    "localhost:8000",
    "LOCALHOST",
    "[::1]:8000",
]
FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example:8000",
    "http://10.0.0.5:8000",
    "http://localhost.evil.example",
    "http://127.0.0.1.evil.example",
    "http://127.0.0.1@evil.example",
    "null",
    "file://",
    "",
]
LOOPBACK_ORIGINS = ["http://127.0.0.1:8000", "http://localhost:8000", "https://[::1]:8443"]


@pytest.fixture(scope="module")
def client(
    acme: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    with serve(settings, tmp_path_factory.mktemp("rebinding"), host="127.0.0.1", passport_secret=None) as c:
        yield c


def assert_like_no_route(
    client: TestClient, headers: dict[str, str], role: str, method: str = "GET", slash: str = ""
) -> None:
    def ask(path: str) -> httpx.Response:
        return client.request(method, f"{path}{slash}?role={role}", headers=headers, follow_redirects=False)

    resp, absent = ask("/dev/passport"), ask("/no/such/route")
    assert absent.status_code == 404
    assert (resp.status_code, resp.content, resp.headers.get("content-type")) == (
        absent.status_code,
        absent.content,
        absent.headers.get("content-type"),
    ), (headers, resp.text)
    assert "X-Policy-Key" not in resp.text


@pytest.mark.parametrize("role", ROLES)
def test_a_foreign_host_is_told_the_route_does_not_exist(client: TestClient, role: str) -> None:
    for host in FOREIGN_HOSTS:
        assert_like_no_route(client, {"Host": host}, role)


@pytest.mark.parametrize("role", ROLES)
def test_a_foreign_origin_is_told_the_route_does_not_exist(client: TestClient, role: str) -> None:
    for origin in FOREIGN_ORIGINS:
        for host in ("127.0.0.1:8000", "localhost:8000"):
            assert_like_no_route(client, {"Host": host, "Origin": origin}, role)


@pytest.mark.parametrize("role", ROLES)
def test_other_methods_look_like_no_route_either(client: TestClient, role: str) -> None:
    for method in ("POST", "PUT", "DELETE", "OPTIONS", "HEAD"):
        assert_like_no_route(client, {"Host": "127.0.0.1:8000"}, role, method)


@pytest.mark.parametrize("role", ROLES)
def test_the_local_ui_still_gets_a_working_passport(
    client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    """The control: the role switcher's same-origin fetch (loopback Host, no or loopback Origin)."""
    for host in LOOPBACK_HOSTS:
        for origin in [None, *LOOPBACK_ORIGINS]:
            headers = {"Host": host} | ({"Origin": origin} if origin else {})
            resp = client.get(f"/dev/passport?role={role}", headers=headers)
            assert resp.status_code == 200, (headers, resp.text)
            passport = resp.json()
            assert passport["X-User-Roles"] == role and passport["X-User-Id"] == f"u-demo-{role}"
    node = gql(client, NODE, passport, id=HIDDEN_DECISION)["data"]["node"]
    assert (node is not None and "rationale" in node["fields"]) == (role in VICTIMS)


def test_no_dev_passports_with_a_secret_or_off_loopback(
    acme: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for update in ({"passport_secret": "s3cret"}, {"host": "0.0.0.0", "passport_secret": None}):
        with serve(settings, tmp_path_factory.mktemp("rebinding-off"), **update) as c:
            for role in ROLES:
                assert_like_no_route(c, {"Host": "127.0.0.1:8000"}, role)
                # Starlette redirected "/dev/passport/" to the route (307), and "/no/such/route/" not
                assert_like_no_route(c, {"Host": "127.0.0.1:8000"}, role, slash="/")
