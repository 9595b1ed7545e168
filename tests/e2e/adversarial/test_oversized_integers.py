"""Integers no store can hold, inside JSON write payloads (red-team pass on writes, 2026-11-26).

Found against the running ``cairn serve --demo``, as the writer. GraphQL ``Int`` arguments are
32-bit and were already refused at their extremes, but a ``JSON`` argument (``ingestFactPacket``,
``ingestBlock``, ``ingestOrgMemory``) may spell any integer, and validation let through:

- a fact's ``turn_index`` of 10**30: the packet write failed inside the Neo4j driver
  (``OverflowError: Python int too large to convert to C long``), answered as
  ``INTERNAL_SERVER_ERROR``;
- a fact's ``confidence`` of 10**400: ``float()`` overflowed inside the validator, again an
  internal error instead of ``INVALID_INPUT``;
- a fact whose ``turn_id`` ends in 30 digits (``"t999…"``, a *string*): its turn index is read
  from the trailing digits, so the same internal error;
- in ``ingestBlock`` the same fact was *accepted and stored*, and every later ``gardenBlock`` of
  that block failed with an internal error: one write poisoned the block for good.

Each write rolled back (nothing half-written), but a client got a 500-class answer for its own
bad input. Fixed twice: a JSON argument holding an integer outside the signed 64-bit range is
refused as ``BAD_USER_INPUT`` naming the argument before any resolver runs
(cairn/resolvers/schema.py), and the packet and block models bound ``turn_index`` and ignore
trailing turn-id digits beyond it, so the CLI's files get the same answers
(cairn/memory/dossiers/models.py).
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver
from pydantic import ValidationError
from starlette.testclient import TestClient

from cairn.memory.dossiers.models import MAX_TURN_INDEX, FactItem, TurnInput
from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.conftest import ORG_MEMORY as ORG
from tests.e2e.adversarial.conftest import product_decision
from tests.e2e.conftest import demo_dossiers, gql, passport

PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId addedFactIds } }"
BLOCK = "mutation($p: JSON!) { ingestBlock(block: $p) { blockId facts } }"
GARDEN = "mutation($b: String!) { gardenBlock(blockId: $b) { blockId factsProcessed } }"
HUGE = 10**30
DECISION = product_decision("zz-huge-decision", rationale="Because", timestamp="2024-05-07T02:00:00Z")


def packet(**fact: Any) -> dict[str, Any]:
    return {
        "cluster_label": "Huge numbers",
        "facts": [{"text": "User keeps huge numbers", **fact}],
        "source_block_id": "blk-huge",
    }


def block(block_id: str, **fact: Any) -> dict[str, Any]:
    return {"block_id": block_id, "facts": [{"value": "User keeps a huge turn", **fact}]}


@pytest.fixture(scope="module")
def dossiers(driver: Driver) -> Driver:
    return demo_dossiers(driver)


pytestmark = pytest.mark.usefixtures("dossiers")

REFUSED = {
    "packet turn_index": (PACKET, packet(turn_index=HUGE)),
    "packet turn_index int64+1": (PACKET, packet(turn_index=2**63)),
    "packet confidence": (PACKET, packet(confidence=10**400)),
    "packet negative": (PACKET, packet(turn_index=-(2**63) - 1)),
    "block fact turn_index": (BLOCK, block("blk-huge-1", turn_index=HUGE)),
    "block turn index": (
        BLOCK,
        {"block_id": "blk-huge-2", "turns": [{"turn_index": 2**64, "user": "u", "assistant": "a"}]},
    ),
    "org memory x-extra": (ORG, {"decisions": [{**DECISION, "x-extra": {"visibility_note": HUGE}}]}),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_an_integer_beyond_64_bits_is_bad_input_and_nothing_is_written(
    case: str, client: TestClient, registry: PolicyRegistry, dossiers: Driver
) -> None:
    document, payload = REFUSED[case]
    before = graph_checksum(dossiers)
    body = gql(client, document, passport(registry, "writer"), p=payload)
    assert body["data"] is None, body
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", body
    assert error["extensions"]["argument"] in {"packet", "block", "payload"}, body
    assert "64-bit" in error["message"], body
    assert graph_checksum(dossiers) == before


def test_a_turn_id_ending_in_many_digits_is_written_without_a_turn(
    client: TestClient, registry: PolicyRegistry, dossiers: Driver
) -> None:
    body = gql(client, PACKET, passport(registry, "writer"), p=packet(turn_id="t" + "9" * 30))
    assert "errors" not in body, body
    (fact_id,) = body["data"]["ingestFactPacket"]["addedFactIds"]
    records, _, _ = dossiers.execute_query("MATCH (f:Fact {id: $id}) RETURN f.turn_index AS t", id=fact_id)
    assert records[0]["t"] is None


def test_a_block_with_such_a_turn_id_is_stored_and_gardened(
    client: TestClient, registry: PolicyRegistry
) -> None:
    writer = passport(registry, "writer")
    stored = gql(client, BLOCK, writer, p=block("blk-huge-3", turn_id="turn_" + "9" * 30))
    assert "errors" not in stored, stored
    gardened = gql(client, GARDEN, writer, b="blk-huge-3")
    assert "errors" not in gardened, gardened
    assert gardened["data"]["gardenBlock"]["factsProcessed"] == 1


def test_the_models_bound_the_turn_index_for_files_too() -> None:
    assert FactItem(text="x", turn_index=MAX_TURN_INDEX).resolved_turn_index == MAX_TURN_INDEX
    assert FactItem(text="x", turn_id=f"turn_{MAX_TURN_INDEX}").resolved_turn_index == MAX_TURN_INDEX
    assert FactItem(text="x", turn_id="turn_" + "0" * 40 + "7").resolved_turn_index == 7
    assert FactItem(text="x", turn_id=f"turn_{MAX_TURN_INDEX + 1}").resolved_turn_index is None
    for bad in (MAX_TURN_INDEX + 1, -1, HUGE):
        with pytest.raises(ValidationError):
            FactItem(text="x", turn_index=bad)
        with pytest.raises(ValidationError):
            TurnInput(turn_index=bad)
    with pytest.raises(ValidationError):
        FactItem(text="x", confidence=10**400)


def test_the_largest_64_bit_integer_still_passes(client: TestClient, registry: PolicyRegistry) -> None:
    """The guard refuses only what Neo4j cannot store: x-extra keeps 2**63 - 1 (as JSON text)."""
    payload = {"decisions": [{**DECISION, "id": "zz-int64-max", "x-extra": {"visibility_note": 2**63 - 1}}]}
    body = gql(client, ORG, passport(registry, "writer"), p=payload)
    assert body == {"data": {"ingestOrgMemory": {"decisions": 1}}}, body
