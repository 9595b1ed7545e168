"""``relatedDossiers`` must mask a related dossier's title and a link's rationale (red-team pass, 2026-11-26).

A dossier's ``title`` is written from its facts' text, so it is masked wherever fact ``text`` is
(``Scope.derived_hidden``), and a journal entry's ``rationale`` is masked where the profile hides
it. ``dossier`` and ``node`` did so; ``relatedDossiers`` (and the export built on it) returned
both straight from the store: a linked dossier's title quoted the masked fact and the link's
rationale read out in full. No demo role masks these fields; this module gives staff a policy
that does, and asks that what ``relatedDossiers`` says of a dossier is what ``dossier`` says.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.memory.dossiers import link_dossiers
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_masked_text_search import Probe, ask
from tests.e2e.conftest import demo_dossiers

ROLE = "staff"
FACT_FIELDS = ["id", "fact_type", "confidence", "added_at", "source_block_id", "domain"]
ENTRY_FIELDS = ["id", "op", "timestamp", "domain", "sensitivity", "namespaces", "roles_allowed"]
RATIONALE = "both hold the quarterly churn numbers the board asked about"
RELATED = "query($i: ID!) { relatedDossiers(id: $i, topK: 10) }"
DOSSIER = "query($i: ID!) { dossier(id: $i) { title summary } }"

TWO_DOSSIERS = """
MATCH (d:Dossier {status: 'active'}) WHERE d.domain = 'acme/assistant' AND d.title IS NOT NULL
WITH d.domain AS domain, d.sensitivity AS s, d.namespaces AS ns, d.roles_allowed AS r,
     collect(d.id) AS ids
WHERE size(ids) >= 2 AND 'staff' IN r
RETURN ids[0] AS a, ids[1] AS b LIMIT 1
"""
UNLINK = """
MATCH (j:JournalEntry {op: 'linked'})-[:ABOUT]->(:Dossier {id: $a})
MATCH (j)-[:ABOUT]->(:Dossier {id: $b}) DETACH DELETE j
"""


@pytest.fixture(scope="module")
def linked(driver: Driver, embedder: Embedder) -> Iterator[tuple[str, str]]:
    demo_dossiers(driver, embedder)
    records, _, _ = driver.execute_query(TWO_DOSSIERS)
    assert records, "the demo holds two staff dossiers of equal access"
    a, b = str(records[0]["a"]), str(records[0]["b"])
    link_dossiers(driver, a, b, RATIONALE)
    yield a, b
    driver.execute_query(UNLINK, a=a, b=b)  # the demo dossiers as they were for the next module


@pytest.fixture(scope="module")
def probe(
    linked: tuple[str, str], settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Probe]:
    registry: Path = demo_roles_with(
        tmp_path_factory,
        ROLE,
        {
            "Fact": [
                {"domains": ["acme/assistant"], "fields": FACT_FIELDS},
                {"domains": ["*"], "fields": ["*"]},
            ],
            "JournalEntry": [{"domains": ["*"], "fields": ENTRY_FIELDS}],
        },
    )
    with TestClient(create_app(settings.model_copy(update={"policy_file": registry}))) as client:
        yield client, PolicyRegistry.load(registry)


def test_a_link_shows_the_title_and_rationale_only_to_whom_may_read_them(
    probe: Probe, linked: tuple[str, str]
) -> None:
    a, b = linked
    full = ask(probe, RELATED, "director", i=a)["relatedDossiers"]
    title = ask(probe, DOSSIER, "director", i=b)["dossier"]["title"]
    assert {"id": b, "title": title, "linked": True, "rationale": RATIONALE} in full
    assert title  # the director reads the title the probe must not

    assert ask(probe, DOSSIER, i=b)["dossier"]["title"] is None  # dossier masks it for staff
    rows = [r for r in ask(probe, RELATED, i=a)["relatedDossiers"] if r["id"] == b]
    assert rows == [{"id": b, "title": None, "linked": True, "rationale": None}]


def test_no_related_row_carries_a_title_the_dossier_read_masks(probe: Probe, linked: tuple[str, str]) -> None:
    for anchor in linked:
        for row in ask(probe, RELATED, i=anchor)["relatedDossiers"]:
            shown = ask(probe, DOSSIER, i=row["id"])["dossier"]["title"]
            assert row["title"] == shown, row
