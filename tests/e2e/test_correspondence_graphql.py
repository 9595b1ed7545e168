"""Correspondence over GraphQL end to end: passport, role gates, masking, the sync mutation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.correspondence.collisions import default_log_path
from cairn.ingest.correspondence.demo import DEMO_FILE, load_demo_correspondence
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.conftest import codes, gql_as, wipe

SECTION = "sectionNumber filedId collision author date title body execTags statusTags respondsTo score masked"
SEARCH = f"""query($q: String!, $k: Int!, $f: CorrespondenceFilter) {{
  correspondenceSearch(query: $q, k: $k, filters: $f) {{ total hits {{ {SECTION} }} }}
}}"""
TAIL = f"query($n: Int!, $from: Int) {{ correspondenceTail(n: $n, fromSection: $from) {{ {SECTION} }} }}"
DIVERGENCE = f"""query($q: String!, $beings: [String!]!) {{
  beingDivergence(question: $q, beings: $beings, k: 2) {{ author sections {{ {SECTION} }} }}
}}"""
SYNC = """mutation($source: String!, $md: String!) {
  syncCorrespondence(source: $source, markdown: $md) {
    source sectionsInFile unchanged collisionsLogged embeddingModel
    created { id sectionNumber filedId collision }
    conflicts { ordinal line filedId kind detail }
    warnings
  }
}"""


def reload(driver: Driver, settings: Settings, embedder: Embedder) -> Driver:
    """The demo letters alone, with a fresh collision log (it lives in the test data dir)."""
    wipe(driver)
    default_log_path(settings).unlink(missing_ok=True)
    load_demo_correspondence(driver, settings, embedder)
    return driver


@pytest.fixture(scope="module")
def letters(driver: Driver, settings: Settings, embedder: Embedder) -> Driver:
    return reload(driver, settings, embedder)


@pytest.fixture
def fresh_letters(driver: Driver, settings: Settings, embedder: Embedder) -> Driver:
    return reload(driver, settings, embedder)


@pytest.fixture(scope="module")
def client(driver: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def test_search_is_scoped_and_filtered(letters: Driver, client: TestClient, registry: PolicyRegistry) -> None:
    body = gql_as(client, registry, "staff", SEARCH, q="margin impact of EU-only inference", k=50)
    result = body["data"]["correspondenceSearch"]
    assert result["total"] == 40
    restricted = {"Board pre-read: margin impact of EU-only inference", "EMEA headcount request"}
    assert not restricted & {h["title"] for h in result["hits"]}
    assert sorted(h["sectionNumber"] for h in result["hits"]) == list(range(1, 41))  # staff's own numbers
    assert "71% to 64%" not in json.dumps(body)
    director = gql_as(client, registry, "director", SEARCH, q="margin impact of EU-only inference", k=1)
    assert director["data"]["correspondenceSearch"]["hits"][0]["sectionNumber"] == 17

    filtered = gql_as(
        client,
        registry,
        "staff",
        SEARCH,
        q="decisions",
        k=50,
        f={"execTags": ["GOV"], "dateFrom": "2026-02-01"},
    )["data"]["correspondenceSearch"]
    # canonical 28, 36 and 38, in staff's numbering (it does not see 17, 29 and 37)
    assert {h["sectionNumber"] for h in filtered["hits"]} == {27, 34, 35}
    assert all("EXEC:GOV" in h["execTags"] for h in filtered["hits"])


def test_external_role_reads_the_tail_only(
    letters: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    tail = gql_as(client, registry, "external", TAIL, n=3)["data"]["correspondenceTail"]
    assert [s["sectionNumber"] for s in tail] == [37, 38, 39]  # dense: 4 of 43 are hidden from it
    assert all(s["execTags"] is None and s["collision"] is None and s["respondsTo"] is None for s in tail)
    assert all("exec_tags" in s["masked"] for s in tail)
    # The letter answers § XXXVIII; external may not see responds_to_filed, so not in the body either.
    assert "responds_to_filed" in tail[0]["masked"]
    assert "Re: §" not in tail[0]["body"] and "Atlas's letter above, not Dana's" in tail[0]["body"]
    for query, variables in (
        (SEARCH, {"q": "pricing", "k": 3}),
        (DIVERGENCE, {"q": "pricing", "beings": ["Atlas"]}),
    ):
        body = gql_as(client, registry, "external", query, **variables)
        assert codes(body) == ["FORBIDDEN_SEARCH"] and body["data"] is None


def test_divergence_groups_by_author(letters: Driver, client: TestClient, registry: PolicyRegistry) -> None:
    body = gql_as(
        client,
        registry,
        "manager",
        DIVERGENCE,
        q="should we sell credits or bundles?",
        beings=["Marta Reyes", "Dana Okafor"],
    )
    groups = body["data"]["beingDivergence"]
    assert [g["author"] for g in groups] == ["Marta Reyes", "Dana Okafor"]
    assert all(s["author"] == g["author"] for g in groups for s in g["sections"])
    assert groups[0]["sections"][0]["sectionNumber"] == 11  # "Credits confuse procurement"


def test_no_passport_no_data(letters: Driver, client: TestClient, registry: PolicyRegistry) -> None:
    body = gql_as(client, registry, None, TAIL, n=3)
    assert codes(body) == ["PASSPORT_MISSING_HEADER"]
    assert "Okafor" not in json.dumps(body)


def test_bad_arguments_have_stable_codes(
    letters: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    assert codes(gql_as(client, registry, "staff", SEARCH, q="x", k=0)) == ["INVALID_ARGUMENT"]
    assert codes(gql_as(client, registry, "staff", SEARCH, q="x", k=3, f={"dateTo": "soon"})) == [
        "INVALID_ARGUMENT"
    ]
    assert codes(gql_as(client, registry, "staff", TAIL, n=10_000)) == ["INVALID_ARGUMENT"]


def test_sync_mutation_for_writers_only(
    fresh_letters: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    text = DEMO_FILE.read_text(encoding="utf-8")
    appended = text + "\n---\n\n## XLIII — A late letter\n\n*Dana Okafor · 2026-03-20*\n\nOne more thing.\n"
    denied = gql_as(client, registry, "staff", SYNC, source="acme-letters", md=appended)
    assert codes(denied) == ["FORBIDDEN_WRITE"]
    assert len(gql_as(client, registry, "director", TAIL, n=500)["data"]["correspondenceTail"]) == 43

    summary = gql_as(client, registry, "writer", SYNC, source="acme-letters", md=appended)["data"][
        "syncCorrespondence"
    ]
    assert (summary["sectionsInFile"], summary["unchanged"]) == (44, 43)
    created = summary["created"]
    assert re.fullmatch(r"section:[0-9a-f]{32}", created[0].pop("id"))  # opaque: no position in it
    assert created == [{"sectionNumber": 44, "filedId": "XLIII", "collision": True}]
    assert summary["collisionsLogged"] == 1 and summary["conflicts"] == []

    edited = appended.replace("One more thing.", "One more thing, edited.")
    again = gql_as(client, registry, "writer", SYNC, source="acme-letters", md=edited)["data"][
        "syncCorrespondence"
    ]
    assert again["created"] == [] and [c["kind"] for c in again["conflicts"]] == ["edited"]


def test_sync_mutation_refuses_bad_input(
    fresh_letters: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    body = gql_as(client, registry, "writer", SYNC, source="notes", md="## I — Only a heading\n")
    assert codes(body) == ["INVALID_INPUT"]
    assert body["errors"][0]["extensions"]["problems"] == ["line 1: section 'I' has a heading but no body"]
    assert codes(gql_as(client, registry, "writer", SYNC, source="../etc", md="## I — x\n\nY\n")) == [
        "INVALID_ARGUMENT"
    ]
    assert len(gql_as(client, registry, "director", TAIL, n=500)["data"]["correspondenceTail"]) == 43
