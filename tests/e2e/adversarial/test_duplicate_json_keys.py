"""A request body whose JSON repeats a key is refused (red-team pass, 2026-11-26).

Python's parser keeps the last of two equal keys, others (a gateway's, a WAF's) may keep the
first: ``{"query": "<harmless>", "query": "<what runs>"}`` passed a check of the first and ran
the second. Now an object that repeats a key, at any depth (the request's own members,
``variables``, a ``JSON`` argument's map, ``extensions``), is refused before anything runs: 400
``BAD_REQUEST`` naming the key, in the one error contract (docs/design.md §Errors).
"""

from __future__ import annotations

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.conftest import ORG_MEMORY
from tests.e2e.conftest import passport, wipe

HARMLESS = '"{ __typename }"'
SMUGGLED = '"{ smuggled: __typename }"'
DECISION = '{"id": "zz-dup", "domain": "acme/product", "domain": "acme/exec"}'
BODIES = {
    "query": f'{{"query": {HARMLESS}, "query": {SMUGGLED}}}',
    "variables": '{"query": "query($id: ID!) { node(id: $id) { id } }", "variables": {"id": "a", "id": "b"}}',
    "deep": (
        f'{{"query": "{ORG_MEMORY.replace(chr(34), chr(92) + chr(34))}",'
        f' "variables": {{"p": {{"decisions": [{DECISION}]}}}}}}'
    ),
    "extensions": f'{{"query": {HARMLESS}, "extensions": {{"a": 1, "a": 2}}}}',
}


@pytest.fixture(scope="module")
def empty(driver: Driver) -> Driver:
    wipe(driver)
    return driver


@pytest.mark.parametrize("accept", ["application/json", "application/graphql-response+json"])
@pytest.mark.parametrize("where", sorted(BODIES))
def test_a_repeated_key_is_refused_unrun(
    where: str, accept: str, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    before = graph_checksum(empty)
    headers = {**passport(registry, "writer"), "content-type": "application/json", "accept": accept}
    resp = client.post("/graphql", content=BODIES[where].encode(), headers=headers)
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert "data" not in body and "smuggled" not in resp.text, body
    (error,) = body["errors"]
    assert error["extensions"] == {"code": "BAD_REQUEST"}, error
    assert "repeats the key" in error["message"], error
    assert graph_checksum(empty) == before


def test_the_same_bodies_without_the_repeat_run(client: TestClient, registry: PolicyRegistry) -> None:
    """The check refuses the repeat, not the shapes: the last key alone runs as before."""
    headers = {**passport(registry, "writer"), "content-type": "application/json"}
    resp = client.post("/graphql", content=f'{{"query": {SMUGGLED}}}'.encode(), headers=headers)
    assert resp.json() == {"data": {"smuggled": "Query"}}, resp.text
    nested = '{"query": "{ __typename }", "variables": {"a": {"b": 1}, "b": {"a": 1}}}'
    resp = client.post("/graphql", content=nested.encode(), headers=headers)
    assert resp.json() == {"data": {"__typename": "Query"}}, resp.text


def test_a_repeated_field_in_a_graphql_literal_is_refused(
    client: TestClient, registry: PolicyRegistry
) -> None:
    """The same repeat written in the document, not the JSON: GraphQL's own validation refuses it."""
    query = 'mutation { ingestOrgMemory(payload: {decisions: [], decisions: [{id: "zz"}]}) { decisions } }'
    resp = client.post("/graphql", json={"query": query}, headers=passport(registry, "writer"))
    body = resp.json()
    assert body.get("data") is None and body["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
