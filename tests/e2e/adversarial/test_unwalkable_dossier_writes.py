"""Dossier and correspondence writes by a writer whose headers drop the edges they store
(red-team pass on writes, 2026-11-25).

Found against the running ``cairn serve --demo``: a writer narrowed by
``X-Edge-Allow: CAUSAL_PRECEDES`` routed a fact packet; the dossier and its fact were written,
joined by a HAS_FACT edge (and a journal entry ABOUT the dossier) that this caller may not walk,
so its own ``dossier(id)`` then showed the new dossier with ``facts: []``: a write where the
caller cannot read. The same held for blocks (Turn PART_OF Block), gardening, curation (the
journal's ABOUT, a merge's HAS_FACT) and correspondence replies (RESPONDS_TO). The org-memory
ingest already refused causal edges the writer could not walk (test_unwalkable_edge_writes.py);
now every dossier and correspondence write checks the edge types it stores the same way
(``cairn.policy.writes.edges_problems``) and writes nothing when one is not walkable.
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
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.test_hidden_dossier_traces import remove_packet
from tests.e2e.conftest import demo_dossiers, gql, passport

CAUSAL_ONLY = {"X-Edge-Allow": "CAUSAL_PRECEDES"}
ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["writer"],
}
PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId addedFactIds } }"
BLOCK = "mutation($b: JSON!) { ingestBlock(block: $b) { blockId } }"
GARDEN = "mutation($b: String!) { gardenBlock(blockId: $b) { blockId } }"
ARCHIVE = "mutation($d: ID!) { archiveDossier(id: $d) { op } }"
SYNC = "mutation($s: String!, $m: String!) { syncCorrespondence(source: $s, markdown: $m) { source } }"
DOSSIER = "query($d: ID!) { dossier(id: $d) { id facts { id } } }"
LETTERS = (
    "# Letters\n\n## I — Hello\n\n*2024-01-02*\n\nFirst.\n\n"
    "## II — Answer\n\n*2024-01-03*\n\nRe: I. Thanks.\n"
)


def packet(key: str, fact: str = "Sea otters hold hands while they sleep") -> dict[str, Any]:
    return {
        "packet_id": key,
        "cluster_label": "Otters",
        "facts": [fact],
        "source_block_id": "block_001",
        "access": ACCESS,
    }


BLOCK_INPUT = {
    "block_id": "block_rt_edges",
    "turns": [{"turn_index": 1, "user": "hi", "assistant": "hello"}],
    "facts": [],
    "access": ACCESS,
}


@pytest.fixture(scope="module")
def dossiers(driver: Driver) -> Driver:
    return demo_dossiers(driver)


@pytest.fixture(scope="module")
def client(dossiers: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def refused(body: Any) -> None:
    assert body.get("data") is None, body
    assert body["errors"][0]["extensions"]["code"] in {"FORBIDDEN_WRITE", "INVALID_INPUT"}, body
    assert "may not walk" in repr(body), body


@pytest.mark.parametrize(
    ("query", "variables"),
    [
        (PACKET, {"p": packet("rt-unwalkable")}),
        (BLOCK, {"b": BLOCK_INPUT}),
        (GARDEN, {"b": "block_001"}),
        (ARCHIVE, {"d": "dos-demo-team-1"}),
        (SYNC, {"s": "rt-unwalkable-letters", "m": LETTERS}),
    ],
    ids=["packet", "block", "garden", "archive", "correspondence"],
)
def test_a_write_storing_edges_the_writer_cannot_walk_is_refused_whole(
    query: str, variables: dict[str, Any], dossiers: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    before = graph_checksum(dossiers)
    refused(gql(client, query, passport(registry, "writer", **CAUSAL_ONLY), **variables))
    assert graph_checksum(dossiers) == before


def test_a_writer_that_may_walk_them_writes_and_reads_its_facts_back(
    dossiers: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    headers = passport(registry, "writer", **{"X-Edge-Allow": "HAS_FACT,FROM_BLOCK,ABOUT"})
    try:
        body = gql(client, PACKET, headers, p=packet("rt-walkable", "Lighthouse lamps are serviced in March"))
        assert body.get("errors") is None, body
        fact = body["data"]["ingestFactPacket"]["addedFactIds"][0]
        read = gql(client, DOSSIER, headers, d=body["data"]["ingestFactPacket"]["dossierId"])
        assert [f["id"] for f in read["data"]["dossier"]["facts"]] == [fact]
    finally:
        remove_packet(dossiers, "rt-walkable")
