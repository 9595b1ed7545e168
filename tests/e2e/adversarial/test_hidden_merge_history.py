"""A dossier's history takes in a merged dossier's entries only where ``merged_into`` shows.

Found in red-team pass 14: a dossier's history continues with the entries of every dossier merged
into it, found by the merged dossier's ``merged_into``, whatever the caller's field rules showed
of that field: a role whose rules hide it read, in the target's history, the entries of the
dossier merged into it, so which dossier was merged into which. Now the merged dossier's entries
join the target's history only where the scope shows its ``merged_into``
(``cairn.policy.acl.field_shown``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_unwalkable_dossier_writes import ACCESS
from tests.e2e.conftest import gql, passport, wipe

CREATE = """
CREATE (t:Entity:Dossier {id: 'zz-target', status: 'active', title: 'Target', summary: ''})
CREATE (s:Entity:Dossier {id: 'zz-source', status: 'merged', title: 'Source', summary: ''})
CREATE (j:Entity:JournalEntry {id: 'zz-source-created', op: 'created', new_value: 'Source',
        timestamp: datetime('2024-01-01T00:00:00Z'), seq: 1})
CREATE (j)-[:ABOUT]->(s)
SET t += $access, s += $access, j += $access
"""
MERGED_INTO = "MATCH (s:Dossier {id: 'zz-source'}) SET s.merged_into = $into"
HISTORY = 'query { dossier(id: "zz-target") { history { id op } masked } }'


@pytest.fixture(scope="module")
def dossiers(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    driver.execute_query(CREATE, access=ACCESS)
    yield driver
    wipe(driver)


def history(
    dossiers: Driver, settings: Settings, tmp: pytest.TempPathFactory, hidden: set[str], into: Any
) -> Any:
    dossiers.execute_query(MERGED_INTO, into=into)
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS["Dossier"] - hidden)}]
    path = demo_roles_with(tmp, "writer", {"Dossier": rule})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        body = gql(client, HISTORY, passport(PolicyRegistry.load(path), "writer"))
    assert not body.get("errors"), body
    return body["data"]


def test_the_premise_the_history_continues_where_merged_into_shows(
    dossiers: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    merged = history(dossiers, settings, tmp_path_factory, set(), "zz-target")
    assert "zz-source-created" in str(merged), merged


def test_a_hidden_merged_into_adds_no_entry(
    dossiers: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    merged = history(dossiers, settings, tmp_path_factory, {"merged_into"}, "zz-target")
    assert history(dossiers, settings, tmp_path_factory, {"merged_into"}, None) == merged
    assert "zz-source-created" not in str(merged), merged
