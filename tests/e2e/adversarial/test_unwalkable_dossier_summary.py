"""A dossier's summary for a passport that may not walk HAS_FACT (red-team pass 18).

A dossier's summary is its central facts' sentences (docs/design.md §Dossiers), read over its
HAS_FACT edges. Against ``cairn serve --demo``, staff narrowed by ``X-Edge-Allow: CAUSAL_PRECEDES``
(or ``ABOUT``) read ``dossier(id)`` with no facts, ``factCount: 0`` and an empty summary, since
the dossier read follows only the edges the scope walks; but ``node(id)``, ``neighbourhood`` and
an ``ask`` on the same dossier returned the stored summary, the text of the facts the dossier
holds, which no other read would show that passport as the dossier's. Now the summary is masked,
and named in ``masked``, wherever the scope may not walk HAS_FACT from a dossier of that domain
to its facts (``Scope.derived_hidden``), in every read alike.
"""

from __future__ import annotations

import json

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from tests.e2e.conftest import demo_dossiers, gql, passport

DOSSIER_ID = "dos-demo-fitness-1"
DOSSIER = "query($i: ID!) { dossier(id: $i) { summary masked facts { id text } } }"
NODE = "query($i: ID!) { node(id: $i) { title fields masked } }"
NEIGHBOURHOOD = "query($i: ID!) { neighbourhood(id: $i, hops: 1) { anchor { title fields masked } } }"
ASK = (
    "query($i: ID!) { ask(anchorId: $i) { envelope { text } response evidence { id title fields masked } } }"
)
NARROWED = [{"X-Edge-Allow": "CAUSAL_PRECEDES"}, {"X-Edge-Allow": "ABOUT"}]


@pytest.fixture(scope="module")
def dossiers(driver: Driver) -> Driver:
    return demo_dossiers(driver)


def data(client: TestClient, registry: PolicyRegistry, query: str, **headers: str) -> dict[str, object]:
    body = gql(client, query, passport(registry, "staff", **headers), i=DOSSIER_ID)
    assert not body.get("errors"), body
    return body["data"]


@pytest.mark.usefixtures("dossiers")
@pytest.mark.parametrize("narrowing", NARROWED, ids=lambda h: h["X-Edge-Allow"])
def test_no_read_shows_the_summary_where_has_fact_is_not_walked(
    client: TestClient, registry: PolicyRegistry, narrowing: dict[str, str]
) -> None:
    full = data(client, registry, DOSSIER)["dossier"]
    assert full["summary"] and len(full["facts"]) >= 3  # the unnarrowed staff read
    sentences = [f["text"] for f in full["facts"] if f["text"] in full["summary"]]
    assert sentences

    narrowed = data(client, registry, DOSSIER, **narrowing)["dossier"]
    assert narrowed["facts"] == []
    assert narrowed["summary"] is None and "summary" in narrowed["masked"]
    node = data(client, registry, NODE, **narrowing)["node"]
    anchor = data(client, registry, NEIGHBOURHOOD, **narrowing)["neighbourhood"]["anchor"]
    ask = data(client, registry, ASK, **narrowing)["ask"]
    evidence = next(e for e in ask["evidence"] if e["id"] == DOSSIER_ID)
    for shown in (node, anchor, evidence):
        assert "summary" not in shown["fields"] and "summary" in shown["masked"]
    told = json.dumps([node, anchor, ask["envelope"], ask["response"], evidence])
    assert not [s for s in sentences if s in told]


@pytest.mark.usefixtures("dossiers")
def test_a_scope_that_walks_has_fact_reads_the_summary(client: TestClient, registry: PolicyRegistry) -> None:
    full = data(client, registry, DOSSIER)["dossier"]
    node = data(client, registry, NODE)["node"]
    assert node["fields"]["summary"] == full["summary"] and "summary" not in node["masked"]


HISTORY = (
    "query($i: ID!) { dossier(id: $i) { history { op previousValue newValue excerpt rationale details } } }"
)
WALK = "query($i: ID!) { neighbourhood(id: $i, hops: 2) { nodes { id fields masked } } }"


@pytest.mark.usefixtures("dossiers")
@pytest.mark.parametrize("narrowing", NARROWED, ids=lambda h: h["X-Edge-Allow"])
def test_no_journal_entry_quotes_the_summary_where_has_fact_is_not_walked(
    client: TestClient, registry: PolicyRegistry, narrowing: dict[str, str]
) -> None:
    """The dossier's journal quotes its summary (a ``summary_updated`` entry's values, a split's)
    and its facts (a skipped duplicate's ``excerpt``): read over ABOUT, not HAS_FACT, it showed
    the passport that may not walk HAS_FACT the sentences the summary no longer shows (review 36)."""
    full = data(client, registry, DOSSIER)["dossier"]
    sentences = [f["text"] for f in full["facts"]]
    history = data(client, registry, HISTORY)["dossier"]["history"]
    assert any(s in json.dumps(history) for s in sentences)  # the unnarrowed read quotes them

    narrowed = data(client, registry, HISTORY, **narrowing)["dossier"]["history"]
    walk = data(client, registry, WALK, **narrowing)["neighbourhood"]["nodes"]
    told = json.dumps([narrowed, walk])
    assert not [s for s in sentences if s in told]
