"""Routing votes crowded out by facts of another access (red-team pass, 2026-11-26).

A fact packet joins the dossier its facts vote for, among dossiers with exactly its access
fields (docs/design.md §Routing). The vote took each packet fact's ten nearest stored facts
from the vector index first, of any access, and only then kept those in dossiers of the
packet's access. Ten confidential near-duplicates of a text therefore used up every slot: a
writer narrowed to low sensitivity, writing the same two packets as in an empty store, saw its
second packet answered ``created`` ("no stored fact within cosine 0.4") instead of
``appended`` to its own first dossier. So whether hidden facts like its text exist reached it
through the outcome, and the dossiers every reader sees were shaped by facts they may not
read. The vote now ranks only facts of the packet's access (an exact scan when the index's
answer is crowded by others), in ``cairn.graph.dossiers.VOTE_FOR_DOSSIERS`` and for facts
written earlier in the same transaction (``governor._Pending``; the bulk ingest's second test
failed before that part of the fix).
"""

from __future__ import annotations

from typing import Any

from neo4j import Driver
from starlette.testclient import TestClient

from cairn.memory.dossiers.governor import ingest_packets, process_fact_packet
from cairn.memory.dossiers.models import FactPacket
from cairn.policy.profiles import PolicyRegistry
from tests.e2e.adversarial.conftest import NARROW
from tests.e2e.conftest import gql, passport, wipe

PACKET = (
    "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId action packetKey addedFactIds"
    " skipped decision candidates } }"
)
OWN_ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff", "writer"],
}
HIDDEN_ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec", "writer"],
}
FIRST = "Our team offsite this year is in Lisbon"
SECOND = "The spring team offsite will take place in Lisbon"
# More alike to SECOND than FIRST is, and more than the vote's ten slots per fact.
HIDDEN = [f"The spring team offsite will take place in Lisbon, group {n}" for n in range(12)]


def packet(key: str, access: dict[str, Any], fact: str) -> dict[str, Any]:
    return {
        "packet_id": key,
        "cluster_label": "Team offsite",
        "facts": [fact],
        "source_block_id": f"block_{key}",
        "timestamp": "2026-01-10T09:00:00Z",
        "access": access,
    }


def write_both(client: TestClient, registry: PolicyRegistry) -> list[Any]:
    """The narrowed writer's two packets, as it sees their outcomes."""
    headers = passport(registry, "writer", **NARROW)
    return [
        gql(client, PACKET, headers, p=packet(key, OWN_ACCESS, fact))
        for key, fact in (("rt-vote-first", FIRST), ("rt-vote-second", SECOND))
    ]


def test_hidden_near_duplicates_do_not_change_where_a_packet_goes(
    driver: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    wipe(driver)
    alone = write_both(client, registry)
    first, second = (body["data"]["ingestFactPacket"] for body in alone)
    assert second["action"] == "appended" and second["dossierId"] == first["dossierId"], alone

    wipe(driver)
    for n, text in enumerate(HIDDEN):  # written by the operator, in dossiers the writer cannot read
        process_fact_packet(driver, packet(f"rt-vote-hidden-{n}", HIDDEN_ACCESS, text))
    beside_hidden = write_both(client, registry)
    wipe(driver)
    assert beside_hidden == alone


def test_hidden_near_duplicates_in_the_same_transaction_do_not_either(driver: Driver) -> None:
    """A bulk ingest routes a transaction's later packets against its earlier ones from memory
    (the index sees them only at commit): the same cut applied there."""
    first = packet("rt-vote-first", OWN_ACCESS, FIRST)
    second = packet("rt-vote-second", OWN_ACCESS, SECOND)
    hidden = [packet(f"rt-vote-hidden-{n}", HIDDEN_ACCESS, text) for n, text in enumerate(HIDDEN)]
    outcomes = []
    for batch in ([first, second], [first, *hidden, second]):  # one transaction each (few facts)
        wipe(driver)
        results = ingest_packets(driver, [FactPacket.model_validate(p) for p in batch])
        outcomes.append((results[-1].action, results[-1].dossier_id))
    wipe(driver)
    assert outcomes[0] == ("appended", "dos-rt-vote-first")
    assert outcomes[1] == outcomes[0]
