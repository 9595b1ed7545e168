"""Long list variables held the event loop (red-team pass on the transport, 2026-11-27).

Found against the running ``cairn serve --demo``, without a passport: graphql-core coerces a
variable's every list item on the event loop before any resolver (and so any passport check)
runs, and TextLimit then walked them again. ``whatChanged(factorIds: $ids)`` with 2 million ids
(a 4 MiB body) answered ``PASSPORT_MISSING_HEADER`` after 13 s, ``correspondenceSearch``'s filter
with a million authors after 2.8 s; a JSON payload of 2 million numbers was walked for 4 s
(TextLimit's number check) before ``ingestOrgMemory`` said the passport was missing.

Fixed in cairn/resolvers/schema.py: ``VariableLimit`` refuses a variable holding more than
``MAX_VARIABLE_VALUES`` list items and input object members before it is coerced
(``BAD_USER_INPUT`` naming the variable), and TextLimit walks a JSON payload only for a caller
whose passport was verified.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers import schema as schema_module
from cairn.resolvers.schema import MAX_VARIABLE_VALUES
from tests.e2e.conftest import passport

WHAT_CHANGED = (
    'query($ids: [ID!]) { whatChanged(since: "2020-01-01T00:00:00Z", factorIds: $ids) { __typename } }'
)
FILTERED = 'query($f: CorrespondenceFilter) { correspondenceSearch(query: "a", filters: $f) { __typename } }'
IN_FRAGMENT = (  # a variable used only inside a fragment is still the operation's
    "query($ids: [ID!]) { ...Changed } fragment Changed on Query {"
    ' whatChanged(since: "2020-01-01T00:00:00Z", factorIds: $ids) { __typename } }'
)
INGEST = "mutation($p: JSON!) { ingestOrgMemory(payload: $p) { decisions } }"

LONG = {
    "ids": (WHAT_CHANGED, "ids", list(range(200_000))),
    "authors": (FILTERED, "f", {"authors": ["a"] * 200_000}),
    "members": (FILTERED, "f", {f"k{i}": i for i in range(200_000)}),
    "nested": (WHAT_CHANGED, "ids", [[1] * 500] * 500),
    "fragment": (IN_FRAGMENT, "ids", list(range(MAX_VARIABLE_VALUES + 1))),
}


@pytest.mark.parametrize("role", [None, "staff"])
@pytest.mark.parametrize("kind", sorted(LONG))
def test_a_long_variable_is_refused_before_it_is_coerced(
    client: TestClient, registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch, role: str | None, kind: str
) -> None:
    walked: list[Any] = []
    real = schema_module._too_long
    monkeypatch.setattr(schema_module, "_too_long", lambda value: walked.append(value) or real(value))
    query, name, value = LONG[kind]
    headers = {} if role is None else passport(registry, role)
    resp = client.post("/graphql", json={"query": query, "variables": {name: value}}, headers=headers)
    (error,) = resp.json()["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "variable": name}, error
    assert f"${name}" in error["message"] and f"{MAX_VARIABLE_VALUES:,}" in error["message"]
    assert walked == []


def test_a_variable_up_to_the_limit_is_coerced(client: TestClient, registry: PolicyRegistry) -> None:
    ids = [f"f{i}" for i in range(MAX_VARIABLE_VALUES)]
    resp = client.post(
        "/graphql",
        json={"query": WHAT_CHANGED, "variables": {"ids": ids}},
        headers=passport(registry, "exec"),
    )
    assert resp.json() == {"data": {"whatChanged": {"__typename": "WhatChangedAnswer"}}}


def test_a_payload_is_walked_only_behind_a_passport(
    client: TestClient, registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[Any] = []
    real = schema_module._unstorable_number
    monkeypatch.setattr(schema_module, "_unstorable_number", lambda value: walked.append(1) or real(value))
    payload = {"query": INGEST, "variables": {"p": {"decisions": [1] * 200_000}}}
    (error,) = client.post("/graphql", json=payload).json()["errors"]
    assert error["extensions"]["code"] == "PASSPORT_MISSING_HEADER"
    assert walked == []
    huge = {"query": INGEST, "variables": {"p": {"decisions": [2**70]}}}  # the writer's own check stays
    (error,) = client.post("/graphql", json=huge, headers=passport(registry, "writer")).json()["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT" and walked == [1]


@pytest.mark.parametrize("decisions", [[1] * 200_000, [2**70]])
def test_a_payload_is_not_walked_for_a_role_that_may_not_write(
    client: TestClient, registry: PolicyRegistry, monkeypatch: pytest.MonkeyPatch, decisions: list[int]
) -> None:
    """The field's own permissions answer first: a staff passport (no writes) held the loop for the
    number walk (4 s for 2 million numbers), and its refusal told BAD_USER_INPUT or FORBIDDEN_WRITE
    by what the payload held."""
    walked: list[Any] = []
    real = schema_module._unstorable_number
    monkeypatch.setattr(schema_module, "_unstorable_number", lambda value: walked.append(1) or real(value))
    payload = {"query": INGEST, "variables": {"p": {"decisions": decisions}}}
    (error,) = client.post("/graphql", json=payload, headers=passport(registry, "staff")).json()["errors"]
    assert error["extensions"]["code"] == "FORBIDDEN_WRITE", error
    assert walked == []
