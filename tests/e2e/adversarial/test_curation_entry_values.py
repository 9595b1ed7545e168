"""A dossier's archive and merge entries say nothing of a status or a merge the caller's rules hide.

Archiving journals ``op: archived`` with ``new_value: "archived"``; a merge journals ``op: merged``
with the source and target ids as its values and details, and "merged by an operator" or "n
fact(s) merged in" as rationales. A role whose rules hide a dossier's ``status`` (or
``merged_into``) read them in the dossier's history (code review of red-team pass 14, which masked
the status and the merge in search and in the history's joins but set them with plain Cypher, so
no entry was ever written). Now those entry fields are derived from the dossier's ``status`` and
``merged_into`` (``scope.DERIVED_FIELDS``) and masked where they are. So is everything the op
chose (a link's details name its two dossiers), wherever the entry's ``op`` is hidden.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.memory.dossiers.curation import archive_dossier, link_dossiers, merge_dossiers
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import demo_roles_with
from tests.e2e.adversarial.test_unwalkable_dossier_writes import ACCESS
from tests.e2e.conftest import gql, passport, wipe

CREATE = """
UNWIND ['zz-archived', 'zz-source', 'zz-target', 'zz-linked'] AS id
CREATE (d:Entity:Dossier {id: id, status: 'active', title: id, summary: ''})
SET d += $access
"""
HISTORY = """query { a: dossier(id: "zz-archived") { ...h } s: dossier(id: "zz-source") { ...h }
  t: dossier(id: "zz-target") { ...h } }
fragment h on Dossier { history { op previousValue newValue rationale details } masked }"""


@pytest.fixture(scope="module")
def curated(driver: Driver) -> Iterator[Driver]:
    wipe(driver)
    driver.execute_query(CREATE, access=ACCESS)
    archive_dossier(driver, "zz-archived")
    merge_dossiers(driver, "zz-source", "zz-target")
    link_dossiers(driver, "zz-target", "zz-linked")
    yield driver
    wipe(driver)


def histories(
    curated: Driver, settings: Settings, tmp: pytest.TempPathFactory, hidden: str, label: str = "Dossier"
) -> Any:
    """The three dossiers' histories read by a writer whose ``label`` rule hides ``hidden``."""
    rule = [{"domains": ["*"], "fields": sorted(DECLARED_FIELDS[label] - {hidden})}]
    path = demo_roles_with(tmp, "writer", {label: rule})
    with TestClient(create_app(settings.model_copy(update={"policy_file": path}))) as client:
        body = gql(client, HISTORY, passport(PolicyRegistry.load(path), "writer"))
    assert not body.get("errors"), body
    return body["data"]


def test_the_premise_the_entries_tell_status_and_merge_where_they_show(
    curated: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    seen = histories(curated, settings, tmp_path_factory, "summary")
    assert {"op": "archived", "newValue": "archived"}.items() <= seen["a"]["history"][0].items()
    merged = [e for e in seen["t"]["history"] if e["op"] == "merged"]
    assert merged and merged[0]["previousValue"] == "zz-source", seen
    linked = [e for e in seen["t"]["history"] if e["op"] == "linked"]
    assert linked and linked[0]["details"] == {"dossiers": ["zz-linked", "zz-target"]}, seen


@pytest.mark.parametrize("hidden", ["status", "merged_into"])
def test_a_hidden_status_or_merge_is_not_in_the_history(
    curated: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory, hidden: str
) -> None:
    seen = histories(curated, settings, tmp_path_factory, hidden)
    for name in ("a", "s", "t"):
        for entry in seen[name]["history"]:
            told = str({k: v for k, v in entry.items() if k != "op" or hidden == "status"})
            assert "archived" not in told and "merged" not in told, (hidden, entry)
            other = {"s": "zz-target", "t": "zz-source"}.get(name)
            assert other is None or other not in told, (hidden, entry)


def test_an_entry_whose_op_is_hidden_holds_nothing_the_op_chose(
    curated: Driver, settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A link's details name its dossiers, a merge's values are ids: by their shape alone they
    would tell which entries are links or merges to a role whose rules hide the op."""
    seen = histories(curated, settings, tmp_path_factory, "op", "JournalEntry")
    entries = [e for name in ("a", "s", "t") for e in seen[name]["history"]]
    assert entries, seen
    for entry in entries:
        assert set(entry.values()) == {None}, entry
