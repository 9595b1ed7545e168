"""A node must not name, or hang off, a node some of its readers cannot see (red-team pass,
2026-11-26).

Found against the running ``cairn serve --demo``, as the writer (whose scope reads everything):

- ``confirmFactor(factorId: "ai_budget", sessionId: "rt-s")`` creates the session with the
  factor's access (manager and up); ``confirmFactor(factorId: "data_quality", sessionId: "rt-s")``
  then filed a staff-readable entry under it. Staff's ``journal``, ``whyValue`` and ``node`` of
  that entry showed ``sessionId: "rt-s"`` while ``node(id: "rt-s")`` answered null: an entry's
  session always exists (the write creates it), so staff learnt the id, and the existence, of a
  session it may not see.
- ``ingestFactPacket`` with staff-readable access and ``source_block_id: "block_005"`` (the demo's
  confidential block) drew ``FROM_BLOCK`` from the new fact to the hidden block: staff's ask of
  the fact then counted a withheld neighbour, where a packet naming a block never stored counts
  none, so the fact told staff that ``block_005`` exists.

Both writes linked a node to one less visible than itself. Fixed in the policy module
(``cairn.policy.acl.access_covers``, ``cairn.policy.writes.less_visible``): a journal entry joins
only a session every reader of the entry may see (else INVALID_INPUT naming ``session_id``, and
nothing is written), and a fact hangs off its source block only when every reader of the fact
may see the block; to the packet, a less visible block is one that does not exist, as a hidden
one is to a narrowed writer (test_hidden_dossier_traces.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.test_hidden_dossier_traces import (
    HIDDEN_BLOCK,
    NEVER_BLOCK,
    field_note,
    remove_packet,
)
from tests.e2e.conftest import demo_dossiers, gql, load_factors, passport

CONFIRM = "mutation($f: ID!, $s: String!) { confirmFactor(factorId: $f, sessionId: $s) { id sessionId } }"
NODE = "query($i: ID!) { node(id: $i) { id label fields masked } }"
JOURNAL = "query($f: ID!) { journal(factorId: $f, limit: 50) { id sessionId } }"
SESSION = "rt-manager-session"  # created by a confirmation of a factor staff may not see
PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId addedFactIds } }"
ASK = "query($id: ID!) { ask(anchorId: $id) { envelope { permissionsNote } meta } }"


def _data(body: dict[str, Any]) -> Any:
    assert body.get("errors") is None, body
    return body["data"]


def test_a_journal_entry_joins_no_session_its_readers_cannot_see(
    driver: Driver, client: TestClient, registry: PolicyRegistry, embedder: Any
) -> None:
    load_factors(driver, embedder)
    writer = passport(registry, "writer")
    # The session takes ai_budget's access: manager, director, exec and writer.
    _data(gql(client, CONFIRM, writer, f="ai_budget", s=SESSION))
    before = graph_checksum(driver)
    body = gql(client, CONFIRM, writer, f="data_quality", s=SESSION)
    assert body.get("data") is None, body
    error = body["errors"][0]
    assert error["extensions"] == {"code": "INVALID_INPUT", "field": "session_id"}, error
    assert graph_checksum(driver) == before
    # What staff reads names only sessions staff can read.
    staff = passport(registry, "staff")
    assert _data(gql(client, NODE, staff, i=SESSION))["node"] is None
    for entry in _data(gql(client, JOURNAL, staff, f="data_quality"))["journal"]:
        assert entry["sessionId"] != SESSION
        assert _data(gql(client, NODE, staff, i=entry["sessionId"]))["node"] is not None, entry
    # A session at least as visible as the entry is joined as before (the demo's own shape:
    # ai_budget's entries are filed under sessions staff may read).
    joined = _data(gql(client, CONFIRM, writer, f="ai_budget", s="session_checkin"))["confirmFactor"]
    assert joined["sessionId"] == "session_checkin"


# Unrelated to each other and to the demo: each packet opens a dossier of its own.
TEXTS = {
    "rt-block-hidden": "Zebras migrate north after the long rains",
    "rt-block-never": "The lighthouse lamp is serviced every March",
}
FROM_BLOCK = "MATCH (f:Fact {id: $id})-[:FROM_BLOCK]->(b:Block) RETURN b.block_id AS b"


def _staff_view(client: TestClient, registry: PolicyRegistry, key: str, fact: str, block: str) -> str:
    staff = passport(registry, "staff")
    seen = {
        "node": _data(gql(client, NODE, staff, i=fact))["node"],
        "ask": _data(gql(client, ASK, staff, id=fact))["ask"],
    }
    seen["ask"]["meta"] = {"policy_trace": seen["ask"]["meta"]["policy_trace"]}
    for volatile in ("created_at", "added_at", "observed_at", "packet_key"):
        seen["node"]["fields"].pop(volatile, None)
    text = json.dumps(seen, sort_keys=True)
    for own, placeholder in ((fact, "<fact>"), (block, "<block>"), (TEXTS[key], "<text>"), (key, "<key>")):
        text = text.replace(own, placeholder)
    return text


@pytest.mark.usefixtures("client")
def test_a_fact_hangs_off_no_block_its_readers_cannot_see(
    driver: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    demo_dossiers(driver)
    writer = passport(registry, "writer")  # reads the confidential block
    try:
        added = {}
        for key, block in (("rt-block-hidden", HIDDEN_BLOCK), ("rt-block-never", NEVER_BLOCK)):
            data = _data(gql(client, PACKET, writer, p=field_note(key, block, TEXTS[key])))
            added[key] = data["ingestFactPacket"]["addedFactIds"][0]
        edges, _, _ = driver.execute_query(FROM_BLOCK, id=added["rt-block-hidden"])
        assert [r["b"] for r in edges] == []
        # Staff reads the fact naming the confidential block exactly as the one naming a block
        # that was never stored: same fields, same walk, nothing withheld.
        hidden = _staff_view(client, registry, "rt-block-hidden", added["rt-block-hidden"], HIDDEN_BLOCK)
        never = _staff_view(client, registry, "rt-block-never", added["rt-block-never"], NEVER_BLOCK)
        assert hidden == never
    finally:
        remove_packet(driver, "rt-block-hidden")
        remove_packet(driver, "rt-block-never")
