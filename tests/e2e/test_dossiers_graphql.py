"""Dossiers over GraphQL end to end (HTTP, passport, role gates) on the demo dossiers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.conftest import codes, demo_dossiers, gql_as

SEARCH = """query($q: String!, $k: Int!) {
  dossierSearch(query: $q, topK: $k) {
    count context
    dossiers { id title summary score facts { id text turnIndex } }
  }
}"""
DOSSIER = """query($id: ID!) {
  dossier(id: $id) { id title summary status facts { text } history { op newValue details } }
}"""
BLOCK = (
    "query($b: String!) { block(blockId: $b) { blockId globalTags sectionRules processedAt turns facts } }"
)
INGEST = """mutation($p: JSON!) {
  ingestFactPacket(packet: $p) { dossierId action addedFactIds skipped decision }
}"""
INGEST_BLOCK = "mutation($b: JSON!) { ingestBlock(block: $b) { blockId turns facts } }"
GARDEN = "mutation($b: String!) { gardenBlock(blockId: $b) { blockId globalTags turnsDeleted dossiers } }"
LINK = """mutation($a: ID!, $b: ID!) {
  linkDossiers(a: $a, b: $b, rationale: "both about habits") { op dossierIds }
}"""
RELATED = "query($id: ID!) { relatedDossiers(id: $id) }"
FALCON = "Initech acquisition"


@pytest.fixture(scope="module")
def demo(driver: Driver, embedder: Embedder) -> Driver:
    return demo_dossiers(driver, embedder)


@pytest.fixture(scope="module")
def client(demo: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def falcon_id(demo: Driver) -> str:
    records, _, _ = demo.execute_query(
        "MATCH (d:Dossier) WHERE 'confidential' IN d.namespaces RETURN d.id AS id"
    )
    assert len(records) == 1
    return str(records[0]["id"])


def test_staff_cannot_see_a_restricted_dossier(
    demo: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    secret = falcon_id(demo)
    staff = gql_as(client, registry, "staff", SEARCH, q=FALCON, k=10)
    assert "errors" not in staff
    result = staff["data"]["dossierSearch"]
    assert result["count"] == 0
    assert result["dossiers"] == []
    assert result["context"] == ""
    text = json.dumps(staff)
    assert secret not in text and "Initech" not in text and "Falcon" not in text
    by_id = gql_as(client, registry, "staff", DOSSIER, id=secret)
    assert by_id["data"]["dossier"] is None
    assert "errors" not in by_id

    director = gql_as(client, registry, "director", SEARCH, q=FALCON, k=10)
    hits = director["data"]["dossierSearch"]
    assert hits["count"] == 1
    assert hits["dossiers"][0]["id"] == secret
    assert any("Initech" in f["text"] for f in hits["dossiers"][0]["facts"])
    full = gql_as(client, registry, "director", DOSSIER, id=secret)["data"]["dossier"]
    assert full["history"][0]["op"] == "created"


def test_search_returns_the_diet_dossier_with_facts_and_context(
    client: TestClient, registry: PolicyRegistry
) -> None:
    body = gql_as(client, registry, "staff", SEARCH, q="What are the user's dietary restrictions?", k=3)
    result = body["data"]["dossierSearch"]
    top = result["dossiers"][0]
    assert "vegetarian" in top["title"].lower()
    assert top["score"] >= 0.4
    assert any("eggs" in f["text"] for f in top["facts"])
    assert "=== FACT DOSSIERS ===" in result["context"]
    assert result["count"] >= len(result["dossiers"])


def test_block_metadata_query(client: TestClient, registry: PolicyRegistry) -> None:
    block = gql_as(client, registry, "staff", BLOCK, b="block_003")["data"]["block"]
    assert block["globalTags"] == ["env: python-3.9"]
    assert {r["rule"] for r in block["sectionRules"]} == {"no-eval", "server=Box A"}
    assert block["turns"] == 0 and block["processedAt"] is not None
    assert gql_as(client, registry, "staff", BLOCK, b="block_005")["data"]["block"] is None  # restricted
    assert (
        gql_as(client, registry, "director", BLOCK, b="block_005")["data"]["block"]["blockId"] == "block_005"
    )


def test_writes_need_the_writer_role(client: TestClient, registry: PolicyRegistry) -> None:
    packet = {
        "cluster_label": "Tea",
        "facts": ["User collects vintage fountain pens"],
        "source_block_id": "b-gql",
    }
    refused = gql_as(client, registry, "staff", INGEST, p=packet)
    assert codes(refused) == ["FORBIDDEN_WRITE"]
    assert gql_as(client, registry, None, INGEST, p=packet)["data"] is None

    written = gql_as(client, registry, "writer", INGEST, p=packet)["data"]["ingestFactPacket"]
    assert written["action"] == "created"
    assert len(written["addedFactIds"]) == 1
    again = gql_as(client, registry, "writer", INGEST, p=packet)["data"]["ingestFactPacket"]
    assert (again["action"], again["dossierId"]) == ("already_applied", written["dossierId"])


def test_bad_packets_are_refused_with_a_code(client: TestClient, registry: PolicyRegistry) -> None:
    body = gql_as(
        client, registry, "writer", INGEST, p={"cluster_label": "x", "facts": [1], "source_block_id": "b"}
    )
    assert codes(body) == ["INVALID_INPUT"]
    assert "item 0 is a number" in body["errors"][0]["message"]
    missing = gql_as(client, registry, "writer", INGEST, p={"cluster_label": "x", "facts": ["a fact"]})
    assert codes(missing) == ["INVALID_INPUT"]
    assert any("source_block_id" in p for p in missing["errors"][0]["extensions"]["problems"])


def test_ingest_and_garden_a_block(client: TestClient, registry: PolicyRegistry) -> None:
    block = {
        "block_id": "block_gql",
        "turns": [{"user": "I am using Python 3.12"}, {"user": "I like sailing on weekends"}],
        "facts": [
            {"value": "I am using Python 3.12", "turn_index": 1},
            {"value": "User likes sailing on weekends", "turn_index": 2},
        ],
    }
    assert codes(gql_as(client, registry, "staff", INGEST_BLOCK, b=block)) == ["FORBIDDEN_WRITE"]
    stored = gql_as(client, registry, "writer", INGEST_BLOCK, b=block)["data"]["ingestBlock"]
    assert (stored["turns"], stored["facts"]) == (2, 2)
    gardened = gql_as(client, registry, "writer", GARDEN, b="block_gql")["data"]["gardenBlock"]
    assert gardened["globalTags"] == ["env: python-3.12"]
    assert gardened["turnsDeleted"] == 2
    assert len(gardened["dossiers"]) == 1
    assert codes(gql_as(client, registry, "writer", GARDEN, b="no_such_block")) == ["NOT_FOUND"]


def test_search_needs_a_role_that_may_search(client: TestClient, registry: PolicyRegistry) -> None:
    assert codes(gql_as(client, registry, "external", SEARCH, q="vegetarian", k=3)) == ["FORBIDDEN_SEARCH"]


def test_links_show_up_as_related_for_those_who_see_both(
    demo: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    records, _, _ = demo.execute_query(
        "MATCH (d:Dossier) WHERE d.title IN ['Vegetarian', 'Running Training'] "
        "RETURN d.title AS t, d.id AS id"
    )
    ids = {r["t"]: r["id"] for r in records}
    veg, run = ids["Vegetarian"], ids["Running Training"]
    assert codes(gql_as(client, registry, "staff", LINK, a=veg, b=run)) == ["FORBIDDEN_WRITE"]
    linked = gql_as(client, registry, "writer", LINK, a=veg, b=run)["data"]["linkDossiers"]
    assert sorted(linked["dossierIds"]) == sorted([veg, run])
    related = gql_as(client, registry, "staff", RELATED, id=veg)["data"]["relatedDossiers"]
    assert related[0]["id"] == run and related[0]["linked"] is True
    secret = falcon_id(demo)
    mixed = gql_as(client, registry, "writer", LINK, a=veg, b=secret)
    assert codes(mixed) == ["DOSSIER_CONFLICT"]


def test_a_writer_cannot_place_data_outside_its_own_profile(
    client: TestClient, registry: PolicyRegistry
) -> None:
    outside = {
        "cluster_label": "Elsewhere",
        "facts": ["User collects stamps"],
        "source_block_id": "b-x",
        "access": {"domain": "globex/hr", "roles_allowed": ["writer", "staff"]},
    }
    body = gql_as(client, registry, "writer", INGEST, p=outside)
    assert codes(body) == ["FORBIDDEN_WRITE"]
    assert any("access.domain" in p for p in body["errors"][0]["extensions"]["problems"])
    unreadable = {**outside, "access": {"roles_allowed": ["director"]}}
    assert codes(gql_as(client, registry, "writer", INGEST, p=unreadable)) == ["FORBIDDEN_WRITE"]
    block = {"block_id": "block_far", "facts": ["x"], "access": {"domain": "globex/hr"}}
    assert codes(gql_as(client, registry, "writer", INGEST_BLOCK, b=block)) == ["FORBIDDEN_WRITE"]
