"""Every refusal outside a GraphQL result answers in the one error shape (red-team pass 12,
2026-11-27).

Found against the running ``cairn serve --demo``: the bundle route answered its refusals in
shapes of its own (``{"error": "bundle refused", "reason": ...}`` for a 403,
``{"error", "code", "header"}`` for a refused passport, ``{"error": "no such trace"}``), the dev
passport route ``{"error": ...}`` for an unknown role, and Starlette's router, static files and
``LoopbackOnly`` answered an unknown route, a method a route does not take or a missing UI file
in plain text (``Not Found``, ``Method Not Allowed``) — none with ``extensions.code``. Now each is
``{"errors": [{"message", "extensions": {"code", ...}}]}`` as on /graphql (``error_response`` in
cairn/app.py; docs/design.md §Errors), and a bug on such a route is a coded 500 without its
traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.memory import trace
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from tests.e2e.conftest import passport

pytestmark = pytest.mark.usefixtures("acme")

LOOPBACK = {"Host": "127.0.0.1:8000"}
LEAKS = ("Traceback", "/work", ".py", 'File "', "site-packages")


def assert_coded(response: Any, status: int, code: str, **extensions: Any) -> dict[str, Any]:
    """One coded error in the shape of a GraphQL error, and nothing else in the body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json", response.headers
    body = response.json()
    assert list(body) == ["errors"] and len(body["errors"]) == 1, body
    error = body["errors"][0]
    assert set(error) == {"message", "extensions"} and isinstance(error["message"], str), error
    assert error["extensions"] == {"code": code, **extensions}, error
    assert not any(leak in response.text for leak in LEAKS), response.text
    return dict(error)


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/no/such/route", 404, "NOT_FOUND"),
        ("GET", "/ui/no-such-file.js", 404, "NOT_FOUND"),
        ("GET", "/ui/../../etc/passwd", 404, "NOT_FOUND"),
        ("POST", "/health", 405, "METHOD_NOT_ALLOWED"),
        ("DELETE", "/bundles/req-abc/bundle_view", 405, "METHOD_NOT_ALLOWED"),
        ("PUT", "/ready", 405, "METHOD_NOT_ALLOWED"),
    ],
)
def test_routing_refusals_are_coded(
    method: str, path: str, status: int, code: str, client: TestClient, registry: PolicyRegistry
) -> None:
    response = client.request(method, path, headers={**LOOPBACK, **passport(registry, "staff")})
    assert_coded(response, status, code)
    if status == 405:
        assert response.headers["allow"]


def test_bundle_refusals_are_coded(client: TestClient, registry: PolicyRegistry) -> None:
    staff = {**LOOPBACK, **passport(registry, "staff")}
    refused = assert_coded(client.get("/bundles/req-abc/bundle_full", headers=staff), 403, "BUNDLE_REFUSED")
    assert refused["message"] == "policy:bundle_full_not_permitted"
    assert_coded(client.get("/bundles/req-abc/no_such_bundle", headers=staff), 403, "BUNDLE_REFUSED")
    assert_coded(client.get("/bundles/req-abc/bundle_view", headers=staff), 404, "NOT_FOUND")
    assert_coded(client.get("/bundles/../../etc/passwd/bundle_view", headers=staff), 404, "NOT_FOUND")
    no_passport = client.get("/bundles/req-abc/bundle_view", headers=LOOPBACK)
    assert_coded(no_passport, 401, "PASSPORT_MISSING_HEADER", header="X-User-Id")


def test_an_unknown_dev_passport_role_is_coded(client: TestClient) -> None:
    response = client.get("/dev/passport?role=nope", headers=LOOPBACK)
    error = assert_coded(response, 400, "POLICY_UNKNOWN_ROLE", header="X-User-Roles")
    assert "X-Policy-Key" not in error["message"]


def test_a_foreign_host_is_told_not_found_in_the_same_shape(client: TestClient) -> None:
    """``LoopbackOnly`` answers as a route that does not exist: now the coded 404."""
    foreign = client.get("/graphql", headers={"Host": "evil.example"})
    absent = client.get("/no/such/route", headers=LOOPBACK)
    assert (foreign.status_code, foreign.content) == (absent.status_code, absent.content)


@pytest.fixture
def failing_client(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    def broken(*args: object, **kwargs: object) -> bytes:
        raise RuntimeError(f"secret path {trace.__file__}")

    monkeypatch.setattr(trace, "bundle_zip", broken)
    with TestClient(create_app(settings), raise_server_exceptions=False) as c:
        yield c


def test_a_bug_on_a_plain_route_is_a_coded_500(
    acme: Driver, failing_client: TestClient, registry: PolicyRegistry
) -> None:
    staff = {**LOOPBACK, **passport(registry, "staff")}
    response = failing_client.get("/bundles/req-abc/bundle_view", headers=staff)
    assert_coded(response, 500, "INTERNAL_SERVER_ERROR")
    assert "secret path" not in response.text
    # answered outside SecurityHeaders (ServerErrorMiddleware), with its headers all the same
    assert response.headers["cache-control"] == "no-store"
    assert response.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


@pytest.mark.parametrize("byte_range", ["bytes=abc", "bytes=999999-", "bytes=0-1,5-2"])
def test_a_ui_file_is_whole_whatever_range_is_asked(byte_range: str, client: TestClient) -> None:
    """Starlette answered a bad Range 400 and an unsatisfiable one 416, in plain text."""
    response = client.get("/ui/index.html", headers={**LOOPBACK, "Range": byte_range})
    assert response.status_code == 200, response.text
    assert response.content == client.get("/ui/index.html", headers=LOOPBACK).content


@pytest.mark.parametrize("order", [("text/plain", "application/json"), ("application/json", "text/plain")])
def test_two_content_types_are_refused(
    order: tuple[str, str], client: TestClient, registry: PolicyRegistry
) -> None:
    """A gateway may read the last of two Content-Type headers where Starlette reads the first."""
    headers = [*passport(registry, "staff").items(), *LOOPBACK.items(), *(("Content-Type", t) for t in order)]
    response = client.post("/graphql", content=b'{"query": "{ __typename }"}', headers=headers)
    assert_coded(response, 400, "BAD_REQUEST")
