"""Idempotency keys that collide with another caller's packet (red-team pass on writes, 2026-11-25).

Found against the running ``cairn serve --demo``: a writer narrowed by its headers (ceiling
low, namespace internal) sent a fact packet under ``packet_id: "demo-falcon-1"``, the key of
the demo's confidential packet. The governor recognised the key as applied and answered
``action: already_applied`` with ``dossierId: dos-de461af18f07b4969149``: the id of a dossier
the caller cannot read, and proof that a packet under that key exists. The same worked with a
content-hashed key (a packet without ``packet_id``) equal to a hidden packet's. Fixed in
``cairn.memory.dossiers.governor._apply_one``: under the routing lock, a key whose packet,
dossier or facts the writer cannot read is refused as taken, in the words used for every hidden
id (``cairn.policy.writes.TAKEN_ID``), and nothing is written or named.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.memory.dossiers import governor
from cairn.memory.dossiers.governor import process_fact_packet
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.writes import TAKEN_ID
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.conftest import NARROW
from tests.e2e.adversarial.test_hidden_dossier_traces import remove_packet
from tests.e2e.conftest import gql, passport, wipe

PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId action packetKey addedFactIds } }"
HIDDEN_KEY = "rt-idem-hidden"
SECRET = "Project Falcon's budget is 4 million euros"
HIDDEN_ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "high",
    "namespaces": ["confidential"],
    "roles_allowed": ["director", "exec", "writer"],
}
OWN_ACCESS = {
    "domain": "acme/assistant",
    "sensitivity": "low",
    "namespaces": ["internal"],
    "roles_allowed": ["staff", "writer"],
}


def packet(key: str | None, access: dict[str, Any], fact: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "cluster_label": "Falcon notes",
        "facts": [fact],
        "source_block_id": "block_rt_idem",
        "access": access,
    }
    if key is not None:
        body["packet_id"] = key
    return body


@pytest.fixture(scope="module")
def hidden(driver: Driver) -> Iterator[Driver]:
    """A confidential packet the narrowed writer cannot read, written by the operator."""
    wipe(driver)
    process_fact_packet(driver, packet(HIDDEN_KEY, HIDDEN_ACCESS, SECRET))
    yield driver
    remove_packet(driver, HIDDEN_KEY)


pytestmark = pytest.mark.usefixtures("hidden")


def send(client: TestClient, registry: PolicyRegistry, body: dict[str, Any], **over: str) -> Any:
    return gql(client, PACKET, passport(registry, "writer", **over), p=body)


def test_a_hidden_packets_key_is_taken_and_names_nothing(
    hidden: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    before = graph_checksum(hidden)
    body = send(client, registry, packet(HIDDEN_KEY, OWN_ACCESS, "Falcon is a bird"), **NARROW)
    assert body.get("data") is None, body
    error = body["errors"][0]
    assert error["extensions"]["code"] == "INVALID_INPUT", error
    assert TAKEN_ID in error["message"]
    text = repr(body)
    assert "dos-" not in text and "already_applied" not in text and "4 million" not in text
    assert graph_checksum(hidden) == before


@pytest.mark.parametrize("remembered", ["the database's", "none", "another database's"])
def test_a_hashed_key_equal_to_a_hidden_packets_is_taken_too(
    hidden: Driver, client: TestClient, registry: PolicyRegistry, remembered: str
) -> None:
    # The attacker resends a packet without packet_id: its key is the hash of its content, keyed
    # with the database's secret; the service derives it first from the secret it remembers
    # (governor._claim), which a new process lacks and a restored database does not match: the
    # ids are then checked again with the real one.
    same = packet(None, OWN_ACCESS, "A hashed packet the operator wrote")
    applied = process_fact_packet(hidden, same)
    if remembered != "the database's":
        governor._secret_seen[:] = [] if remembered == "none" else ["0" * 64]
    hidden.execute_query(  # ...and then make that packet's records hidden from the attacker
        "MATCH (n:Entity) WHERE n.id IN [$d, $f, $j] SET n.namespaces = ['confidential']",
        d=applied.dossier_id,
        f=applied.added[0],
        j=f"je-{applied.packet_key}-0",
    )
    try:
        before = graph_checksum(hidden)
        body = send(client, registry, same, **NARROW)
        assert body.get("data") is None, body
        assert TAKEN_ID in body["errors"][0]["message"]
        assert applied.dossier_id not in repr(body)
        assert graph_checksum(hidden) == before
    finally:
        remove_packet(hidden, applied.packet_key)


def test_a_writer_who_reads_the_packet_still_gets_already_applied(
    hidden: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    body = send(client, registry, packet(HIDDEN_KEY, HIDDEN_ACCESS, SECRET))
    assert body.get("errors") is None, body
    assert body["data"]["ingestFactPacket"]["action"] == "already_applied"
    assert body["data"]["ingestFactPacket"]["dossierId"] == f"dos-{HIDDEN_KEY}"


def test_a_fresh_key_is_written_as_before(
    hidden: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    fresh = packet("rt-idem-fresh", OWN_ACCESS, "Falcons nest on cliffs")
    try:
        body = send(client, registry, fresh, **NARROW)
        assert body.get("errors") is None, body
        assert body["data"]["ingestFactPacket"]["action"] == "created"
        again = send(client, registry, fresh, **NARROW)
        assert again["data"]["ingestFactPacket"]["action"] == "already_applied"
    finally:
        remove_packet(hidden, "rt-idem-fresh")
