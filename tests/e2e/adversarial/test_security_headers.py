"""Response headers a browser relies on (red-team pass on HTTP, 2026-11-25).

Found against the running ``cairn serve --demo``: answers carried no ``nosniff``, no framing
refusal and no Content-Security-Policy, so the UI could be framed by another site (clickjacking
the role switcher) and a JSON answer sniffed as HTML. Fixed by ``cairn.app.SecurityHeaders``
(docs/design.md §HTTP hardening): every route, refusals and 404s included, gets the headers, and
only GraphiQL's page may run inline script or eval. The UI and GraphiQL still render under these
policies in Chromium (tests/e2e/test_web_ui.py, tests/e2e/test_graphiql.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import passport

EXPECTED = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
# (method, path, needs a passport)
ROUTES = [
    ("GET", "/health", False),
    ("GET", "/ready", False),
    ("GET", "/", False),
    ("GET", "/ui/", False),
    ("GET", "/ui/js/app.js", False),
    ("GET", "/ui/../pyproject.toml", False),
    ("GET", "/nowhere", False),
    ("GET", "/bundles/r-1/answer", False),
    ("GET", "/graphql", False),
    ("POST", "/graphql", True),
    ("POST", "/graphql", False),
    ("DELETE", "/graphql", False),
]


pytestmark = pytest.mark.usefixtures("acme")


@pytest.fixture(scope="module")
def client_options() -> dict[str, Any]:
    return {"raise_server_exceptions": False, "follow_redirects": False}


@pytest.mark.parametrize(("method", "path", "signed"), ROUTES)
def test_every_answer_carries_the_headers(
    method: str, path: str, signed: bool, client: TestClient, registry: PolicyRegistry
) -> None:
    headers = {"Accept": "text/html"} if path == "/graphql" and method == "GET" else {}
    if signed:
        headers.update(passport(registry, "staff"))
    response = client.request(
        method, path, headers=headers, json={"query": "{ __typename }"} if method == "POST" else None
    )
    for name, value in EXPECTED.items():
        assert response.headers.get(name) == value, (method, path, response.status_code, name)
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "object-src 'none'" in csp
    assert "access-control-allow-origin" not in response.headers


def test_only_graphiql_may_run_inline_script(client: TestClient) -> None:
    ui = client.get("/ui/").headers["content-security-policy"]
    ide = client.get("/graphql", headers={"Accept": "text/html"})
    assert ide.status_code == 200 and "graphiql" in ide.text.lower()
    script_src = next(d for d in ui.split(";") if d.strip().startswith("script-src"))
    assert script_src.strip() == "script-src 'self'"
    assert "'unsafe-inline'" in ide.headers["content-security-policy"]
