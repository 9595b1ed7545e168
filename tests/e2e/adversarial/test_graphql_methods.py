"""Every method on /graphql is answered in the error contract (red-team pass 10, 2026-11-26).

Found against the running ``cairn serve --demo``: ``PUT``, ``DELETE``, ``PATCH`` and ``OPTIONS``
(a CORS preflight) on /graphql were answered by Starlette's router, ``405 Method Not Allowed`` in
plain text with no ``extensions.code``, while ``HEAD`` reached strawberry and got JSON: the one
refusal of the endpoint outside the error contract, as the 413 was before
(test_http_bodies.py). Now every method reaches strawberry, and each one but GET and POST is a
405 coded ``METHOD_NOT_ALLOWED`` with ``Allow: GET, POST``; no CORS header is sent either way.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import passport


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_get_a_coded_405(method: str, client: TestClient, registry: PolicyRegistry) -> None:
    headers = {
        **passport(registry, "exec"),
        "Origin": "http://127.0.0.1:8000",
        "Access-Control-Request-Method": "POST",
    }
    response = client.request(method, "/graphql", headers=headers, json={"query": "{ __typename }"})
    assert response.status_code == 405, response.text
    assert response.headers["allow"] == "GET, POST"
    assert [e["extensions"]["code"] for e in response.json()["errors"]] == ["METHOD_NOT_ALLOWED"]
    assert not any(name.startswith("access-control-") for name in response.headers)


def test_get_and_post_still_answer(client: TestClient, registry: PolicyRegistry) -> None:
    headers = passport(registry, "staff")
    assert client.post("/graphql", json={"query": "{ __typename }"}, headers=headers).json() == {
        "data": {"__typename": "Query"}
    }
    assert "graphiql" in client.get("/graphql", headers={"Accept": "text/html"}).text.lower()
