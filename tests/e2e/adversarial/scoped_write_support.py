"""What the scoped-write and error-oracle attacks share: the demo org, a client, passports for
the writer and a narrowed writer, and records the writer may (or may not) create."""

from __future__ import annotations

from typing import Any

from neo4j import Driver
from starlette.testclient import TestClient

from cairn.ingest.org_memory import ingest_payload
from cairn.policy.profiles import PolicyRegistry
from cairn.schema.checksum import graph_checksum
from tests.e2e.conftest import gql, passport

INGEST = (
    "mutation($p: JSON!) { ingestOrgMemory(payload: $p) "
    "{ decisions events causalEdges aliases nodesCreated warnings } }"
)

# Only director and exec may read these (acme fixtures).
HIDDEN_DECISION = "acme-corp-unify-cloud-platform-2022"
HIDDEN_DECISION_2 = "acme-corp-descope-onprem-2024"
HIDDEN_EVENT = "acme-e-onprem-support-cost-2023"
NEVER = "acme-never-stored-{}"

# A writer with headers that narrow it: product and regional domains, medium at most, one namespace.
NARROW = {
    "X-Domain-Scopes": "acme/product,acme/region_*",
    "X-Sensitivity-Ceiling": "medium",
    "X-User-Namespaces": "internal",
}
WRITERS = {"writer": {}, "narrow-writer": NARROW}


def as_writer(registry: PolicyRegistry, who: str) -> dict[str, str]:
    return passport(registry, "writer", **WRITERS[who])


def decision(rid: str, **over: Any) -> dict[str, Any]:
    """A decision every writer (plain or narrowed) may create."""
    return {
        "id": rid,
        "timestamp": "2024-05-01T00:00:00Z",
        "domain": "acme/product",
        "importance": 0.5,
        "sensitivity": "low",
        "namespaces": ["internal"],
        "roles_allowed": ["writer", "director", "exec"],
        "option": f"test-only decision {rid}",
        "rationale": "attacker text",
        "decision_maker": "Mallory",
        **over,
    }


def event(rid: str, **over: Any) -> dict[str, Any]:
    base = decision(rid)
    for key in ("option", "rationale", "decision_maker"):
        base.pop(key)
    return {**base, "summary": f"test-only event {rid}", **over}


def transition(rid: str, a: str, b: str) -> dict[str, Any]:
    return {"id": rid, "from": a, "to": b, "relation": "causal", "domain": "acme/product"}


def refused(client: TestClient, driver: Driver, headers: dict[str, str], payload: Any) -> list[str]:
    """Send ``payload``; assert it was refused and that the whole graph is unchanged."""
    before = graph_checksum(driver)
    body = gql(client, INGEST, headers, p=payload)
    assert body.get("data") is None, body
    error = body["errors"][0]
    assert error["extensions"]["code"] == "INVALID_INPUT", error
    assert graph_checksum(driver) == before
    problems: list[str] = error["extensions"]["problems"]
    return problems


def seed(driver: Driver, payload: dict[str, Any]) -> None:
    """Operator write (full power), for setting up what an attacker then meets."""
    ingest_payload(driver, payload)


def remove(driver: Driver, *ids: str) -> None:
    driver.execute_query("UNWIND $ids AS id MATCH (n:Entity {id: id}) DETACH DELETE n", ids=list(ids))
