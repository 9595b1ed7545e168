"""Factor journal writes by a writer whose headers drop the journal's edges (red-team pass on
writes, 2026-11-25).

Found against the running ``cairn serve --demo``: a writer narrowed by ``X-Edge-Allow: HAS_FACT``
called ``updateFactor`` on ``data_quality``. The entry was written and committed — with its
ABOUT, CURRENT_STATE, PART_OF and INFLUENCED_BY edges, none of which that caller may walk, and
the factor's current value changed — and the caller got ``INTERNAL_SERVER_ERROR`` ("journal
entry vanished after commit"), because its read-back walks ABOUT. A caller wrote where it cannot
read. Fixed in ``cairn.memory.factors.journal._check_edges``: before anything is written, every
edge the entry would be stored with must be one the caller may walk (``edge_problem``, the rule
the org-memory ingest applies to causal edges), or the write is refused as INVALID_INPUT naming
the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.app import create_app
from cairn.ingest.factors import load_demo_factors
from cairn.policy.profiles import PolicyRegistry
from cairn.runtime.settings import Settings
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import gql, passport, wipe

UPDATE = """mutation($i: FactorUpdateInput!) {
  updateFactor(input: $i) { id factorId newValue influencedBy sessionId } }"""
CONFIRM = "mutation($f: ID!) { confirmFactor(factorId: $f) { id } }"
RECALCULATE = "mutation($f: ID!) { recalculateFactor(factorId: $f) { __typename } }"
FACTOR = "data_quality"
INPUT = {
    "factorId": FACTOR,
    "value": 0.55,
    "rationale": "red team",
    "confidence": 0.5,
    "influencedBy": ["data_governance"],
    "sessionId": "session_kickoff",
}
# Each drops at least one edge type a journal entry is stored with.
NARROWED = [
    {"X-Edge-Allow": "HAS_FACT"},
    {"X-Edge-Allow": "ABOUT,PART_OF,CURRENT_STATE"},  # no INFLUENCED_BY
    {"X-Edge-Allow": "ABOUT,INFLUENCED_BY,CURRENT_STATE"},  # no PART_OF
]


@pytest.fixture(scope="module")
def factors(driver: Driver) -> Driver:
    wipe(driver)
    load_demo_factors(driver)
    return driver


@pytest.fixture(scope="module")
def client(factors: Driver, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as c:
        yield c


def refused(body: Any) -> dict[str, Any]:
    assert body.get("data") is None, body
    error: dict[str, Any] = body["errors"][0]
    assert error["extensions"]["code"] == "INVALID_INPUT", error
    return error


@pytest.mark.parametrize("narrowing", NARROWED, ids=lambda h: h["X-Edge-Allow"])
def test_a_writer_that_cannot_walk_the_journal_edges_writes_nothing(
    narrowing: dict[str, str], factors: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    before = graph_checksum(factors)
    headers = passport(registry, "writer", **narrowing)
    error = refused(gql(client, UPDATE, headers, i=INPUT))
    assert "may not walk" in error["message"]
    if "ABOUT" not in narrowing["X-Edge-Allow"]:
        refused(gql(client, CONFIRM, headers, f=FACTOR))
        gql(client, RECALCULATE, headers, f=FACTOR)  # refused, or nothing to write: the checksum says
    assert graph_checksum(factors) == before


def test_a_writer_that_may_walk_them_still_writes(
    factors: Driver, client: TestClient, registry: PolicyRegistry
) -> None:
    allowed = {"X-Edge-Allow": "ABOUT,PART_OF,CURRENT_STATE,INFLUENCED_BY"}
    body = gql(client, UPDATE, passport(registry, "writer", **allowed), i=INPUT)
    assert body.get("errors") is None, body
    assert body["data"]["updateFactor"]["influencedBy"] == ["data_governance"]
