"""A dossier's status, hidden by a role's rules, is not read off search, relations or routing.

Found in red-team pass 14: ``dossierSearch``, ``memorySearch`` and ``relatedDossiers`` ranked
active dossiers only, and a fact packet voted among active dossiers only, whatever the caller's
field rules showed of ``status``. A role whose rules hide it still reads an archived dossier by
``dossier(id)``, so searching its own facts' words told it whether it was archived (present:
active; absent: archived), and a writer learnt the same from where a packet restating one of its
facts went. Now the default view (active only) applies to a dossier only where the caller sees its
status (``cairn.policy.acl.status_in_view``), and a writer that may not read it may not route
(refused naming the field, as for a fact's text).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import get_embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_unwalkable_dossier_writes import ACCESS, PACKET, packet
from tests.e2e.conftest import codes, gql, passport, wipe

# Two dossiers of one fact each, near enough to be related; the probe is "zz-probe".
FACTS = {
    "zz-probe": "Sea otters hold hands while they sleep",
    "zz-other": "Sea otters hold hands when they sleep in kelp",
}
CREATE = """
UNWIND $rows AS row
CREATE (d:Entity:Dossier {id: row.id, status: 'active', title: 'Otters', summary: row.text,
        last_updated: datetime('2024-01-01T00:00:00Z')})
SET d += $access
CREATE (f:Entity:Fact {id: row.id + '-fact', text: row.text, embedding: row.vector,
        added_at: datetime('2024-01-01T00:00:00Z')})
SET f += $access
CREATE (d)-[:HAS_FACT]->(f)
"""
STATUS = "MATCH (d:Dossier {id: 'zz-probe'}) SET d.status = $status"
READS = {
    "dossierSearch": (
        "query($q: String!) { dossierSearch(query: $q, topK: 5) { count dossiers { id title score } } }",
        {"q": FACTS["zz-probe"]},
    ),
    "memorySearch": (
        "query($q: String!) { memorySearch(query: $q, k: 5) { count hits { factId dossierId score } } }",
        {"q": FACTS["zz-probe"]},
    ),
    "relatedDossiers": ('query { relatedDossiers(id: "zz-other") }', {}),
}


@pytest.fixture(scope="module")
def otters(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    vectors = get_embedder().embed(list(FACTS.values()))
    rows = [
        {"id": did, "text": text, "vector": [float(x) for x in v]}
        for (did, text), v in zip(FACTS.items(), vectors, strict=True)
    ]
    driver.execute_query(CREATE, rows=rows, access=ACCESS)
    yield driver
    wipe(driver)


def policy(tmp_path_factory: pytest.TempPathFactory, hidden: set[str]) -> Path:
    fields = sorted(DECLARED_FIELDS["Dossier"] - hidden)
    return demo_roles_with(tmp_path_factory, "writer", {"Dossier": [{"domains": ["*"], "fields": fields}]})


def answers(otters: Driver, settings: Settings, path: Path, status: str) -> dict[str, Any]:
    otters.execute_query(STATUS, status=status)
    headers = passport(PolicyRegistry.load(path), "writer")
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        return {name: gql(client, query, headers, **variables) for name, (query, variables) in READS.items()}


def test_a_hidden_status_changes_no_search_or_relation(
    otters: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    blind = policy(tmp_path_factory, {"status"})
    active = answers(otters, settings, blind, "active")
    assert "zz-probe" in str(active["dossierSearch"]) and "zz-probe" in str(active["relatedDossiers"]), active
    assert answers(otters, settings, blind, "archived") == active


def test_where_the_status_shows_the_default_view_still_leaves_archived_out(
    otters: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    seeing = policy(tmp_path_factory, set())
    archived = answers(otters, settings, seeing, "archived")
    assert not any("'zz-probe'" in str(a) for a in archived.values()), archived
    assert "zz-probe" in str(answers(otters, settings, seeing, "active")["dossierSearch"])


def test_a_writer_that_cannot_read_the_status_may_not_route(
    otters: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = policy(tmp_path_factory, {"status"})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        body = gql(client, PACKET, passport(PolicyRegistry.load(path), "writer"), p=packet("rt-status"))
    assert codes(body) == ["FORBIDDEN_WRITE"], body
    assert "status" in body["errors"][0]["message"], body
    assert otters.execute_query("MATCH (d:Dossier) RETURN count(d) AS n").records[0]["n"] == len(FACTS)
