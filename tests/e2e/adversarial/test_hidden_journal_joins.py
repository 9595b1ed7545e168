"""Dossier reads join journal entries by no field the caller's rules hide (red-team pass 14).

A dossier's history continues with the entries of every dossier merged into it, found by the
merged dossier's ``merged_into``; ``relatedDossiers`` lists as linked the dossiers an entry of op
``linked`` is ABOUT. Both read those fields whatever the caller's field rules showed of them: a
role whose rules hide ``merged_into`` read, in the target's history, the entries of the dossier
merged into it (which was merged into which), and one whose rules hide an entry's ``op`` learnt
which entries it reads are links. Now each join holds only where the scope shows the field
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

# zz-source was merged into zz-target (once merged_into is set) and has one entry; zz-link is an
# entry ABOUT zz-target and zz-other, a link while its op is "linked".
CREATE = """
CREATE (t:Entity:Dossier {id: 'zz-target', status: 'active', title: 'Target', summary: ''})
CREATE (s:Entity:Dossier {id: 'zz-source', status: 'merged', title: 'Source', summary: ''})
CREATE (o:Entity:Dossier {id: 'zz-other', status: 'active', title: 'Other', summary: ''})
CREATE (j:Entity:JournalEntry {id: 'zz-source-created', op: 'created', new_value: 'Source',
        timestamp: datetime('2024-01-01T00:00:00Z'), seq: 1})
CREATE (k:Entity:JournalEntry {id: 'zz-link', op: 'linked', rationale: 'related',
        timestamp: datetime('2024-01-02T00:00:00Z'), seq: 1})
CREATE (j)-[:ABOUT]->(s), (k)-[:ABOUT]->(t), (k)-[:ABOUT]->(o)
SET t += $access, s += $access, o += $access, j += $access, k += $access
"""
MERGED_INTO = "MATCH (s:Dossier {id: 'zz-source'}) SET s.merged_into = $value"
OP = "MATCH (j:JournalEntry {id: 'zz-link'}) SET j.op = $value"
HISTORY = 'query { dossier(id: "zz-target") { history { id op } masked } }'
RELATED = 'query { relatedDossiers(id: "zz-target") }'


@pytest.fixture(scope="module")
def dossiers(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    driver.execute_query(CREATE, access=ACCESS)
    yield driver
    wipe(driver)


def read(
    dossiers: Driver, settings: Settings, tmp: pytest.TempPathFactory, hidden: tuple[str, str], probe: Any
) -> Any:
    """``probe`` (a query, a stored change and its value) asked by a writer whose rules hide
    ``hidden`` (label, field), after the change."""
    query, change, value = probe
    dossiers.execute_query(change, value=value)
    label, field = hidden
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS[label] - {field})}]
    path = demo_roles_with(tmp, "writer", {label: rule})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        body = gql(client, query, passport(PolicyRegistry.load(path), "writer"))
    assert not body.get("errors"), body
    return body["data"]


# (hidden label and field, query, change, the value that joins, one that does not, what it shows)
CASES = [
    (("Dossier", "merged_into"), HISTORY, MERGED_INTO, "zz-target", None, "zz-source-created"),
    (("JournalEntry", "op"), RELATED, OP, "linked", "created", "zz-other"),
]


@pytest.mark.parametrize(("hidden", "query", "change", "joins", "apart", "shown"), CASES)
def test_a_hidden_field_joins_nothing(
    dossiers: Driver,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    hidden: tuple[str, str],
    query: str,
    change: str,
    joins: str,
    apart: str | None,
    shown: str,
) -> None:
    seen = read(dossiers, settings, tmp_path_factory, ("Dossier", "summary"), (query, change, joins))
    assert shown in str(seen), seen  # the premise: where the field shows, the join holds
    joined = read(dossiers, settings, tmp_path_factory, hidden, (query, change, joins))
    assert read(dossiers, settings, tmp_path_factory, hidden, (query, change, apart)) == joined
    assert shown not in str(joined), joined
