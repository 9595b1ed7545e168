"""Which operation of a document runs (red-team pass on HTTP, 2026-11-25).

Found against the running ``cairn serve --demo``: a document holding two named operations and
sent without ``operationName`` ran the first one, where the GraphQL spec (GetOperation) makes it
a request error. A gateway or log that reads the operation a client named would then disagree
with what ran. Fixed in ``cairn.resolvers.schema.CachedValidation``: nothing runs, the answer is
a validation error; a named operation still runs alone.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import passport

TWO = "query A { __typename } mutation B { __typename }"


pytestmark = pytest.mark.usefixtures("acme")


@pytest.fixture(scope="module")
def client_options() -> dict[str, Any]:
    return {"raise_server_exceptions": False}


def test_several_operations_without_a_name_run_nothing(client: TestClient, registry: PolicyRegistry) -> None:
    body = client.post("/graphql", json={"query": TWO}, headers=passport(registry, "staff")).json()
    assert body["data"] is None
    assert [e["extensions"]["code"] for e in body["errors"]] == ["GRAPHQL_VALIDATION_FAILED"]
    assert "operationName" in body["errors"][0]["message"]


@pytest.mark.parametrize(("name", "typename"), [("A", "Query"), ("B", "Mutation")])
def test_the_named_operation_runs(
    name: str, typename: str, client: TestClient, registry: PolicyRegistry
) -> None:
    body = client.post(
        "/graphql", json={"query": TWO, "operationName": name}, headers=passport(registry, "staff")
    ).json()
    assert body == {"data": {"__typename": typename}}


def test_one_unnamed_operation_still_runs(client: TestClient, registry: PolicyRegistry) -> None:
    body = client.post(
        "/graphql", json={"query": "{ __typename }"}, headers=passport(registry, "staff")
    ).json()
    assert body == {"data": {"__typename": "Query"}}
