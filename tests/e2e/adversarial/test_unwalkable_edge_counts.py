"""The ask meta counted neighbours over edge types the role may walk nowhere (red-team pass 16).

The demo's ``external`` walks no edge (``edges: []``) and its rule hides a letter's
``responds_to_filed``: it may not learn whether a letter answers, or is answered by, another.
Yet every ask it made on a letter withheld one neighbour per reply edge (``edge:not_allowed``), so
``policy_trace.counts`` gave the letter's reply degree (for all 39 demo letters it reads). An edge
type outside a role's allowlist is now outside its walk: not met, not counted, not numbered
(cairn/policy/walk.py; README "Threat model: reads", disclosed by design (1)). A type the role
walks in some direction or domain still withholds with ``edge:not_allowed`` where its rule does not
reach.

The property: external's asks on a letter answered three times and on a letter never answered
carry the same policy trace and the same permissions note.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.org_memory import ingest_payload
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.embedder import Embedder
from tests.e2e.adversarial.conftest import data_as, synced_letters
from tests.e2e.conftest import gql, passport, wipe

ACCESS = "domain=acme/correspondence; sensitivity=low; namespaces=public; roles=external,exec"
ASK = """query($i: ID!) { ask(anchorId: $i) { envelope { permissionsNote } meta } }"""


def letters_file() -> str:
    sections = [
        "## I — An opening letter\n\n*Dana Okafor · 2026-03-01*\n\nWe should end the on-prem tail.\n",
        *(
            f"## {n} — A reply\n\n*Priya Raman · 2026-03-0{n}*\n\nRe: § I. We agree, reply {n}.\n"
            for n in ("II", "III", "IV")
        ),
        "## V — A letter no one answered\n\n*Jonas Berg · 2026-03-09*\n\nThe offsite moves to Porto.\n",
    ]
    return f"# Letters\n\n*Access: {ACCESS}*\n\n---\n\n" + "\n---\n\n".join(sections)


@pytest.fixture(scope="module")
def letters(driver: Driver, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Driver]:
    with synced_letters(driver, embedder, tmp_path_factory, letters_file(), "rt-reply-letters") as synced:
        yield synced


def section_id(driver: Driver, number: int) -> str:
    records, _, _ = driver.execute_query("MATCH (s:Section {section_number: $n}) RETURN s.id AS id", n=number)
    assert len(records) == 1, records
    return str(records[0]["id"])


def test_replies_leave_no_count(letters: Driver, client: TestClient, registry: PolicyRegistry) -> None:
    answered, alone = section_id(letters, 1), section_id(letters, 5)
    replies, _, _ = letters.execute_query(
        "MATCH (:Section {id: $i})-[r]-(:Section) RETURN count(r) AS n", i=answered
    )
    assert replies[0]["n"] == 3  # the graph holds what the property is about
    traces: list[Any] = []
    for anchor in (answered, alone):
        ask = data_as(client, registry, "external", ASK, i=anchor)["ask"]
        traces.append((ask["envelope"]["permissionsNote"], ask["meta"]["policy_trace"]))
    assert traces[0] == traces[1]
    assert traces[0][1]["counts"]["hidden_vertices"] == 0, traces[0]


def node(kind: str, rid: str, domain: str) -> dict[str, Any]:
    fields = {"id": rid, "timestamp": "2024-05-01T00:00:00Z", "domain": domain, "importance": 0.5}
    access = {"sensitivity": "low", "namespaces": ["internal"], "roles_allowed": ["staff", "exec"]}
    if kind == "decision":
        return {**fields, **access, "option": "Option", "rationale": "Because", "decision_maker": "Operator"}
    extra = {"x-extra": {"alias_of_decision": "rt-dec"}}
    return {**fields, **access, **extra, "summary": "The regional projection"}


def test_a_type_walked_one_way_is_still_met_the_other_way(
    driver: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    """Review pass 16: staff walks ALIAS_OF out only (decision -> alias event). From the event, the
    edge to its decision is of a type staff walks, so it is still met and withheld as
    ``edge:not_allowed``; only a type the role walks nowhere is left unmet."""
    wipe(driver)
    alias = {"id": "rt-alias", "type": "alias_event", "decision_id": "rt-dec", "event_id": "rt-ev"}
    ingest_payload(
        driver,
        {
            "decisions": [node("decision", "rt-dec", "acme/product")],
            "events": [node("event", "rt-ev", "acme/region_eu")],
            "aliases": [
                {**alias, "scope": "projection", "domain_from": "acme/product", "domain_to": "acme/region_eu"}
            ],
        },
    )
    metas = {}
    for anchor in ("rt-dec", "rt-ev"):
        body = gql(client, ASK, passport(registry, "staff"), i=anchor)
        assert "errors" not in body, body
        metas[anchor] = body["data"]["ask"]["meta"]["policy_trace"]
    assert metas["rt-dec"]["counts"]["hidden_vertices"] == 0, metas["rt-dec"]
    assert list(metas["rt-ev"]["reasons_by_id"].values()) == ["edge:not_allowed"], metas["rt-ev"]
    wipe(driver)
