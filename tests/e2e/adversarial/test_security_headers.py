"""Response headers a browser relies on (red-team pass on HTTP, 2026-11-25).

Found against the running ``cairn serve --demo``: answers carried no ``nosniff``, no framing
refusal and no Content-Security-Policy, so the UI could be framed by another site (clickjacking
the role switcher) and a JSON answer sniffed as HTML. Fixed by ``cairn.app.SecurityHeaders``
(docs/design.md §HTTP hardening): every route, refusals and 404s included, gets the headers, and
only GraphiQL's page may run inline script or eval. The UI and GraphiQL still render under these
policies in Chromium (tests/e2e/test_web_ui.py, tests/e2e/test_graphiql.py).

Red-team pass 10 (2026-11-26): no answer said how long it may be kept. A passport travels in
``X-*`` headers, not ``Authorization``, so a shared cache (a caching reverse proxy, a CDN) may
store a GET answer by its URL alone and serve it to the next caller: a bundle zip
(``/bundles/<request id>/bundle_view``, the ask's evidence as its owner saw it) or a development
passport (``/dev/passport?role=exec``), and a browser keeps them on disk. Every answer but the
UI's static files now carries ``Cache-Control: no-store``.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.adversarial.traces_common import ASK, HIDDEN_DECISION
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


def test_no_answer_but_the_ui_files_may_be_stored(client: TestClient, registry: PolicyRegistry) -> None:
    exec_ = passport(registry, "exec")
    asked = client.post("/graphql", json={"query": ASK, "variables": {"id": HIDDEN_DECISION}}, headers=exec_)
    assert asked.status_code == 200 and not asked.json().get("errors"), asked.text
    bundle = client.get(f"/bundles/{exec_['X-Request-Id']}/bundle_full", headers=exec_)
    assert bundle.status_code == 200 and bundle.headers["content-type"] == "application/zip"
    answers = {
        "ask": asked,
        "bundle": bundle,
        "dev passport": client.get("/dev/passport", params={"role": "exec"}, headers={"Host": "127.0.0.1"}),
        "missing bundle": client.get("/bundles/req-0000000000000000/bundle_view", headers=exec_),
        "bundle without a passport": client.get(f"/bundles/{exec_['X-Request-Id']}/bundle_view"),
        "refused query": client.post("/graphql", json={"query": "{"}),
        "graphiql": client.get("/graphql", headers={"Accept": "text/html"}),
        "ready": client.get("/ready"),
    }
    assert answers["dev passport"].json()["X-User-Roles"] == "exec"
    for name, response in answers.items():
        assert response.headers.get("cache-control") == "no-store", (name, response.status_code)
    ui = client.get("/ui/js/app.js")
    assert ui.status_code == 200 and "no-store" not in ui.headers.get("cache-control", "")
