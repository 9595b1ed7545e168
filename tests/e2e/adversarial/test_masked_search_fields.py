"""Search scores must not read masked fields (red-team pass, 2026-11-26).

A decision's vector is made from its option and its rationale; staff see every product
decision without its rationale, and managers see corporate decisions as headers only. Ranked
by that vector, a search told them what the rationale says: the rationale's own words, sent
as a query, put the decision first with a score near 0.8 (found against ``cairn serve --demo``
with staff). Two decisions a caller sees alike must rank alike, whatever their hidden fields
hold; a caller that may read the rationale still finds it (docs/design.md §Policy module).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.adversarial.scoped_write_support import decision, remove, seed
from tests.e2e.conftest import gql, passport

SECRET = "Initech acquisition Project Falcon closes in March at 4.2 billion"
DULL = "Weekly gardening rota for the office plants"
OPTION = "Consolidate vendor onboarding checklists into one template"
# Same option (what staff and, for corporate decisions, managers see); rationales differ.
RECORDS = {
    "acme-t-masked-secret": ("acme/product", SECRET),
    "acme-t-masked-dull": ("acme/product", DULL),
    "acme-t-masked-corp-secret": ("acme/corporate", SECRET),
    "acme-t-masked-corp-dull": ("acme/corporate", DULL),
}
SEARCH = (
    "query($q: String!) { search(query: $q, k: 100, threshold: -1) "
    "{ total hits { score node { id fields masked } } } }"
)


@pytest.fixture(scope="module", autouse=True)
def seeded(acme: Driver) -> Iterator[None]:
    everyone = ["staff", "manager", "director", "exec", "writer"]
    seed(
        acme,
        {
            "decisions": [
                decision(rid, domain=domain, option=OPTION, rationale=rationale, roles_allowed=everyone)
                for rid, (domain, rationale) in RECORDS.items()
            ]
        },
    )
    yield
    remove(acme, *RECORDS)


def scores(client: TestClient, headers: dict[str, str], query: str) -> dict[str, Any]:
    body = gql(client, SEARCH, headers, q=query)
    assert "errors" not in body, body
    return {h["node"]["id"]: h for h in body["data"]["search"]["hits"] if h["node"]["id"] in RECORDS}


@pytest.mark.parametrize(
    ("role", "pair"),
    [
        ("staff", ("acme-t-masked-secret", "acme-t-masked-dull")),
        ("manager", ("acme-t-masked-corp-secret", "acme-t-masked-corp-dull")),
    ],
)
def test_a_masked_rationale_moves_no_score(
    role: str, pair: tuple[str, str], client: TestClient, registry: PolicyRegistry
) -> None:
    headers = passport(registry, role)
    secret, dull = pair
    for query in (SECRET, "Initech acquisition", OPTION):
        hits = scores(client, headers, query)
        assert {secret, dull} <= hits.keys(), (role, query, sorted(hits))
        assert "rationale" in hits[secret]["node"]["masked"]
        assert hits[secret]["score"] == hits[dull]["score"], (role, query, hits[secret], hits[dull])


def test_a_reader_of_the_rationale_still_searches_it(client: TestClient, registry: PolicyRegistry) -> None:
    hits = scores(client, passport(registry, "director"), SECRET)
    assert hits["acme-t-masked-secret"]["score"] > hits["acme-t-masked-dull"]["score"] + 0.3
    # a manager reads product rationales: ranked by the full vector there
    hits = scores(client, passport(registry, "manager"), SECRET)
    assert hits["acme-t-masked-secret"]["score"] > hits["acme-t-masked-dull"]["score"] + 0.3
