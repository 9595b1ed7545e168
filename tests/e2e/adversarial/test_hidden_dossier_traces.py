"""Dossier writes and fact search, attacked from outside (red-team pass, 2026-11-25).

Both leaks were found against the running ``cairn serve --demo``; the fix of each lies in the
dossier code (cairn/graph/dossiers.py, cairn/memory/dossiers/):

- A writer narrowed by its headers (ceiling low, namespace internal) routes a fact packet whose
  ``source_block_id`` names a block it may not read (``block_005``, confidential). The packet
  write (``WRITE_ROUTES``) looked the block up by ``block_id`` without the writer's ACL and drew
  ``FROM_BLOCK`` from the new fact to the hidden block: a write attached to a node the writer
  cannot read. The writer's own ask on its new fact then counts one withheld neighbour
  (``acl:namespace_mismatch``) where a packet naming a block that never existed counts none, so
  the edge was also an oracle for hidden block ids and their namespaces. Fixed: the block is
  matched under the writer's ACL.
- ``memorySearch`` fused the full-text list by Lucene's BM25 score, whose IDF and average
  document length are computed over the whole index, hidden facts included. A staff caller's
  scores moved when facts it may not read were added (1.036295 -> 1.039357 for the demo's
  "plant-based diet benefits"), so scores revealed hidden facts and the words they hold.
  Fixed: Lucene only finds, per query word, the facts that hold it; the full-text list is
  scored by BM25 computed in ``FACT_FULLTEXT`` from the caller's visible facts alone (their
  count, mean length and per-word document frequency), so a caller's answer is the one it
  would get from a store in which the hidden facts never existed (docs/design.md §Dossiers).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.memory.dossiers.governor import process_fact_packet
from cairn.policy.profiles import PolicyRegistry
from tests.e2e.adversarial.conftest import NARROW
from tests.e2e.conftest import demo_dossiers, gql, passport

HIDDEN_BLOCK = "block_005"  # the demo's confidential block: director, exec and writer only
NEVER_BLOCK = "block_never_stored_099"
PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId addedFactIds } }"
ASK = "query($id: ID!) { ask(anchorId: $id) { envelope { permissionsNote } meta } }"
SEARCH = "query($q: String!) { memorySearch(query: $q, k: 10) { count hits { factId score matched } } }"


@pytest.fixture(scope="module")
def dossiers(driver: Driver) -> Driver:
    return demo_dossiers(driver)


pytestmark = pytest.mark.usefixtures("dossiers")


def remove_packet(driver: Driver, key: str) -> None:
    """Delete what one packet wrote: its dossier, facts and journal entries."""
    driver.execute_query(
        "MATCH (n:Entity) WHERE n.id IN [$d] OR n.id STARTS WITH $f OR n.id STARTS WITH $j DETACH DELETE n",
        d=f"dos-{key}",
        f=f"fact-{key}-",
        j=f"je-{key}-",
    )


def field_note(key: str, block: str, fact: str) -> dict[str, Any]:
    """A one-fact packet readable by staff and the writer, citing ``block``."""
    return {
        "packet_id": key,
        "cluster_label": "Field notes",
        "facts": [fact],
        "source_block_id": block,
        "access": {
            "domain": "acme/assistant",
            "sensitivity": "low",
            "namespaces": ["internal"],
            "roles_allowed": ["staff", "writer"],
        },
    }


def route_as_narrow_writer(
    client: TestClient, registry: PolicyRegistry, key: str, block: str, fact: str
) -> str:
    body = gql(client, PACKET, passport(registry, "writer", **NARROW), p=field_note(key, block, fact))
    assert body.get("errors") is None, body
    added: str = body["data"]["ingestFactPacket"]["addedFactIds"][0]
    return added


def policy_trace(client: TestClient, registry: PolicyRegistry, fact: str) -> Any:
    body = gql(client, ASK, passport(registry, "writer", **NARROW), id=fact)
    assert body.get("errors") is None, body
    return body["data"]["ask"]["meta"]["policy_trace"], body["data"]["ask"]["envelope"]["permissionsNote"]


def test_a_fact_packet_does_not_attach_to_a_hidden_block(
    dossiers: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    try:
        hidden_fact = route_as_narrow_writer(
            client, registry, "rt-hidden-block", HIDDEN_BLOCK, "Zebras migrate north after the long rains"
        )
        never_fact = route_as_narrow_writer(
            client, registry, "rt-never-block", NEVER_BLOCK, "The lighthouse lamp is serviced every March"
        )
        edges, _, _ = dossiers.execute_query(
            "MATCH (f:Fact {id: $id})-[r:FROM_BLOCK]->(b:Block) RETURN b.block_id AS b", id=hidden_fact
        )
        # To this writer the confidential block is not there: a packet naming it writes exactly
        # what a packet naming a block that never existed writes, and its ask says the same.
        assert [r["b"] for r in edges] == []
        assert policy_trace(client, registry, hidden_fact) == policy_trace(client, registry, never_fact)
    finally:
        remove_packet(dossiers, "rt-hidden-block")
        remove_packet(dossiers, "rt-never-block")


def search_as(client: TestClient, registry: PolicyRegistry, role: str, query: str) -> Any:
    body = gql(client, SEARCH, passport(registry, role), q=query)
    assert body.get("errors") is None, body
    return body["data"]["memorySearch"]


def staff_search(client: TestClient, registry: PolicyRegistry, query: str) -> Any:
    return search_as(client, registry, "staff", query)


def test_fact_search_scores_do_not_move_when_hidden_facts_are_added(
    dossiers: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    query = "plant-based diet benefits"
    before = staff_search(client, registry, query)
    assert any("text" in h["matched"] for h in before["hits"]), "the query must reach the full-text list"
    key = "rt-hidden-diet"
    try:
        process_fact_packet(
            dossiers,
            {
                "packet_id": key,
                "cluster_label": "Board diet memo",
                "source_block_id": "rt-board",
                "facts": [
                    "The board memo on plant-based diet benefits for the canteen",
                    "Plant-based diet plans are in the confidential canteen budget",
                ],
                "access": {
                    "domain": "acme/assistant",
                    "sensitivity": "high",
                    "namespaces": ["confidential"],
                    "roles_allowed": ["director", "exec"],
                },
            },
        )
        hidden = {f"fact-{key}-000", f"fact-{key}-001"}
        for _ in range(40):  # the full-text index may take a moment to take the new facts in
            seen = {h["factId"] for h in search_as(client, registry, "director", query)["hits"]}
            if hidden <= seen:
                break
            time.sleep(0.25)
        # The hidden facts are stored and found by a caller cleared for them: the comparison
        # below is made against an index that holds them.
        assert hidden <= seen, seen
        after = staff_search(client, registry, query)
        assert json.dumps(after, sort_keys=True) == json.dumps(before, sort_keys=True)
    finally:
        remove_packet(dossiers, key)
