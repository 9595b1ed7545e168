"""NaN and Infinity are not JSON (red-team pass on writes, 2026-11-26).

Found against the running ``cairn serve --demo``: Python's JSON parser reads the non-standard
constants ``NaN``, ``Infinity`` and ``-Infinity``. The writer sent
``ingestOrgMemory(payload: $p)`` with ``"x-extra": {"visibility_note": NaN}`` in the variables;
the decision was stored, and from then on every answer that shows the note (``node``,
``neighbourhood``, ``ask`` evidence, for exec and director) held a bare ``NaN``: not JSON
(RFC 8259), so a browser's ``JSON.parse`` (the UI, GraphiQL) or any strict client failed on the
whole answer. Typed ``Float`` arguments already refused NaN; a ``JSON`` argument did not.

Fixed where a JSON argument is checked before its resolver runs (cairn/resolvers/schema.py, with
the 64-bit integer check): ``BAD_USER_INPUT`` naming the argument, nothing written. (A NaN in a
typed variable was, and stays, ``BAD_USER_INPUT`` naming the variable.)
"""

from __future__ import annotations

import json

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.resolvers.schema import MAX_JSON_DEPTH
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.conftest import ORG_MEMORY as ORG
from tests.e2e.adversarial.conftest import product_decision
from tests.e2e.conftest import passport, wipe

NODE = "query($id: ID!) { node(id: $id) { id fields } }"
DECISION = product_decision(
    "zz-note", roles_allowed=["writer", "exec"], **{"x-extra": {"visibility_note": "PLACEHOLDER"}}
)


@pytest.fixture(scope="module")
def empty(driver: Driver) -> Driver:
    wipe(driver)
    return driver


pytestmark = pytest.mark.usefixtures("empty")


def body_with(constant: str) -> bytes:
    text = json.dumps({"query": ORG, "variables": {"p": {"decisions": [DECISION]}}})
    return text.replace('"PLACEHOLDER"', constant).encode()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_json_argument_holding_a_non_json_number_is_refused_unrun(
    constant: str, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    before = graph_checksum(empty)
    headers = {**passport(registry, "writer"), "content-type": "application/json"}
    resp = client.post("/graphql", content=body_with(constant), headers=headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["data"] is None, body
    (error,) = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "payload"}, error
    assert "not a JSON number" in error["message"], error
    assert graph_checksum(empty) == before


def test_every_answer_is_strict_json(client: TestClient, registry: PolicyRegistry) -> None:
    """A finite note is written, and the reader's answer parses without Python's leniency."""
    headers = {**passport(registry, "writer"), "content-type": "application/json"}
    resp = client.post("/graphql", content=body_with("1e308"), headers=headers)
    assert resp.json() == {"data": {"ingestOrgMemory": {"decisions": 1}}}, resp.text

    def strict(constant: str) -> None:
        raise AssertionError(f"{constant} in an answer")

    answer = client.post(
        "/graphql", json={"query": NODE, "variables": {"id": "zz-note"}}, headers=passport(registry, "exec")
    )
    fields = json.loads(answer.text, parse_constant=strict)["data"]["node"]["fields"]
    assert fields["x_extra"] == {"visibility_note": 1e308}


@pytest.mark.parametrize("depth", [600, 950])
def test_a_json_argument_nested_too_deep_is_refused_unrun(
    depth: int, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    """Found by the red-team pass of 2026-11-26 (eighth on writes): a note nested 600 to 980
    lists deep parses (the request parser's own limit is near 990) but overflowed the recursive
    check of the JSON argument's numbers: ``INTERNAL_SERVER_ERROR`` instead of a refusal naming
    the argument. Now a JSON argument nested deeper than ``MAX_JSON_DEPTH`` is refused first."""
    before = graph_checksum(empty)
    headers = {**passport(registry, "writer"), "content-type": "application/json"}
    resp = client.post("/graphql", content=body_with("[" * depth + "1" + "]" * depth), headers=headers)
    body = resp.json()
    assert body["data"] is None, body
    (error,) = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "payload"}, error
    assert "nested deeper than" in error["message"], error
    assert graph_checksum(empty) == before


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1])
def test_a_json_argument_nested_exactly_to_the_limit_is_accepted_and_one_more_refused(
    levels: int, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    """The limit at its edge (review of stop 27): the payload nests ``levels`` containers, itself
    the first (payload, decisions, the decision, its x-extra, then lists around the note)."""
    note = "[" * (levels - 4) + "1" + "]" * (levels - 4)
    decision = product_decision(f"zz-deep-{levels}", **{"x-extra": {"visibility_note": "PLACEHOLDER"}})
    text = json.dumps({"query": ORG, "variables": {"p": {"decisions": [decision]}}})
    headers = {**passport(registry, "writer"), "content-type": "application/json"}
    before = graph_checksum(empty)
    body = client.post(
        "/graphql", content=text.replace('"PLACEHOLDER"', note).encode(), headers=headers
    ).json()
    if levels == MAX_JSON_DEPTH:
        assert body == {"data": {"ingestOrgMemory": {"decisions": 1}}}, body
        return
    assert body["data"] is None, body
    (error,) = body["errors"]
    assert error["extensions"] == {"code": "BAD_USER_INPUT", "argument": "payload"}, error
    assert f"nested deeper than {MAX_JSON_DEPTH} levels" in error["message"], error
    assert graph_checksum(empty) == before
