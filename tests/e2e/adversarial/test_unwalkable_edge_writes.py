"""A writer may not write an edge it may not walk (red-team pass, 2026-11-25).

Writes were checked for node access (cairn/policy/writes.py) but not against the caller's edge
rules: a writer narrowed with ``X-Edge-Allow: HAS_FACT`` still stored ``CAUSAL_PRECEDES`` (and
``ALIAS_OF``) edges through ``ingestOrgMemory`` that its own ``neighbourhood`` could never show,
so it wrote where it could not read.

The rule is in the policy module: ``edge_problem(scope, type, start_domain, end_domain)`` in
cairn/policy/writes.py (a rule of that type, either direction, whose from/to domain globs match
the stored start and end nodes, as ``cairn.policy.acl.edge_allowed`` reads them), tested below.
``scope_problems`` (cairn/ingest/org_memory.py) calls it for every transition (CAUSAL_PRECEDES,
cause -> effect) and alias (ALIAS_OF, decision -> event), with the endpoints' domains from the
set itself or, for stored endpoints the writer may read, from ``stored_ids``.
"""

from __future__ import annotations

import pytest
from neo4j import Driver
from starlette.testclient import TestClient

from cairn.policy.passport import verify
from cairn.policy.profiles import PolicyRegistry
from cairn.policy.scope import Scope
from cairn.policy.writes import edge_problem
from cairn.schema.checksum import graph_checksum
from tests.e2e.adversarial.scoped_write_support import (
    INGEST,
    decision,
    remove,
    transition,
)
from tests.e2e.conftest import gql, passport

pytestmark = pytest.mark.usefixtures("acme")

EDGES = "query($id: ID!) { neighbourhood(id: $id) { edges { type } } }"


def test_a_writer_narrowed_to_fact_edges_cannot_write_a_causal_edge(
    client: TestClient, acme: Driver, registry: PolicyRegistry
) -> None:
    narrowed = passport(registry, "writer", **{"X-Edge-Allow": "HAS_FACT"})
    a, b = "acme-test-edge-a", "acme-test-edge-b"
    try:
        # The control: the two decisions alone are written, and the writer reads them back.
        body = gql(client, INGEST, narrowed, p={"decisions": [decision(a), decision(b)]})
        assert body.get("errors") is None, body
        assert gql(client, EDGES, narrowed, id=a)["data"]["neighbourhood"]["edges"] == []
        before = graph_checksum(acme)
        body = gql(client, INGEST, narrowed, p={"transitions": [transition("acme-test-edge-ab", a, b)]})
        assert body.get("data") is None, body
        assert body["errors"][0]["extensions"]["code"] == "INVALID_INPUT"
        assert graph_checksum(acme) == before
    finally:
        remove(acme, a, b)


@pytest.mark.parametrize(
    ("role", "headers", "rel", "start", "end", "allowed"),
    [
        ("writer", {}, "CAUSAL_PRECEDES", "acme/product", "acme/product", True),
        ("writer", {"X-Edge-Allow": "HAS_FACT"}, "CAUSAL_PRECEDES", "acme/product", "acme/product", False),
        ("writer", {"X-Edge-Allow": "HAS_FACT"}, "HAS_FACT", "acme/assistant", "acme/assistant", True),
        ("writer", {"X-Edge-Allow": "CAUSAL_PRECEDES"}, "ALIAS_OF", "acme/corporate", "acme/product", False),
        ("staff", {}, "ALIAS_OF", "acme/product", "acme/region_emea", True),
        ("staff", {}, "ALIAS_OF", "acme/corporate", "acme/product", False),
        ("staff", {}, "CAUSAL_PRECEDES", "acme/product", "acme/corporate", False),
        ("manager", {}, "ALIAS_OF", "acme/corporate", "acme/product", True),
    ],
)
def test_the_edge_rule_for_writes_is_the_read_rule(
    registry: PolicyRegistry,
    role: str,
    headers: dict[str, str],
    rel: str,
    start: str,
    end: str,
    allowed: bool,
) -> None:
    """``edge_problem`` (cairn/policy/writes.py), the check the fix above calls, against the role
    profiles and narrowing headers: it allows exactly the edges the caller's walk could follow."""
    caller = verify(passport(registry, role, **headers), registry, None)
    assert (edge_problem(caller.scope, rel, start, end) is None) is allowed
    assert edge_problem(Scope.system(), rel, start, end) is None
