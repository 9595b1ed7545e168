"""Fact, dossier and section search must not read a masked text either (red-team pass, 2026-11-26).

Decisions and events are ranked only by a vector whose fields the caller may all see
(``test_masked_search_fields.py``). Facts, dossiers and sections were not: a policy that shows
a fact without its ``text`` (or a section without its ``body``) still let fact search rank the
fact by its vector and its BM25 entry (and count its length in BM25's average), dossier search
score its dossier by it, ``relatedDossiers`` vote with it, and a dossier's stored summary quote
it; correspondence search and divergence ranked and counted the section by its body. Sent as a
query, the hidden text's own words put the fact (section) first: what a masked text says moved
the answer. No demo role masks these fields today; this module gives staff a policy that does,
and asks that a search's answer be the same whatever the query, once every text it could rank
by is masked (docs/design.md §Policy module, "Masked fields and search").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.correspondence.demo import load_demo_correspondence
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.conftest import demo_dossiers, gql, passport

ROLE = "staff"
# Staff's demo facts and dossiers are all in acme/assistant, its letters in acme/correspondence:
# there the text (body) is masked; elsewhere everything shows, as in the demo.
FACT_FIELDS = ["id", "fact_type", "confidence", "added_at", "source_block_id", "domain"]
SECTION_FIELDS = ["id", "author", "date", "title", "status_tags", "domain"]
FACT = "The nightly billing reconciliation job fails about once a week"
BODY = "the on-prem connector estate: eleven customers, four of them banks"
DULL = "half marathon training plan for the spring"
Probe = tuple[TestClient, PolicyRegistry]

MEMORY = """query($q: String!) { memorySearch(query: $q, k: 50) {
  count context hits { factId text dossierId dossierSummary score matched } } }"""
DOSSIERS = """query($q: String!) { dossierSearch(query: $q, topK: 20, threshold: 0.0) {
  count context dossiers { id summary score factCount } } }"""
LETTERS = """query($q: String!) { correspondenceSearch(query: $q, k: 50) {
  total hits { id sectionNumber title score } } }"""
DIVERGENCE = """query($q: String!) { beingDivergence(question: $q,
  beings: ["Priya Raman", "Dana Okafor"], k: 5) { author sections { id score } } }"""
DOSSIER = "query($i: ID!) { dossier(id: $i) { summary factCount facts { id text } } }"


@pytest.fixture(scope="module")
def demo(driver: Driver, settings: Settings, embedder: Embedder) -> Driver:
    demo_dossiers(driver, embedder)
    load_demo_correspondence(driver, settings, embedder)
    return driver


@pytest.fixture(scope="module")
def masked_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_roles_with(
        tmp_path_factory,
        ROLE,
        {
            "Fact": [
                {"domains": ["acme/assistant"], "fields": FACT_FIELDS},
                {"domains": ["*"], "fields": ["*"]},
            ],
            "Section": [
                {"domains": ["acme/correspondence"], "fields": SECTION_FIELDS},
                {"domains": ["*"], "fields": ["*"]},
            ],
        },
    )


@pytest.fixture(scope="module")
def probe(demo: Driver, settings: Settings, masked_registry: Path) -> Iterator[Probe]:
    with TestClient(create_app(settings.model_copy(update={"policy_file": masked_registry}))) as client:
        yield client, PolicyRegistry.load(masked_registry)


def ask(probe: Probe, query: str, role: str = ROLE, **variables: Any) -> dict[str, Any]:
    client, registry = probe
    body = gql(client, query, passport(registry, role), **variables)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def dossier_of(probe: Probe, fact: str) -> str:
    """The dossier holding ``fact``, found as a director (whose policy is the demo's)."""
    hits = ask(probe, MEMORY, "director", q=fact)["memorySearch"]["hits"]
    assert hits and hits[0]["text"] == fact, hits[:1]
    return str(hits[0]["dossierId"])


def test_the_probe_sees_the_facts_and_letters_without_their_texts(probe: Probe) -> None:
    dossier = ask(probe, DOSSIER, i=dossier_of(probe, FACT))["dossier"]
    assert dossier["factCount"] == 3 and all(f["text"] is None for f in dossier["facts"])
    letters = ask(probe, "{ correspondenceTail(n: 3) { title body } }")["correspondenceTail"]
    assert len(letters) == 3 and all(s["title"] and s["body"] is None for s in letters)


@pytest.mark.parametrize(
    ("query", "secret"),
    [(MEMORY, FACT), (DOSSIERS, FACT), (LETTERS, BODY), (DIVERGENCE, BODY)],
    ids=["memorySearch", "dossierSearch", "correspondenceSearch", "beingDivergence"],
)
def test_a_masked_text_moves_no_search(probe: Probe, query: str, secret: str) -> None:
    assert ask(probe, query, q=secret) == ask(probe, query, q=DULL)


def test_a_summary_does_not_quote_a_masked_fact(probe: Probe) -> None:
    dossier_id = dossier_of(probe, FACT)
    stored = ask(probe, DOSSIER, "director", i=dossier_id)["dossier"]
    assert FACT in stored["summary"]  # the stored summary quotes it
    assert FACT not in (ask(probe, DOSSIER, i=dossier_id)["dossier"]["summary"] or "")


def test_a_reader_of_the_text_still_searches_it(probe: Probe) -> None:
    hits = ask(probe, MEMORY, "director", q=FACT)["memorySearch"]["hits"]
    assert hits[0]["text"] == FACT
    letters = ask(probe, LETTERS, "director", q=BODY)["correspondenceSearch"]["hits"]
    assert "The platform after the cloud unification" in [s["title"] for s in letters[:3]]
