"""Guessing the id of a hidden node: every id-taking field answers as for an id that does not exist.

The whole demo is loaded (org memory, dossiers, factors, correspondence). For staff, manager and
external, the ids tried are those of nodes only director and exec may see (chosen by the same
policy predicates the server uses, with the director's scope against the role's), plus ids
the role may see but may not *reach* over its edge rules or hop limit. Each is asked through
every GraphQL field that takes an id; the response, with the guessed id written as ``<id>``,
must equal the response for an id that has never existed. Correspondence takes no ids, only
numbers: a guessed ``fromSection`` beyond the role's own numbers answers like any other.
"""

from __future__ import annotations

import json

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.acl import acl_visible
from cairn.policy.passport import headers_for
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from tests.e2e.conftest import whole_demo

ROLES = ("staff", "manager", "external")
MISSING = "acme-no-such-node-2099"
PER_LABEL = 3
FIELDS = {
    "node": "query($id: ID!) { node(id: $id) { id label fields masked } }",
    "neighbourhood": "query($id: ID!) { neighbourhood(id: $id, hops: 2) { anchor { id } nodes { id } } }",
    "dossier": "query($id: ID!) { dossier(id: $id) { id title summary factCount facts { text } } }",
    "relatedDossiers": "query($id: ID!) { relatedDossiers(id: $id) }",
    "factor": "query($id: ID!) { factor(id: $id) { id name value } }",
    "journal": "query($id: ID!) { journal(factorId: $id) { id factorId rationale } }",
    "whyBlocked": "query($id: ID!) { whyBlocked(id: $id) { status blockers { factor { id } } answer } }",
    "whyValue": "query($id: ID!) { whyValue(id: $id) { answer evidence } }",
    "whatIf": "query($id: ID!) { whatIf(factorId: $id, value: 0) { blocked { id } answer } }",
    "ask": "query($id: ID!) { ask(anchorId: $id, mode: QUERY) { envelope { text } evidence { id } } }",
}
HIDDEN_FROM = f"""
MATCH (n:Entity)
WHERE {acl_visible("n")}
WITH n, [l IN labels(n) WHERE l <> 'Entity'][0] AS label
ORDER BY label, n.id
RETURN label, collect(n.id) AS ids
"""


@pytest.fixture(scope="module")
def demo(driver: Driver) -> Driver:
    return whole_demo(driver)


pytestmark = pytest.mark.usefixtures("demo")


def visible_ids(driver: Driver, scope: Scope) -> dict[str, list[str]]:
    records, _, _ = driver.execute_query(HIDDEN_FROM, scope.cypher_params())
    return {r["label"]: list(r["ids"]) for r in records}


def director_only(driver: Driver, registry: PolicyRegistry, role: str) -> list[str]:
    """Up to PER_LABEL ids per label that director sees and ``role`` does not."""
    director, profile = registry.get("director"), registry.get(role)
    assert director is not None and profile is not None
    seen = visible_ids(driver, Scope.from_profile(profile))
    ids: list[str] = []
    for label, director_ids in visible_ids(driver, Scope.from_profile(director)).items():
        hidden = [i for i in director_ids if i not in set(seen.get(label, []))]
        ids += hidden[:PER_LABEL]
    return ids


def answer(client: TestClient, registry: PolicyRegistry, role: str, field: str, node_id: str) -> str:
    resp = client.post(
        "/graphql",
        json={"query": FIELDS[field], "variables": {"id": node_id}},
        headers=headers_for(registry, role),
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    return json.dumps(body, sort_keys=True).replace(node_id, "<id>")


@pytest.mark.parametrize("role", ROLES)
def test_a_hidden_id_answers_as_a_missing_one_everywhere(
    demo: Driver, client: TestClient, registry: PolicyRegistry, role: str
) -> None:
    guesses = director_only(demo, registry, role)
    assert len(guesses) >= 3, "the demo must hold director-only nodes for this role"
    labels = {label for label, ids in visible_ids(demo, Scope.system()).items() if set(ids) & set(guesses)}
    assert {"Decision", "Section"} <= labels or role == "external"
    for field in FIELDS:
        missing = answer(client, registry, role, field, MISSING)
        for guess in guesses:
            assert answer(client, registry, role, field, guess) == missing, (role, field, guess)
