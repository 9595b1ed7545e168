"""No "Did you mean …?" anywhere (red-team pass on the transport, 2026-11-26).

Found against the running ``cairn serve --demo``: introspection is refused to roles without
``can_introspect`` and to requests without a passport, and strawberry's
``disable_field_suggestions`` strips the suggestion from an unknown *field*, but every other
refusal still suggested: an unknown argument (``node(idd:)`` → "Did you mean 'id'?"), a
misspelt enum literal or variable value ("Did you mean the enum value 'ASK'?"), an unknown type
in a variable definition ("Did you mean 'FactorUpdateInput'?") and an unknown input field,
literal or in a variable ("Did you mean 'authors'?"). Guessing one character at a time spelt
the schema out to a caller refused introspection. Fixed with graphql-core's own
``hide_suggestions``, in validation and in variable coercion.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import passport

# (document, variables): each one a refusal that graphql-core would answer with a suggestion.
PROBES: dict[str, tuple[str, dict[str, Any]]] = {
    "field": ('{ nod(id: "x") { id } }', {}),
    "argument": ('{ node(idd: "x") { id } }', {}),
    "enum literal": ('{ ask(anchorId: "x", mode: ASKK) { meta } }', {}),
    "enum variable": ('query($m: AskMode!) { ask(anchorId: "x", mode: $m) { meta } }', {"m": "ASKK"}),
    "type": ("query($x: FactorUpdateInpt) { __typename }", {}),
    "input field literal": (
        'query { correspondenceSearch(query: "x", filters: {autor: "x"}) { total } }',
        {},
    ),
    "input field variable": (
        'query($f: CorrespondenceFilter) { correspondenceSearch(query: "x", filters: $f) { total } }',
        {"f": {"autor": "x"}},
    ),
    "mutation input field": ('mutation { updateFactor(input: {factorr: "x"}) { id } }', {}),
}


@pytest.mark.parametrize("role", [None, "staff", "external", "exec"])
@pytest.mark.parametrize("probe", list(PROBES))
def test_no_refusal_suggests_a_name(
    probe: str, role: str | None, client: TestClient, registry: PolicyRegistry
) -> None:
    document, variables = PROBES[probe]
    headers = passport(registry, role) if role else {}
    resp = client.post("/graphql", json={"query": document, "variables": variables}, headers=headers)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body.get("data") is None and body["errors"], body
    assert "Did you mean" not in json.dumps(body), body
    for error in body["errors"]:
        assert error["extensions"]["code"] in {"GRAPHQL_VALIDATION_FAILED", "BAD_USER_INPUT"}, error


def test_the_refusal_still_names_what_the_caller_sent(client: TestClient, registry: PolicyRegistry) -> None:
    """Only the suggestion goes: the caller's own misspelling is still quoted back."""
    body = client.post(
        "/graphql", json={"query": '{ node(idd: "x") { id } }'}, headers=passport(registry, "staff")
    ).json()
    assert any("Unknown argument 'idd'" in e["message"] for e in body["errors"]), body
