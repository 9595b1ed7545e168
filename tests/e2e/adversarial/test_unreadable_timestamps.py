"""A stored date-time no read can give back (red-team pass on writes, 2026-11-26).

Found against the running ``cairn serve --demo``: the writer upserts a decision (or a transition,
a block, a fact packet) dated ``0001-01-01T00:00:00+14:00``. It is a valid ISO-8601 date-time
with an offset, and Neo4j stores it, but its UTC instant is 0000-12-31, before Python's year 1;
the driver hands it back as a broken value. From then on ``node(id:)`` on that decision answered
a bare ``500 Internal Server Error`` in plain text (the JSON encoder met the broken value), for
every role that may see it, staff to exec; gardening a block dated so failed with
``INTERNAL_SERVER_ERROR`` every time. One write poisoned every later read of the node.
(GraphQL ``DateTime`` arguments were already refused at these extremes; JSON payloads were not.)

Red-team pass 21: ISO-8601 and Python read any offset under a day, Neo4j only -18:00..+18:00.
``whatChanged(since: "2024-01-01T00:00:00-23:59")`` (and ``factor(asOf:)``, ``journal(since:)``,
``question(now:)``, a decision, transition, packet or block dated so) answered
``INTERNAL_SERVER_ERROR``: the server refused the parameter and closed the Bolt connection.
Now refused where every date-time is checked (cairn/schema/timestamps.py): a write as
``INVALID_INPUT`` naming the field, an argument as ``BAD_USER_INPUT`` naming it; +-18:00 itself
is written and read back.

Fixed at the write: every date-time a payload or fixture carries must lie in years 1..9999 in
UTC (cairn/schema/timestamps.py, used by the org-memory, factor, packet and block models), or
the write is refused as ``INVALID_INPUT`` naming the field, with nothing written.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.conftest import product_decision
from tests.e2e.conftest import gql, passport, wipe

ORG = "mutation($p: JSON!) { ingestOrgMemory(payload: $p) { decisions causalEdges } }"
PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId } }"
BLOCK = "mutation($p: JSON!) { ingestBlock(block: $p) { blockId } }"
NODE = "query($id: ID!) { node(id: $id) { id fields } }"
UNREADABLE = ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"]
UNSTORABLE_OFFSETS = ["2024-01-01T00:00:00-23:59", "2024-01-01T00:00:00+18:01"]
EDGES_OF_TIME = [
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00-10:00",
    "2024-01-01T00:00:00+18:00",
    "2024-01-01T00:00:00-18:00",
]
# Every DateTime argument, each given $t.
MOMENT_ARGUMENTS = {
    "since": "query($t: DateTime!) { whatChanged(since: $t) { entries } }",
    "until": 'query($t: DateTime!) { whatChanged(since: "2024-01-01T00:00:00Z", until: $t) { entries } }',
    "asOf": 'query($t: DateTime!) { factor(id: "zz-none", asOf: $t) { id } }',
    "journal-since": 'query($t: DateTime!) { journal(factorId: "zz-none", since: $t) { id } }',
    "now": 'query($t: DateTime!) { question(text: "What changed since last week?", now: $t) { answer } }',
}
ROLES = ["staff", "manager", "director", "exec", "writer"]


def decision(id_: str, timestamp: str) -> dict[str, Any]:
    return product_decision(id_, timestamp=timestamp, roles_allowed=ROLES)


def writes(timestamp: str) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        "decision": (ORG, {"decisions": [decision("zz-when-1", timestamp)]}),
        "transition": (
            ORG,
            {
                "decisions": [
                    decision("zz-when-2", "2024-01-01T00:00:00Z"),
                    decision("zz-when-3", "2024-02-01T00:00:00Z"),
                ],
                "transitions": [
                    {"from": "zz-when-2", "to": "zz-when-3", "domain": "acme/product", "timestamp": timestamp}
                ],
            },
        ),
        "packet": (
            PACKET,
            {
                "cluster_label": "Calendar",
                "facts": ["User keeps odd dates"],
                "source_block_id": "blk-when",
                "timestamp": timestamp,
            },
        ),
        "block": (BLOCK, {"block_id": "blk-when", "timestamp": timestamp, "facts": ["User keeps odd dates"]}),
    }


@pytest.fixture(scope="module")
def empty(driver: Driver) -> Driver:
    wipe(driver)
    return driver


pytestmark = pytest.mark.usefixtures("empty")


@pytest.mark.parametrize("kind", ["decision", "transition", "packet", "block"])
@pytest.mark.parametrize("timestamp", UNREADABLE + UNSTORABLE_OFFSETS)
def test_a_date_time_no_read_could_return_is_refused_and_nothing_is_written(
    kind: str, timestamp: str, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    document, payload = writes(timestamp)[kind]
    before = graph_checksum(empty)
    body = gql(client, document, passport(registry, "writer"), p=payload)
    assert body["data"] is None, body
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "INVALID_INPUT", body
    why = "outside the years 1 to 9999 in UTC" if timestamp in UNREADABLE else "beyond -18:00..+18:00"
    assert why in error["message"], body
    assert graph_checksum(empty) == before


@pytest.mark.parametrize("argument", sorted(MOMENT_ARGUMENTS))
@pytest.mark.parametrize("timestamp", UNSTORABLE_OFFSETS)
def test_a_moment_argument_the_graph_cannot_take_is_bad_user_input(
    argument: str, timestamp: str, client: TestClient, registry: PolicyRegistry
) -> None:
    body = gql(client, MOMENT_ARGUMENTS[argument], passport(registry, "staff"), t=timestamp)
    (error,) = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT", body
    assert "beyond -18:00..+18:00" in error["message"], body


@pytest.mark.parametrize("timestamp", EDGES_OF_TIME)
def test_the_first_and_last_moments_are_written_and_read_by_every_role(
    timestamp: str, client: TestClient, registry: PolicyRegistry
) -> None:
    id_ = f"zz-edge-{EDGES_OF_TIME.index(timestamp)}"
    body = gql(client, ORG, passport(registry, "writer"), p={"decisions": [decision(id_, timestamp)]})
    assert body == {"data": {"ingestOrgMemory": {"decisions": 1, "causalEdges": 0}}}, body
    for role in ROLES:
        resp = client.post(
            "/graphql", json={"query": NODE, "variables": {"id": id_}}, headers=passport(registry, role)
        )
        assert resp.status_code == 200, resp.text
        assert resp.json()["data"]["node"]["id"] == id_, resp.text
