"""What is written from a fact's ``added_at`` is masked with it (leak).

A fact's ``created_at`` is set with its ``added_at`` by the packet that adds it; a dossier's
``last_updated`` and ``created_at`` are the moments its newest and first facts were added, and its
summary lists its central facts' sentences in the order they were added (so do the journal
values quoting it), and a dossier journal entry's ``timestamp`` (and ``created_at``) is its
packet's moment, the ``added_at`` of the facts it adds. A policy hiding ``added_at`` but showing
these showed when each fact came and in what order. They are derived fields of the facts'
``added_at`` now (``scope.DERIVED_FIELDS``): masked, and named in ``masked``, wherever it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver

from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from cairn.runtime.settings import Settings
from cairn.schema.nodes import DECLARED_FIELDS
from tests.e2e.adversarial.conftest import served_with
from tests.e2e.adversarial.test_masked_text_search import FACT, MEMORY
from tests.e2e.conftest import demo_dossiers, gql, passport

DOSSIER = """query($i: ID!) { dossier(id: $i) { title summary lastUpdated masked facts { id text addedAt }
  history { id op timestamp newValue previousValue } } }"""
NODE = "query($i: ID!) { node(id: $i) { fields masked } }"
Probe = Any


@pytest.fixture(scope="module")
def probe(
    driver: Driver, settings: Settings, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Probe]:
    demo_dossiers(driver, embedder)
    fields = sorted(DECLARED_FIELDS["Fact"] - {"added_at"})
    with served_with(
        settings, tmp_path_factory, "staff", {"Fact": [{"domains": ["*"], "fields": fields}]}
    ) as p:
        yield p


def _ask(probe: tuple[Any, PolicyRegistry], role: str, query: str, **variables: Any) -> dict[str, Any]:
    client, registry = probe
    body = gql(client, query, passport(registry, role), **variables)
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


def test_nothing_written_from_a_facts_added_at_shows_where_it_is_masked(probe: Probe) -> None:
    hit = _ask(probe, "director", MEMORY, q=FACT)["memorySearch"]["hits"][0]
    dossier_id, fact_id = hit["dossierId"], hit["factId"]
    stored = _ask(probe, "director", DOSSIER, i=dossier_id)["dossier"]
    assert stored["summary"] and stored["lastUpdated"], stored
    staff = {
        "dossier": _ask(probe, "staff", DOSSIER, i=dossier_id),
        "dossierNode": _ask(probe, "staff", NODE, i=dossier_id),
        "factNode": _ask(probe, "staff", NODE, i=fact_id),
        "memorySearch": _ask(probe, "staff", MEMORY, q=FACT),
    }
    text = json.dumps(staff)
    assert stored["lastUpdated"][:19] not in text, text  # no copy of when the facts came
    dossier = staff["dossier"]["dossier"]
    assert dossier["title"] and dossier["summary"] is None, dossier  # the title reads no time
    assert {"summary", "last_updated", "created_at"} <= set(dossier["masked"]), dossier
    assert all(e["newValue"] is None and e["previousValue"] is None for e in dossier["history"]), dossier
    assert dossier["history"] and all(e["timestamp"] is None for e in dossier["history"]), dossier
    entry = _ask(probe, "staff", NODE, i=dossier["history"][-1]["id"])["node"]
    assert {"timestamp", "created_at"} <= set(entry["masked"]), entry
    assert stored["lastUpdated"][:19] not in json.dumps(entry), entry
    assert {"added_at", "created_at"} <= set(staff["factNode"]["node"]["masked"]), staff["factNode"]
    assert all(h["dossierSummary"] is None for h in staff["memorySearch"]["memorySearch"]["hits"]), text
