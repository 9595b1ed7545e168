"""A text no range index can hold (red-team pass 21).

Found against the running ``cairn serve --demo``: Neo4j refuses a range-index key over about
8 KB, and several writer-controlled texts are stored in indexed properties with no bound on their
length. The writer sent a decision, a transition's or an alias's domain, a fact packet's
``source_block_id`` or access domain, a block's access domain, or a letter whose author (or
access line's domain) was 9,000 characters long: each answered ``INTERNAL_SERVER_ERROR``, the
server refusing the statement mid-write.

Fixed where each is read (``MAX_INDEXED_CHARS`` in cairn/schema/nodes.py, 200 characters): the
write is refused naming the field, nothing is written; 200 characters are still taken.
"""

from __future__ import annotations

from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from cairn.schema.nodes import MAX_INDEXED_CHARS
from tests.e2e.adversarial.conftest import ORG_MEMORY as ORG
from tests.e2e.adversarial.conftest import product_decision
from tests.e2e.conftest import gql, passport, wipe

PACKET = "mutation($p: JSON!) { ingestFactPacket(packet: $p) { dossierId } }"
BLOCK = "mutation($p: JSON!) { ingestBlock(block: $p) { blockId } }"
SYNC = (
    "mutation($s: String!, $p: String!) { syncCorrespondence(source: $s, markdown: $p) { created { id } } }"
)
TOO_LONG = "x" * 9_000
DOMAIN = "acme/" + TOO_LONG
ACCESS = {"sensitivity": "low", "namespaces": ["internal"], "roles_allowed": ["writer"]}


def letter(author: str, domain: str = "acme/correspondence") -> str:
    access = f"*Access: domain={domain}; sensitivity=low; namespaces=internal; roles=writer*"
    return f"# Letters\n\n{access}\n\n---\n\n## I — A title\n\n*{author} · 2026-01-05*\n\nA body.\n"


def writes(long: str, domain: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each write with one indexed text set to ``long`` (or ``domain``, a domain that long)."""
    first, second = product_decision("zz-key-1"), product_decision("zz-key-2")
    return {
        "decision domain": (ORG, {"p": {"decisions": [product_decision("zz-key-0", domain=domain)]}}),
        "transition domain": (
            ORG,
            {
                "p": {
                    "decisions": [first, second],
                    "transitions": [{"id": "t-keys", "from": "zz-key-1", "to": "zz-key-2", "domain": domain}],
                }
            },
        ),
        "packet source_block_id": (
            PACKET,
            {"p": {"cluster_label": "Keys", "facts": ["User keeps long keys"], "source_block_id": long}},
        ),
        "packet domain": (
            PACKET,
            {
                "p": {
                    "cluster_label": "Keys",
                    "facts": ["User keeps long keys"],
                    "source_block_id": "blk-keys",
                    "access": {"domain": domain, **ACCESS},
                }
            },
        ),
        "block domain": (
            BLOCK,
            {
                "p": {
                    "block_id": "blk-keys",
                    "facts": ["User keeps long keys"],
                    "access": {"domain": domain, **ACCESS},
                }
            },
        ),
        "letter author": (SYNC, {"s": "keys", "p": letter(long)}),
        "letter domain": (SYNC, {"s": "keys", "p": letter("Dana Okafor", domain)}),
    }


@pytest.fixture(scope="module")
def empty(driver: Driver) -> Driver:
    wipe(driver)
    return driver


@pytest.mark.parametrize("kind", sorted(writes("", "")))
def test_a_text_no_index_can_hold_is_refused_naming_it_and_nothing_is_written(
    kind: str, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    document, variables = writes(TOO_LONG, DOMAIN)[kind]
    before = graph_checksum(empty)
    body = gql(client, document, passport(registry, "writer"), **variables)
    assert body["data"] is None, body
    (error,) = body["errors"]
    assert error["extensions"]["code"] != "INTERNAL_SERVER_ERROR", body
    assert str(MAX_INDEXED_CHARS) in error["message"] or "at most" in error["message"], body
    assert graph_checksum(empty) == before


@pytest.mark.parametrize("kind", sorted(writes("", "")))
def test_the_longest_text_an_index_takes_is_written(
    kind: str, client: TestClient, registry: PolicyRegistry, empty: Driver
) -> None:
    longest = "y" * MAX_INDEXED_CHARS
    document, variables = writes(longest, "acme/" + longest[5:])[kind]
    body = gql(client, document, passport(registry, "writer"), **variables)
    assert "errors" not in body, body
